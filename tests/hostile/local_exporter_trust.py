#!/usr/bin/env python3
"""Hostile tier, clients (issue 37 item 5): `doctor` without --exporter asks 127.0.0.1:9879,
where any local user can listen when no exporter does, and answer with a report of their
making. Before the fix doctor trusted whatever answered and sent it the --exporter.*
credentials.

A stand-in exporter (a small HTTP server recording each request and its Authorization
header, answering a doctor report whose fix is `touch /tmp/...`) listens on 127.0.0.1:9879:
1. run by uid 65534 (any local user): doctor asks it nothing, says why, collects here;
2. run by root but not rdmascope (python3): the same;
3. run by root from an executable named rdmascope (a copy of python3: what the check can
   verify is uid 0 and the executable's name): doctor asks it, with no credentials although
   --exporter.username/--exporter.password-file were given;
4. named with --exporter=http://127.0.0.1:9879: the credentials are sent (the user chose).
Skipped when something already listens on 9879 (a real exporter on this host).

Usage: local_exporter_trust.py RDMASCOPE_BINARY FIXTURES_DIR"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
import harness  # noqa: E402

PORT = 9879
NOBODY = 65534
MARKER = "/tmp/rdmascope-hostile-fix-ran"

STAND_IN = r"""
import http.server, json, sys
log = sys.argv[1]
report = {"schema_version": 1, "host": "forged", "generated": "2026-12-05T00:00:00Z",
          "window_seconds": 0, "findings": [{"id": "host.forged", "area": "host",
          "severity": "crit", "scope": {}, "observed": "forged", "expected": "-",
          "advice": "run the fix", "fix": "touch %s", "runbook": "-"}],
          "summary": {"crit": 1, "warn": 0, "info": 0, "ok": 0, "skip": 0}}
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open(log, "a") as f:
            f.write(json.dumps({"path": self.path,
                                "authorization": self.headers.get("Authorization")}) + "\n")
        body = json.dumps(report).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", %d), Handler)
print("LISTENING", flush=True)
server.serve_forever()
""" % (MARKER, PORT)


def port_taken():
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", PORT)) == 0


class StandIn:
    def __init__(self, work, interpreter, uid=None):
        self.log = os.path.join(work, "requests.log")
        open(self.log, "w").close()
        os.chmod(self.log, 0o666)
        script = os.path.join(work, "stand_in.py")
        with open(script, "w") as f:
            f.write(STAND_IN)
        os.chmod(script, 0o644)
        self.proc = subprocess.Popen([interpreter, script, self.log], stdout=subprocess.PIPE,
                                     text=True, user=uid, group=uid)
        if self.proc.stdout.readline().strip() != "LISTENING":
            raise RuntimeError("stand-in did not start")

    def requests(self):
        with open(self.log) as f:
            return [json.loads(line) for line in f if line.strip()]

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)


# The system's interpreter: one uid 65534 may run (pyenv's under /root it may not).
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def main(binary, fixtures):
    if os.geteuid() != 0:
        print("SKIP: the hostile tier runs rdmascope as root")
        return harness.SKIP
    if port_taken():
        print(f"SKIP: something already listens on 127.0.0.1:{PORT}")
        return harness.SKIP
    failures = []

    def expect(what, ok, detail=""):
        print(("ok" if ok else "FAIL") + f": {what}" + ("" if ok else f": {detail!r}"[:800]))
        if not ok:
            failures.append(what)

    with tempfile.TemporaryDirectory(prefix="rdmascope-hostile-trust-") as work:
        os.chmod(work, 0o755)
        sysfs = os.path.join(work, "sys")
        harness.materialise_tree(os.path.join(fixtures, "sysfs", "rdma_hosts.tree"), sysfs)
        password = os.path.join(work, "password")
        with open(password, "w") as f:
            f.write("s3cret\n")
        named_dir = os.path.join(work, "bin")
        os.mkdir(named_dir)
        named = os.path.join(named_dir, "rdmascope")
        shutil.copy(os.path.realpath(PYTHON), named)

        def doctor(*extra):
            return subprocess.run(
                [binary, "doctor", "--format=text", "--window=0s", "--collector.disable-defaults",
                 "--collector.rdma", f"--path.sysfs={sysfs}", "--exporter.username=alice",
                 f"--exporter.password-file={password}", *extra],
                capture_output=True, text=True, timeout=60)

        for label, interpreter, uid, reason in (
                ("a local user's listener", PYTHON, NOBODY, "is not root"),
                ("root's python3", PYTHON, None, "not rdmascope")):
            stand_in = StandIn(work, interpreter, uid)
            try:
                run = doctor()
                expect(f"{label}: asked nothing", stand_in.requests() == [],
                       stand_in.requests())
                expect(f"{label}: doctor says why", reason in run.stderr, run.stderr[-1500:])
                expect(f"{label}: the forged finding is not shown",
                       "host.forged" not in run.stdout, run.stdout[:500])
            finally:
                stand_in.stop()

        stand_in = StandIn(work, named)
        try:
            run = doctor()
            requests = stand_in.requests()
            expect("root's rdmascope: asked", len(requests) == 1, run.stderr[-1500:])
            expect("root's rdmascope: no credentials to an exporter nobody named",
                   requests and requests[0]["authorization"] is None, requests)
            expect("its fix is shown as a comment, display only",
                   f"# on forged, not here: touch {MARKER}" in run.stdout, run.stdout[-800:])
            run = doctor(f"--exporter=http://127.0.0.1:{PORT}")
            requests = stand_in.requests()
            expect("--exporter named: the credentials are sent",
                   len(requests) == 2 and (requests[1]["authorization"] or "").startswith("Basic"),
                   requests)
        finally:
            stand_in.stop()
        expect("no fix ran", not os.path.exists(MARKER))
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
