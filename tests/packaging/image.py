#!/usr/bin/env python3
"""Builds the OCI image with packaging/build-image.sh from the .deb, then checks it as a
runtime would see it:
- the image configuration: a numeric non-root user (Kubernetes' runAsNonRoot can verify it),
  entrypoint `rdmascope serve`, port 9879;
- its root file system, unpacked with umoci, has no apt lists or documentation;
- the entrypoint run in that root file system as the image's user (in_root.sh: chroot in a
  private mount namespace, the host's network) answers a scrape that `promtool check metrics`
  accepts and that carries rdmascope_build_info.

Usage: image.py SOURCE_DIR DEB WORK_DIR   (root)"""

import glob
import json
import os
import shutil
import subprocess
import sys
import tarfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
from harness import SKIP, Exporter  # noqa: E402
import machine  # noqa: E402

IN_ROOT = os.path.join(HERE, "in_root.sh")


def blob(layout, digest):
    algo, value = digest.split(":")
    with open(os.path.join(layout, "blobs", algo, value)) as f:
        return json.load(f)


def main(source, deb, work):
    if os.geteuid() != 0:
        print("skipped: needs root (mmdebstrap, buildah, chroot)")
        return SKIP
    machine.require("mmdebstrap")  # the image's entrypoint is run with in_root.sh
    shutil.rmtree(work, ignore_errors=True)
    dist = os.path.join(work, "dist")
    env = dict(os.environ, RDMASCOPE_DIST=dist,
               RDMASCOPE_IMAGE_WORKDIR=os.path.join(work, "build"))
    subprocess.run([os.path.join(source, "packaging/build-image.sh"), os.path.abspath(deb)],
                   env=env, check=True)
    (image,) = glob.glob(os.path.join(dist, "rdmascope-*.oci.tar"))
    version = os.path.basename(image).removeprefix("rdmascope-").removesuffix(".oci.tar")
    print(f"image: {image}, {os.path.getsize(image) / 2**20:.1f} MiB")

    failures = []
    want = lambda cond, what: cond or failures.append(what)
    layout = os.path.join(work, "oci")
    with tarfile.open(image) as tar:
        tar.extractall(layout)
    with open(os.path.join(layout, "index.json")) as f:
        (manifest_ref,) = json.load(f)["manifests"]
    tag = manifest_ref.get("annotations", {}).get("org.opencontainers.image.ref.name")
    want(tag == f"rdmascope:{version}" or tag == version, f"image tagged {version} ({tag})")
    manifest = blob(layout, manifest_ref["digest"])
    config = blob(layout, manifest["config"]["digest"])["config"]
    print("image config:", json.dumps(config))
    user = config.get("User", "")
    uid, _, gid = user.partition(":")
    want(uid.isdigit() and int(uid) > 0 and gid.isdigit(), f"numeric non-root user ({user})")
    entrypoint = config.get("Entrypoint") or []
    want(entrypoint == ["/usr/bin/rdmascope", "serve"], f"entrypoint rdmascope serve ({entrypoint})")
    want("9879/tcp" in config.get("ExposedPorts", {}), "port 9879 exposed")

    bundle = os.path.join(work, "bundle")
    subprocess.run(["umoci", "unpack", "--image", f"{layout}:{tag}", bundle], check=True)
    rootfs = os.path.join(bundle, "rootfs")
    lists = [p for p in glob.glob(os.path.join(rootfs, "var/lib/apt/lists/*")) if
             os.path.basename(p) not in ("lock", "partial", "auxfiles")]
    want(not lists, f"no apt lists in the image ({lists[:3]})")
    docs = [p for p in glob.glob(os.path.join(rootfs, "usr/share/doc/*/*"))
            if os.path.basename(p) != "copyright"]
    want(not docs, f"no documentation but copyright files ({docs[:3]})")

    if entrypoint[1:] == ["serve"]:
        exporter = Exporter(IN_ROOT, prefix=[rootfs, user, entrypoint[0]])
        try:
            body = exporter.metrics()
        finally:
            exporter.stop()
        lint = subprocess.run(["promtool", "check", "metrics"], input=body,
                              capture_output=True, text=True)
        print(f"scrape of the image's entrypoint as {user}: {len(body.splitlines())} lines;",
              "promtool check metrics:", lint.returncode, lint.stdout.strip(), lint.stderr.strip())
        want(lint.returncode == 0, "promtool check metrics")
        want(f'version="{version}"' in body, "rdmascope_build_info with the image's version")

    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
