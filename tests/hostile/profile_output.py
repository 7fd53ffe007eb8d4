#!/usr/bin/env python3
"""Hostile tier, output (issue 37 item 5): `profile --output DIR`, run as root, writes nothing
through a file another user planted.

Before the fix, profile wrote DIR/profile.html with open(O_TRUNC): a symlink planted there
by any local user (the README's example is /tmp/prof) made root overwrite its target.

1. DIR (root's, 0700) holds symlinks at profile.html and profile.json pointing at a file
   outside: the profile is written, both names are regular files now, the target unchanged.
2. DIR missing: created with mode 0700.
3. Refused before profiling, exit 1 with the reason, nothing written: DIR owned by another
   user, DIR mode 0777, DIR a symlink to a directory.

Usage: profile_output.py RDMASCOPE_BINARY"""

import os
import stat
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
import harness  # noqa: E402

SECRET = "root's file, not to be overwritten\n"
NOBODY = 65534


def profile(binary, output):
    return subprocess.run([binary, "profile", "--duration=2s", f"--output={output}", "--",
                           "sleep", "0.5"], capture_output=True, text=True, timeout=60)


def main(binary):
    if os.geteuid() != 0:
        print("SKIP: the hostile tier runs rdmascope as root")
        return harness.SKIP
    failures = []

    def expect(what, ok, detail=""):
        print(("ok" if ok else "FAIL") + f": {what}" + ("" if ok else f": {detail}"))
        if not ok:
            failures.append(what)

    with tempfile.TemporaryDirectory(prefix="rdmascope-hostile-profile-") as work:
        os.chmod(work, 0o755)
        target = os.path.join(work, "target")
        with open(target, "w") as f:
            f.write(SECRET)

        # 1. Planted symlinks in root's own directory.
        planted = os.path.join(work, "prof")
        os.mkdir(planted, 0o700)
        for name in ("profile.html", "profile.json"):
            os.symlink(target, os.path.join(planted, name))
        run = profile(binary, planted)
        expect("profile with planted symlinks exits 0", run.returncode == 0,
               run.stdout[-500:] + run.stderr[-1500:])
        with open(target) as f:
            expect("the symlinks' target is untouched", f.read() == SECRET)
        for name in ("profile.html", "profile.json"):
            mode = os.lstat(os.path.join(planted, name)).st_mode
            expect(f"{name} is a regular file now", stat.S_ISREG(mode))
        leftovers = [n for n in os.listdir(planted) if n.startswith(".")]
        expect("no temporary file left", not leftovers, leftovers)

        # 2. Created 0700.
        fresh = os.path.join(work, "fresh")
        run = profile(binary, fresh)
        mode = stat.S_IMODE(os.stat(fresh).st_mode) if os.path.isdir(fresh) else None
        expect("a missing directory is created 0700", run.returncode == 0 and mode == 0o700,
               f"exit {run.returncode}, mode {mode and oct(mode)}")

        # 3. Refused, before the profile runs.
        others = os.path.join(work, "others")
        os.mkdir(others, 0o700)
        os.chown(others, NOBODY, NOBODY)
        shared = os.path.join(work, "shared")
        os.mkdir(shared)
        os.chmod(shared, 0o777)
        linked = os.path.join(work, "linked")
        os.symlink(planted, linked)
        for directory, reason in ((others, "owned by uid 65534"),
                                  (shared, "writable by group or others"),
                                  (linked, "a symlink")):
            run = profile(binary, directory)
            expect(f"refused: {os.path.basename(directory)} ({reason})",
                   run.returncode == 1 and reason in run.stderr,
                   f"exit {run.returncode}: {run.stderr[-800:]}")
            if directory != linked:
                expect(f"nothing written in {os.path.basename(directory)}",
                       os.listdir(directory) == [], os.listdir(directory))
        with open(target) as f:
            expect("the target is still untouched", f.read() == SECRET)
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
