#!/usr/bin/env python3
"""Installs the .deb with apt into a fresh Debian bookworm chroot (mmdebstrap, from Debian's
mirror) as a user would on a new machine, then, inside it:
- the package is installed and configured, its user exists, /etc/default/rdmascope is there;
- `systemd-analyze verify` of the installed unit is clean with the chroot's own systemd;
- `rdmascope --version` names the version; `rdmascope check` as root exits 0;
- `rdmascope serve` as the package's unprivileged user answers a scrape that
  `promtool check metrics` accepts and that carries rdmascope_build_info.

Usage: deb_chroot.py DEB WORK_DIR   (root; RDMASCOPE_MIRROR overrides the mirror)"""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
from harness import SKIP, Exporter  # noqa: E402
import machine  # noqa: E402

import deb_tree  # noqa: E402

IN_ROOT = os.path.join(HERE, "in_root.sh")


def in_root(root, user, *cmd):
    return subprocess.run([IN_ROOT, root, user, *cmd], capture_output=True, text=True,
                          timeout=120)


def main(deb, work):
    if os.geteuid() != 0:
        print("skipped: needs root (mmdebstrap, chroot)")
        return SKIP
    machine.require("mmdebstrap")  # in_root.sh: unshare --mount --propagation private
    version = deb_tree.package_version(deb)
    root = os.path.join(work, "chroot")
    deb_tree.build(deb, root)
    failures = []
    want = lambda cond, what: cond or failures.append(what)

    status = in_root(root, "0:0", "dpkg-query", "-W", "-f=${Status} ${Version}", "rdmascope")
    print("dpkg-query:", status.stdout)
    want(status.stdout == f"install ok installed {version}", "rdmascope installed and configured")
    user = in_root(root, "0:0", "getent", "passwd", "rdmascope")
    print("getent passwd rdmascope:", user.stdout.strip())
    fields = user.stdout.strip().split(":")
    want(len(fields) == 7 and int(fields[2]) > 0, "system user rdmascope created by sysusers")
    want(os.path.isfile(os.path.join(root, "etc/default/rdmascope")), "/etc/default/rdmascope")

    if os.path.exists(os.path.join(root, "usr/bin/systemd-analyze")):
        # No man(1) in the chroot: check_deb.py checks the page.
        verify = in_root(root, "0:0", "systemd-analyze", "verify", "--man=no",
                         "rdmascope.service")
        print("systemd-analyze verify (in the chroot):", verify.returncode,
              verify.stdout.strip(), verify.stderr.strip())
        want(verify.returncode == 0 and not verify.stderr.strip(),
             "systemd-analyze verify in the chroot")

    out = in_root(root, "0:0", "rdmascope", "--version")
    print("rdmascope --version:", out.stdout.strip(), out.stderr.strip())
    want(out.returncode == 0 and version in out.stdout, f"--version names {version}")
    check = in_root(root, "0:0", "rdmascope", "check")
    print("rdmascope check:", check.returncode, "\n" + check.stdout)
    want(check.returncode == 0, "rdmascope check exits 0 as root")

    exporter = Exporter(IN_ROOT, prefix=[root, f"{fields[2]}:{fields[3]}", "/usr/bin/rdmascope"])
    try:
        body = exporter.metrics()
    finally:
        exporter.stop()
    want(f'rdmascope_build_info{{' in body and f'version="{version}"' in body,
         "rdmascope_build_info with the package's version in the scrape")
    lint = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True,
                          text=True)
    print(f"scrape as user rdmascope: {len(body.splitlines())} lines;",
          "promtool check metrics:", lint.returncode, lint.stdout.strip(), lint.stderr.strip())
    want(lint.returncode == 0, "promtool check metrics")

    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
