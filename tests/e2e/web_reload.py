#!/usr/bin/env python3
"""--web.config.file is re-read on SIGHUP and when it changes (docs/security.md): a new
password takes effect, a bad file is logged and the previous one keeps serving, a change made
without a signal is picked up, TLS can be switched on by a reload, and a reload to an inline
certificate and key with a rate_limit serves them and limits. Waits are for the
exporter's own log lines (bounded by a deadline only so that a broken build cannot hang).

Usage: web_reload.py RDMASCOPE. Exit 77 (skip) without curl or openssl."""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402

# bcrypt at cost 4 of "secret" and of "rotated".
SECRET = "$2b$04$gzNiwl/0J/QZFXK4QTrkQeyszaFLw8sVUhzUoTeq2/GDAJjdOfEVm"
ROTATED = "$2b$04$T2GmwRmrFmnwlbLddNs0.OAq3OBPshpNztpGxprmDs/Pg2NuFLCCq"


def status(url, user, cacert=None):
    cmd = ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-m", "20", "-u", user]
    if cacert:
        cmd += ["--cacert", cacert]
    out = subprocess.run(cmd + [url], capture_output=True, text=True)
    return int(out.stdout) if out.stdout.isdigit() else None


def wait_for_log(exporter, text, count):
    """Until `text` appears `count` times in the log."""
    deadline = time.monotonic() + 60
    while exporter.read_log().count(text) < count:
        if time.monotonic() > deadline or exporter.proc.poll() is not None:
            raise RuntimeError(f"no {count}x {text!r} in the log:\n" + exporter.read_log())
        time.sleep(0.05)


def check(failures, what, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + what + (f" ({detail})" if detail else ""))
    if not ok:
        failures.append(what)


def main(binary):
    if shutil.which("curl") is None or shutil.which("openssl") is None:
        print("SKIP: needs curl and openssl")
        return harness.SKIP
    failures = []
    with tempfile.TemporaryDirectory(prefix="rdmascope-webreload-") as d:
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:P-256", "-nodes", "-keyout", "server.key", "-out",
                        "server.crt", "-days", "2", "-subj", "/CN=localhost", "-addext",
                        "subjectAltName=IP:127.0.0.1"], cwd=d, check=True, capture_output=True)
        config = os.path.join(d, "web.yml")
        sysfs = os.path.join(d, "sys")
        os.mkdir(sysfs)

        def write(text):
            # Replaced, not rewritten in place: the exporter never reads half a file.
            with open(config + ".new", "w") as f:
                f.write(text)
            os.replace(config + ".new", config)

        write(f"basic_auth_users:\n  alice: '{SECRET}'\n")
        with harness.Exporter(binary, [f"--path.sysfs={sysfs}",
                                       f"--web.config.file={config}"]) as exporter:
            http = f"http://127.0.0.1:{exporter.port}/metrics"
            check(failures, "start: the first password works",
                  status(http, "alice:secret") == 200)

            write(f"basic_auth_users:\n  alice: '{ROTATED}'\n")
            exporter.proc.send_signal(signal.SIGHUP)
            wait_for_log(exporter, "web config reloaded", 1)
            check(failures, "SIGHUP: the new password works",
                  status(http, "alice:rotated") == 200)
            check(failures, "SIGHUP: the old password is refused",
                  status(http, "alice:secret") == 401)

            write("basic_auth_users:\n  alice: not-a-hash\n")
            exporter.proc.send_signal(signal.SIGHUP)
            wait_for_log(exporter, "web config not reloaded", 1)
            check(failures, "a bad file is logged with its reason",
                  "basic_auth_users.alice" in exporter.read_log())
            check(failures, "a bad file keeps the previous config",
                  status(http, "alice:rotated") == 200)

            # No signal: the change is noticed by itself.
            write(f"basic_auth_users:\n  alice: '{SECRET}'\n")
            wait_for_log(exporter, 'trigger="file change"', 1)
            check(failures, "file change: the password in the file works",
                  status(http, "alice:secret") == 200)

            # TLS switched on by a reload, on the same port.
            write("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
                  f"basic_auth_users:\n  alice: '{SECRET}'\n")
            exporter.proc.send_signal(signal.SIGHUP)
            wait_for_log(exporter, "web config reloaded", 3)
            https = f"https://127.0.0.1:{exporter.port}/metrics"
            check(failures, "TLS switched on by a reload: https works",
                  status(https, "alice:secret", os.path.join(d, "server.crt")) == 200)
            check(failures, "TLS switched on by a reload: plain http no longer answers 200",
                  status(http, "alice:secret") != 200)

            # The keys exporter-toolkit added since 0.8, picked up by a reload: the same
            # certificate and key given inline, and a rate_limit of 2 per hour.
            def block(key, name):
                with open(os.path.join(d, name)) as f:
                    return f"  {key}: |\n" + "".join("    " + line for line in f)
            write("tls_server_config:\n" + block("cert", "server.crt") +
                  block("key", "server.key") + "rate_limit:\n  interval: 1h\n  burst: 2\n"
                  f"basic_auth_users:\n  alice: '{SECRET}'\n")
            exporter.proc.send_signal(signal.SIGHUP)
            wait_for_log(exporter, "web config reloaded", 4)
            got = [status(https, "alice:secret", os.path.join(d, "server.crt")) for _ in range(3)]
            check(failures, "inline cert/key and rate_limit by a reload: 200, 200, then 429",
                  got == [200, 200, 429], str(got))
            check(failures, "the exporter is still running", exporter.proc.poll() is None)

    if failures:
        print(f"{len(failures)} failures")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
