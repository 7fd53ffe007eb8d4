#!/usr/bin/env python3
"""Checks the Debian package that packaging/build-deb.sh built (docs/packaging.md):

1. lintian: no error and no warning that is not overridden with a reason
   (packaging/debian/rdmascope.lintian-overrides);
2. the installed layout: binary, preload library in the multiarch libdir, rules and
   dashboards under /usr/share/rdmascope, man page, /etc/default/rdmascope as a conffile,
   sysusers.d and tmpfiles.d entries, the systemd unit;
3. dependencies: computed shared libraries (libibverbs1 ...), the providers libibverbs loads
   with dlopen (ibverbs-providers), and something that runs the postinst's systemd-sysusers;
4. the man page renders without groff warnings;
5. the unit: `systemd-analyze verify` clean against the package's own files, and
   `systemd-analyze security --offline=true` exposure at most 4.0.

Usage: check_deb.py DEB"""

import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

MAX_EXPOSURE = 4.0
UNIT = "lib/systemd/system/rdmascope.service"


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def main(deb):
    failures = []
    arch = run(["dpkg-architecture", "-qDEB_HOST_MULTIARCH"]).stdout.strip()

    lintian = run(["lintian", "--fail-on", "error,warning", "--display-level", ">=info",
                   "--show-overrides", deb])
    print("lintian:\n" + (lintian.stdout.strip() or "(no tags)"), lintian.stderr.strip())
    if lintian.returncode != 0:
        failures.append("lintian reports an error or a warning that is not overridden")

    contents = run(["dpkg-deb", "--contents", deb]).stdout
    paths = {line.split()[5].removeprefix(".") for line in contents.splitlines()}
    expected = [
        "/usr/bin/rdmascope",
        f"/usr/lib/{arch}/rdmascope/librdmascope_preload.so",
        "/usr/share/rdmascope/rules/rdmascope.rules.yml",
        "/usr/share/rdmascope/rules/rdmascope.fleet.rules.yml",
        "/usr/share/rdmascope/rules/rdmascope.node-exporter-compat.rules.yml",
        "/usr/share/rdmascope/dashboards/host-overview.json",
        "/usr/share/man/man1/rdmascope.1.gz",
        "/etc/default/rdmascope",
        "/usr/lib/sysusers.d/rdmascope.conf",
        "/usr/lib/tmpfiles.d/rdmascope.conf",
        "/" + UNIT,
    ]
    for path in expected:
        if path not in paths:
            failures.append(f"{path} not in the package")

    conffiles = run(["dpkg-deb", "--info", deb, "conffiles"]).stdout.split()
    if "/etc/default/rdmascope" not in conffiles:
        failures.append(f"/etc/default/rdmascope is not a conffile ({conffiles})")
    depends = run(["dpkg-deb", "--field", deb, "Depends"]).stdout.strip()
    print("Depends:", depends)
    for needed in ("libibverbs1", "ibverbs-providers", "libbpf1", "systemd-sysusers"):
        if not re.search(rf"(^|[\s,|]){re.escape(needed)}([\s(,|]|$)", depends):
            failures.append(f"Depends lacks {needed}")

    with tempfile.TemporaryDirectory(prefix="rdmascope-deb-") as root:
        subprocess.run(["dpkg-deb", "--extract", deb, root], check=True)
        # The package's files on top of this host's targets (the unit orders itself after
        # network.target and is wanted by multi-user.target); the man page is checked below.
        units = os.path.join(root, os.path.dirname(UNIT))
        for target in glob.glob("/lib/systemd/system/*.target"):
            shutil.copy(target, units)
        # ExecReload= runs /bin/sh (dash, Essential: on every Debian system), which the
        # package does not ship: verify checks that the command exists and is executable.
        os.makedirs(os.path.join(root, "bin"), exist_ok=True)
        shutil.copy(os.path.realpath("/bin/sh"), os.path.join(root, "bin/sh"))
        verify = run(["systemd-analyze", "verify", "--man=no", f"--root={root}", "/" + UNIT])
        print("systemd-analyze verify:", verify.returncode, verify.stdout.strip(),
              verify.stderr.strip())
        if verify.returncode != 0 or verify.stderr.strip():
            failures.append("systemd-analyze verify is not clean")
        page = os.path.join(root, "usr/share/man/man1/rdmascope.1.gz")
        man = run(["man", "--warnings", "-E", "UTF-8", "-l", "-Tutf8", "-Z", page],
                  env=dict(os.environ, LC_ALL="C.UTF-8", MANROFFSEQ="", MANWIDTH="80"))
        print("man --warnings rdmascope.1:", man.returncode, man.stderr.strip())
        if man.returncode != 0 or man.stderr.strip():
            failures.append("the man page does not render without warnings")
        security = run(["systemd-analyze", "security", "--offline=true", "--no-pager",
                        os.path.join(root, UNIT)])
        match = re.search(r"Overall exposure level for \S+: ([0-9.]+)", security.stdout)
        exposure = float(match.group(1)) if match else None
        print(f"systemd-analyze security --offline=true: exposure {exposure}")
        if exposure is None or exposure > MAX_EXPOSURE:
            print(security.stdout)
            failures.append(f"exposure {exposure} above {MAX_EXPOSURE}")

    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
