#!/usr/bin/env python3
"""`rdmascope doctor --exporter https://...` against a real `rdmascope serve` with a
--web.config.file asking for TLS and basic auth (the certificates and config of
web_security.py): the right CA and password give the exporter's report; a wrong CA, a wrong
password, no credentials, and a missing client certificate where the exporter requires one each
give one warning that says what to pass, then the local report. Exit 77 without openssl."""

import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402
import web_security  # noqa: E402  (make_certs, write_config, serve: one set of fixtures)

REMOTE_LOG = "doctor: report of the running exporter"


def main(binary, fixtures):
    if shutil.which("openssl") is None:
        print("SKIP: needs openssl")
        return harness.SKIP
    binary = os.path.abspath(binary)  # doctor runs in the certificates' directory
    failures = []

    def check(what, ok, detail=""):
        web_security.check(failures, what, ok, detail)

    with tempfile.TemporaryDirectory(prefix="rdmascope-doctor-tls-") as d:
        web_security.make_certs(d)
        # A second CA that did not sign the server's certificate.
        web_security.openssl("req", "-x509", "-newkey", "ec", "-pkeyopt",
                             "ec_paramgen_curve:P-256", "-nodes", "-keyout", "wrong-ca.key",
                             "-out", "wrong-ca.crt", "-days", "2", "-subj", "/CN=wrong-ca",
                             cwd=d)
        for name, text in (("right.pw", "secret\n"), ("wrong.pw", "guess\n")):
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
        sysfs = os.path.join(d, "sysfs")
        harness.materialise_tree(os.path.join(fixtures, "sysfs", "rdma_hosts.tree"), sysfs)

        def doctor(url, *args):
            return subprocess.run(
                [binary, "doctor", "--collector.disable-defaults", "--collector.rdma",
                 f"--path.sysfs={sysfs}", "--exporter.timeout=5s", "--window=0s",
                 "--format=json", f"--exporter={url}", *args],
                capture_output=True, text=True, timeout=60, cwd=d)

        def warning(run):
            lines = [line for line in run.stderr.splitlines()
                     if "level=warn" in line and "collecting here instead" in line]
            return lines[0] if len(lines) == 1 else f"{len(lines)} warnings:\n{run.stderr}"

        right = ["--exporter.ca-file=ca.crt", "--exporter.username=alice",
                 "--exporter.password-file=right.pw"]
        config = web_security.write_config(d, "web.yml")
        with web_security.serve(binary, sysfs, config) as exporter:
            url = f"https://127.0.0.1:{exporter.port}"
            run = doctor(url, *right)
            check("right CA and password: the exporter's report", REMOTE_LOG in run.stderr
                  and "level=warn" not in run.stderr, run.stderr)
            run = doctor(url, "--exporter.insecure-skip-verify", "--exporter.username=alice",
                         "--exporter.password-file=right.pw")
            check("insecure-skip-verify: the exporter's report", REMOTE_LOG in run.stderr,
                  run.stderr)
            run = doctor(url, "--exporter.ca-file=wrong-ca.crt", "--exporter.username=alice",
                         "--exporter.password-file=right.pw")
            check("wrong CA: one warning naming the untrusted certificate",
                  "TLS: the exporter's certificate is not trusted" in warning(run)
                  and "wrong-ca.crt" in warning(run), warning(run))
            check("wrong CA: the local report", run.returncode == 1 and REMOTE_LOG not in
                  run.stderr, run.returncode)
            run = doctor(url, "--exporter.ca-file=ca.crt", "--exporter.username=alice",
                         "--exporter.password-file=wrong.pw")
            check("wrong password: a clear 401",
                  "HTTP 401" in warning(run) and "refused user alice" in warning(run),
                  warning(run))
            run = doctor(url, "--exporter.ca-file=ca.crt")
            check("no credentials: the flags to pass",
                  "HTTP 401" in warning(run) and "--exporter.password-file" in warning(run),
                  warning(run))
            run = doctor(url, "--exporter.ca-file=ca.crt", "--exporter.username=alice")
            check("a user without a password file is refused at start",
                  run.returncode != 0 and "password-file" in run.stderr
                  and REMOTE_LOG not in run.stderr, run.stderr)

            # capture --exporter takes the same flags (cli/client_access_flags.h).
            def capture(name, *args):
                out = os.path.join(d, name)
                run = subprocess.run(
                    [binary, "capture", "--collector.disable-defaults", "--collector.rdma",
                     f"--path.sysfs={sysfs}", "--samples=1", f"--output={out}",
                     f"--exporter={url}", "--exporter.timeout=5s", *args],
                    capture_output=True, text=True, timeout=60, cwd=d)
                kept = os.path.isfile(os.path.join(out, "samples", "0001", "exporter", "debug",
                                                   "workloads.json"))
                missed = ""
                if os.path.isfile(os.path.join(out, "index.json")):
                    with open(os.path.join(out, "index.json")) as f:
                        missed = json.dumps(json.load(f).get("not_recorded", []))
                return run, kept, missed

            run, kept, missed = capture("cap-right", *right)
            check("capture over TLS and basic auth: /debug/workloads kept",
                  run.returncode == 0 and kept, run.stderr + missed)
            run, kept, missed = capture("cap-none", "--exporter.ca-file=ca.crt")
            check("capture without credentials: not kept, HTTP 401 in not_recorded",
                  run.returncode == 0 and not kept and "HTTP 401" in missed, missed)
            run, kept, missed = capture("cap-wrong-ca", "--exporter.ca-file=wrong-ca.crt",
                                        "--exporter.username=alice",
                                        "--exporter.password-file=right.pw")
            check("capture with the wrong CA: not kept, the TLS error in not_recorded",
                  not kept and "not trusted" in missed, missed)
            run, kept, missed = capture("cap-half", "--exporter.ca-file=ca.crt",
                                        "--exporter.username=alice")
            check("capture: a user without a password file is refused at start",
                  run.returncode != 0 and "password-file" in run.stderr, run.stderr)

        # Mutual TLS: the exporter verifies clients against the same CA.
        config = web_security.write_config(
            d, "mtls.yml", "client_auth_type: RequireAndVerifyClientCert\nclient_ca_file: ca.crt",
            users=False)
        with web_security.serve(binary, sysfs, config) as exporter:
            url = f"https://127.0.0.1:{exporter.port}"
            run = doctor(url, "--exporter.ca-file=ca.crt")
            check("mTLS without a client certificate: says which flags",
                  "--exporter.cert-file" in warning(run), warning(run))
            run = doctor(url, "--exporter.ca-file=ca.crt", "--exporter.cert-file=client.crt",
                         "--exporter.key-file=client.key")
            check("mTLS with the client certificate: the exporter's report",
                  REMOTE_LOG in run.stderr, run.stderr)
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
