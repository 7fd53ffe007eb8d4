#!/usr/bin/env python3
"""`rdmascope doctor --exporter URL` against a tiny local HTTP server standing in for `serve`:
a good /doctor answer is rendered (JSON and text) with the exit code of its worst finding, the
window its counters were judged over (the exporter's lookback, since it started) and ?window=
passed on; a 500, garbage, a refused connection, a server that never answers (past
--exporter.timeout) and a bad URL each give one clear log line and a report collected locally
(the fixture tree), never a crash or a hang. --help shows no --web.* flag. TLS and basic auth
against a real `serve`: doctor_exporter_tls.py."""

import http.server
import json
import os
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402

REMOTE = {
    "schema_version": 1,
    "host": "exporter-host",
    "generated": "2026-01-01T00:00:00Z",
    "window_seconds": 600.0,
    "findings": [{
        "id": "queues.cq_capacity", "area": "queues", "severity": "crit",
        "scope": {"pid": "4242", "comm": "cq_undersized", "cq": "7"},
        "observed": "CQ of 31 entries fed by 128 WRs", "expected": "at least 192",
        "advice": "create it with at least 192 entries, 256 recommended", "fix": "",
        "runbook": "docs/runbook.md#rdmacqundersized"}],
    "summary": {"crit": 1, "warn": 0, "info": 0, "ok": 0, "skip": 0},
}

# The same report from an exporter that says where its counters were judged (window_kind):
# over its recent collections (its --doctor.lookback), or since it started.
RECENT = dict(REMOTE, window_seconds=840.0, window_kind="lookback")
YOUNG = dict(REMOTE, window_seconds=200.0, window_kind="since_start")

requests = []  # paths the server saw


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        requests.append(self.path)
        mode = self.path.split("/")[1]
        if mode == "slow":
            threading.Event().wait(30)  # never answers within doctor's timeout
            return
        status, body = {
            "good": (200, json.dumps(REMOTE)),
            "recent": (200, json.dumps(RECENT)),
            "young": (200, json.dumps(YOUNG)),
            "error": (500, "error: collector exploded\n"),
            "garbage": (200, "<html>not json</html>"),
            "auth": (401, "Unauthorized\n"),
        }[mode]
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args):
        pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(binary, fixtures):
    failures = []

    def expect(condition, message):
        if not condition:
            failures.append(str(message))

    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"

    with tempfile.TemporaryDirectory(prefix="rdmascope-doctor-exporter-") as sysfs:
        harness.materialise_tree(os.path.join(fixtures, "sysfs", "rdma_hosts.tree"), sysfs)

        def doctor(*args):
            return subprocess.run([binary, "doctor", "--collector.disable-defaults",
                                   "--collector.rdma", f"--path.sysfs={sysfs}",
                                   "--exporter.timeout=2s", *args],
                                  capture_output=True, text=True, timeout=60)

        # A good answer: rendered as it came, exit code of its worst finding (crit: 2).
        run = doctor(f"--exporter={base}/good", "--format", "json")
        report = json.loads(run.stdout)
        expect(report["host"] == "exporter-host", report["host"])
        expect(report["findings"] == REMOTE["findings"], report["findings"])
        expect(report["summary"] == REMOTE["summary"], report["summary"])
        expect(run.returncode == 2, f"crit from the exporter: exit 2, got {run.returncode}")
        expect(requests[-1] == "/good/doctor", requests)
        run = doctor(f"--exporter={base}/good", "--fail-on=crit", "--window=5s")
        expect("[CRIT] queues.cq_capacity  pid=4242 comm=cq_undersized cq=7" in run.stdout,
               run.stdout)
        expect(requests[-1] == "/good/doctor?window=5000ms", requests)
        expect(run.returncode == 2, run.returncode)
        # Which window the exporter judged counters over, said in the text and kept in JSON;
        # an exporter older than window_kind (the "good" one) is rendered as before.
        run = doctor(f"--exporter={base}/good")
        expect("(window 10 min):" in run.stdout.splitlines()[0], run.stdout)
        run = doctor(f"--exporter={base}/recent")
        expect("(window 14 min of the exporter's history):" in run.stdout.splitlines()[0],
               run.stdout)
        expect(requests[-1] == "/recent/doctor", requests)
        run = doctor(f"--exporter={base}/young")
        expect("(window 3 min, since the exporter started: younger than its lookback):"
               in run.stdout.splitlines()[0], run.stdout)
        report = json.loads(doctor(f"--exporter={base}/recent", "--format", "json").stdout)
        expect(report["window_kind"] == "lookback" and report["window_seconds"] == 840, report)
        report = json.loads(doctor(f"--exporter={base}/good", "--format", "json").stdout)
        expect("window_kind" not in report, report)
        # Thresholds given here travel with the request (the exporter's report uses them).
        run = doctor(f"--exporter={base}/good", "--doctor.nodes=64", "--doctor.flows=8",
                     "--doctor.rtt=150us")
        expect(requests[-1] == "/good/doctor?rtt=150us&nodes=64&flows=8", requests)

        # Unusable exporters: a warning naming the cause, then the local report (the tree's
        # IBA warning: exit 1), with the history checks skipped.
        cases = {
            "HTTP 500: error: collector exploded": f"{base}/error",
            "bad /doctor answer: not a JSON object": f"{base}/garbage",
            "cannot connect: ": f"http://127.0.0.1:{closed_port()}",
            "timed out: ": f"{base}/slow",
            "not an http:// or https:// URL: ftp://127.0.0.1:9879": "ftp://127.0.0.1:9879",
            "HTTP 401: Unauthorized (the exporter asks for basic auth, --web.config.file: pass "
            "--exporter.username and --exporter.password-file)": f"{base}/auth",
            "bad port in": "http://127.0.0.1:99999",
        }
        for cause, url in cases.items():
            run = doctor(f"--exporter={url}", "--format", "json", "--window", "0s")
            warnings = [line for line in run.stderr.splitlines()
                        if "level=warn" in line and "collecting here instead" in line]
            expect(len(warnings) == 1 and cause in warnings[0],
                   f"{url}: one warning naming {cause!r}:\n{run.stderr}")
            try:
                local = json.loads(run.stdout)
            except json.JSONDecodeError:
                failures.append(f"{url}: no local report:\n{run.stdout}\n{run.stderr}")
                continue
            expect(local["host"] != "exporter-host" and local["window_seconds"] == 0
                   and local["window_kind"] == "none", url)
            expect(run.returncode == 1, f"{url}: local report exit 1, got {run.returncode}")

        # --exporter=none never asks.
        before = len(requests)
        run = doctor("--exporter=none", "--format", "json", "--window", "0s")
        expect(run.returncode == 1 and len(requests) == before, "none must not ask")

    # doctor shares the collector flags, not the web ones; serve keeps both.
    doctor_help = subprocess.run([binary, "doctor", "--help"], capture_output=True, text=True)
    serve_help = subprocess.run([binary, "serve", "--help"], capture_output=True, text=True)
    expect("--web." not in doctor_help.stdout, "doctor --help lists a --web. flag")
    for flag in ("--path.sysfs", "--collector.mr", "--log.level", "--exporter", "--window"):
        expect(flag in doctor_help.stdout, f"doctor --help lacks {flag}")
    expect("--web.listen-address" in serve_help.stdout and "--path.sysfs" in serve_help.stdout,
           "serve --help lost its flags")
    expect("--exporter" not in serve_help.stdout, "serve --help shows doctor flags")
    # What serve's /doctor judges counters over is serve's to keep, not doctor's.
    def flags(help_text):
        return {line.split()[0].split("=")[0] for line in help_text.splitlines()
                if line.startswith("  -")}
    expect("--doctor.lookback" in flags(serve_help.stdout), "serve --help lacks --doctor.lookback")
    expect("--doctor.lookback" not in flags(doctor_help.stdout),
           "doctor --help shows --doctor.lookback")

    server.shutdown()
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
