#!/usr/bin/env python3
"""The Kubernetes base (packaging/kubernetes/) renders, validates and says what we ship:

1. `kubectl kustomize` renders it (the kubectl npm_tools.sh installs into NPM_DIR/bin);
2. the generated PrometheusRules and dashboards ConfigMap are in sync with rules/ and
   dashboards/ (generate.py --check), and each PrometheusRule's spec equals its rules file,
   which `promtool check rules` accepts once extracted from the rendered output;
3. every object validates against the Kubernetes and prometheus-operator schemas
   (validate_manifests.mjs, npm packages installed by npm_tools.sh into NPM_DIR);
4. the DaemonSet keeps its promises (docs/deployment.md): hostPID, hostNetwork, the host's /sys
   and /proc read-only and passed with --path.*, /run/rdmascope shared, not privileged, no
   privilege escalation, capabilities: drop ALL and add exactly those of the systemd unit,
   which are docs/security.md's start-up list,
   RuntimeDefault seccomp, read-only root filesystem, requests and a memory limit.

Usage: check_kubernetes.py SOURCE_DIR NPM_DIR"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def unit_capabilities(source):
    with open(os.path.join(source, "packaging/debian/rdmascope.service")) as f:
        for line in f:
            if line.startswith("AmbientCapabilities="):
                return {c.removeprefix("CAP_") for c in line.split("=", 1)[1].split()}
    return set()


def documented_capabilities(source):
    """The start-up list between docs/security.md's capabilities:begin/end markers."""
    with open(os.path.join(source, "docs/security.md")) as f:
        text = f.read()
    block = text.partition("<!-- capabilities:begin")[2].partition("<!-- capabilities:end")[0]
    return {c.removeprefix("CAP_") for line in block.splitlines()
            if line.strip().startswith("CAP_") for c in line.split()}


def check_daemonset(ds, caps, failures):
    spec = ds["spec"]["template"]["spec"]
    want = lambda cond, what: cond or failures.append(f"DaemonSet: {what}")
    want(spec.get("hostPID") is True, "hostPID")
    want(spec.get("hostNetwork") is True, "hostNetwork")
    want(spec.get("priorityClassName") == "system-node-critical",
         "priorityClassName system-node-critical")
    want(spec.get("tolerations") == [{"operator": "Exists"}],
         "tolerates every taint (operator: Exists, no effect)")
    want(spec.get("automountServiceAccountToken") is False, "no service account token")
    want(spec.get("securityContext", {}).get("seccompProfile", {}).get("type") == "RuntimeDefault",
         "seccompProfile RuntimeDefault")
    (container,) = spec["containers"]
    # Probes on the paths served without basic auth (once --web.config.file sets it).
    for probe, path in (("livenessProbe", "/-/healthy"), ("readinessProbe", "/-/ready")):
        want(container.get(probe, {}).get("httpGet", {}).get("path") == path,
             f"{probe} on {path}")
    sc = container["securityContext"]
    want(sc.get("privileged") is False, "not privileged")
    want(sc.get("allowPrivilegeEscalation") is False, "allowPrivilegeEscalation false")
    want(sc.get("readOnlyRootFilesystem") is True, "readOnlyRootFilesystem")
    want(sc.get("capabilities", {}).get("drop") == ["ALL"], "capabilities drop [ALL]")
    added = set(sc.get("capabilities", {}).get("add", []))
    # As root, SETUID and SETGID as well: the helpers become nobody (the unit's user is not root).
    root_extra = {"SETUID", "SETGID"}
    want(added == caps | root_extra,
         f"capabilities add {sorted(added)} != the unit's {sorted(caps)} + {sorted(root_extra)}")
    volumes = {v["name"]: v for v in spec["volumes"]}
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    args = container.get("args", [])
    for flag, path in (("--path.sysfs", "/sys"), ("--path.procfs", "/proc")):
        mount_path = next((a.split("=", 1)[1] for a in args if a.startswith(flag + "=")), None)
        mount = mounts.get(mount_path or "")
        want(mount is not None and mount.get("readOnly") is True,
             f"{flag} points at a read-only mount")
        if mount:
            want(volumes[mount["name"]].get("hostPath", {}).get("path") == path,
                 f"{flag}'s mount is the host's {path}")
    # The kubelet's PodResources socket (rdma_device_workload_info): its directory, read-only.
    kubelet = next((a.split("=", 1)[1] for a in args
                    if a.startswith("--collector.workload.kubelet-socket=")), "")
    kubelet_dir = os.path.dirname(kubelet.removeprefix("unix://"))
    mount = mounts.get(kubelet_dir)
    want(mount is not None and mount.get("readOnly") is True and
         volumes[mount["name"]].get("hostPath", {}).get("path") ==
         "/var/lib/kubelet/pod-resources",
         "--collector.workload.kubelet-socket in a read-only mount of the host's "
         "/var/lib/kubelet/pod-resources")
    preload = mounts.get("/run/rdmascope")
    want(preload is not None and
         volumes[preload["name"]].get("hostPath", {}).get("path") == "/run/rdmascope",
         "/run/rdmascope of the host mounted at /run/rdmascope")
    resources = container.get("resources", {})
    want({"cpu", "memory"} <= set(resources.get("requests", {})), "cpu and memory requests")
    want("memory" in resources.get("limits", {}), "memory limit")


def main(source, npm_dir):
    failures = []
    kustomize = os.path.join(source, "packaging/kubernetes")
    # The kubectl npm_tools.sh installed (pinned), not whichever one the machine has.
    rendered = run([os.path.join(npm_dir, "bin", "kubectl"), "kustomize", kustomize])
    if rendered.returncode != 0:
        print(rendered.stderr)
        return 1
    docs = [d for d in yaml.safe_load_all(rendered.stdout) if d]
    print(f"kubectl kustomize: {len(docs)} objects: "
          + ", ".join(f"{d['kind']}/{d['metadata']['name']}" for d in docs))

    sync = run([sys.executable, os.path.join(kustomize, "generate.py"), "--check"])
    print(sync.stdout.strip())
    if sync.returncode != 0:
        failures.append("generated files out of sync")

    rules_files = {"rdmascope": "rules/rdmascope.rules.yml",
                   "rdmascope-fleet": "rules/rdmascope.fleet.rules.yml"}
    kinds = {}
    for doc in docs:
        kinds.setdefault(doc["kind"], {})[doc["metadata"]["name"]] = doc
    for name, rules_file in rules_files.items():
        rule = kinds.get("PrometheusRule", {}).get(name)
        if not rule:
            failures.append(f"no PrometheusRule {name}")
            continue
        with open(os.path.join(source, rules_file)) as f:
            if rule["spec"] != yaml.safe_load(f):
                failures.append(f"PrometheusRule {name} differs from {rules_file}")
        with tempfile.NamedTemporaryFile("w", suffix=".yml") as f:
            yaml.safe_dump(rule["spec"], f)
            f.flush()
            check = run(["promtool", "check", "rules", f.name])
            print(f"promtool check rules ({name}):", check.stdout.strip().splitlines()[-1:])
            if check.returncode != 0:
                failures.append(f"promtool check rules on PrometheusRule {name}: {check.stderr}")

    dashboards = kinds.get("ConfigMap", {}).get("rdmascope-dashboards")
    if not dashboards or dashboards["metadata"].get("labels", {}).get("grafana_dashboard") != "1":
        failures.append("dashboards ConfigMap with label grafana_dashboard=1")

    caps = unit_capabilities(source)
    documented = documented_capabilities(source)
    print("capabilities: unit", sorted(caps), "docs/security.md", sorted(documented))
    if caps != documented:
        failures.append(f"the unit's capabilities {sorted(caps)} are not docs/security.md's "
                        f"start-up list {sorted(documented)}")
    check_daemonset(kinds["DaemonSet"]["rdmascope"], caps, failures)

    node = shutil.which("node")
    if not node:
        failures.append("node (nodejs) not installed: schemas not checked")
    else:
        validate = run([node, os.path.join(source, "tests/packaging/validate_manifests.mjs"),
                        os.path.join(npm_dir, "node_modules")], input=rendered.stdout)
        print(validate.stdout.strip(), validate.stderr.strip())
        if validate.returncode != 0:
            failures.append("schema validation")

    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
