#!/usr/bin/env python3
"""Differential test of --web.config.file against exporter-toolkit itself: every
web/testdata/*.yml of exporter-toolkit's Debian package (golang-github-prometheus-exporter-
toolkit-dev) that `promtool check web-config` (exporter-toolkit's Validate, what operators run)
accepts, `rdmascope serve --web.config.check` accepts, and every one it rejects, rdmascope
rejects. Some fixtures named *.bad.yml fail only at handshake time in exporter-toolkit's own
tests: promtool's verdict, not the name, is the reference.

Then the fixtures of current exporter-toolkit that 0.8.2 lacks (tests/fixtures/web/
exporter-toolkit-master: inline cert/key, client_allowed_sans, rate_limit), against the
verdicts current exporter-toolkit's Validate gives (CURRENT_VERDICTS, read from its source).
Debian's promtool (2.42, exporter-toolkit 0.8.2) rejects each of them for a key it does not
know ("field rate_limit not found in type web.Config"): such a rejection is reported as
"promtool predates the key", any other disagreement with the verdict fails the test (so a newer
promtool is compared in full).

Usage: web_config_differential.py RDMASCOPE [TESTDATA_DIR]. Exit 77 (skip) without the 0.8.2
fixtures or promtool."""

import glob
import os
import shutil
import subprocess
import sys

SKIP = 77
DEFAULT_TESTDATA = ("/usr/share/gocode/src/github.com/prometheus/exporter-toolkit/web/"
                    "testdata")
CURRENT_TESTDATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures",
                                "web", "exporter-toolkit-master")
# Current exporter-toolkit (web/tls_config.go at 19a7c2d, 2026-07): Validate's verdict and, for
# a rejection, the words of its error. *.bad.* fixtures that Validate accepts fail only at the
# handshake in its own tests (a client certificate without an allowed SAN).
CURRENT_VERDICTS = {
    "tls_config_noAuth.requireanyclientcertkeyinline.good.yml": (True, None),
    "web_config_auth_client_san.bad.yaml": (True, None),
    "web_config_auth_client_san.good.yaml": (True, None),
    "web_config_noAuth_cert_empty.bad.yml": (False, "missing one of cert or cert_file"),
    "web_config_noAuth_key_empty.bad.yml": (False, "missing one of key or key_file"),
    "web_config_noAuth_tlsInline.good.yml": (True, None),
    "web_config_rate_limiter_nonblocking.yaml": (True, None),
    "web_config_rate_limiter_one_second.yaml": (True, None),
    "docs_web-config.yml": (True, None),
}


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
    return 1 if disagreements or not check_current(binary, promtool) else 0


def check_current(binary, promtool):
    """True if rdmascope gives every current fixture current exporter-toolkit's verdict."""
    files = sorted(f for f in os.listdir(CURRENT_TESTDATA) if f.endswith((".yml", ".yaml")))
    failures = []
    if sorted(files) != sorted(CURRENT_VERDICTS):
        failures.append(f"fixtures {files} and verdicts {sorted(CURRENT_VERDICTS)} differ")
    for name in files:
        want, words = CURRENT_VERDICTS.get(name, (None, None))
        got, got_text = verdict(
            [binary, "serve", f"--web.config.file={name}", "--web.config.check"],
            CURRENT_TESTDATA)
        same = got == want and (want or words in got_text)
        old, old_text = verdict([promtool, "check", "web-config", name], CURRENT_TESTDATA)
        if not old and "not found in type web." in old_text:
            promtool_note = "promtool predates the key"  # whatever the verdict should be
        elif old == want:
            promtool_note = "promtool agrees"
        else:
            promtool_note = "promtool DISAGREES"
            failures.append(f"{name}: promtool: {old_text}")
        print(f"{'same' if same else 'DIFF'} exporter-toolkit={'ok' if want else 'reject'} "
              f"rdmascope={'ok' if got else 'reject'} ({promtool_note}) {name}")
        if not same:
            failures.append(f"{name}:\n  want: {'ok' if want else words}\n  rdmascope: {got_text}")
    print(f"{len(files)} current exporter-toolkit files, {len(failures)} disagreements")
    for text in failures:
        print(text)
    return not failures


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else DEFAULT_TESTDATA))
