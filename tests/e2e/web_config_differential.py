#!/usr/bin/env python3
"""Differential test of --web.config.file against exporter-toolkit itself: every
web/testdata/*.yml of exporter-toolkit's Debian package (golang-github-prometheus-exporter-
toolkit-dev) that `promtool check web-config` (exporter-toolkit's Validate, what operators run)
accepts, `rdmascope serve --web.config.check` accepts, and every one it rejects, rdmascope
rejects. Some fixtures named *.bad.yml fail only at handshake time in exporter-toolkit's own
tests: promtool's verdict, not the name, is the reference.

Usage: web_config_differential.py RDMASCOPE [TESTDATA_DIR]. Exit 77 (skip) without the
fixtures or promtool."""

import glob
import os
import shutil
import subprocess
import sys

SKIP = 77
DEFAULT_TESTDATA = ("/usr/share/gocode/src/github.com/prometheus/exporter-toolkit/web/"
                    "testdata")


def verdict(cmd, cwd):
    result = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=60)
    return result.returncode == 0, (result.stdout + result.stderr).strip()


def main(binary, testdata):
    binary = os.path.abspath(binary)
    promtool = shutil.which("promtool")
    files = sorted(glob.glob(os.path.join(testdata, "*.yml")))
    if promtool is None or not files:
        print(f"SKIP: need promtool and exporter-toolkit's fixtures in {testdata}")
        return SKIP
    disagreements = []
    accepted = 0
    for path in files:
        name = os.path.basename(path)
        # Both from the fixtures' directory: relative paths inside resolve the same way.
        want, want_text = verdict([promtool, "check", "web-config", name], testdata)
        got, got_text = verdict(
            [binary, "serve", f"--web.config.file={name}", "--web.config.check"], testdata)
        accepted += want
        print(f"{'same' if want == got else 'DIFF'} promtool={'ok' if want else 'reject'} "
              f"rdmascope={'ok' if got else 'reject'} {name}")
        if want != got:
            disagreements.append(f"{name}:\n  promtool: {want_text}\n  rdmascope: {got_text}")
    print(f"{len(files)} files, {accepted} accepted by promtool, "
          f"{len(disagreements)} disagreements")
    # A fixture set with no accepted or no rejected file would prove little.
    if accepted == 0 or accepted == len(files):
        print("FAIL: the fixtures should hold both valid and invalid files")
        return 1
    for text in disagreements:
        print(text)
    return 1 if disagreements else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else DEFAULT_TESTDATA))
