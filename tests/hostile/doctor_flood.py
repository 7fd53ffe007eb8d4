#!/usr/bin/env python3
"""Hostile tier, clients (issue 37 item 4): unauthenticated clients flooding /doctor cannot
starve /metrics or the health endpoints.

Before the fix, 16 `GET /doctor?window=60s` each slept 60 s on a libmicrohttpd thread (4 by
default), uncounted by --web.max-requests: /metrics went unanswered after 10 s, and so did a
Prometheus keep-alive connection owned by a sleeping thread.

1. 16 concurrent `GET /doctor?window=60s`: each refused at once (400: the window is at most
   10 s; or 503 past the debug routes' own limit), never a 60 s wait.
2. 20 concurrent `GET /doctor?window=10s` (and 4 `/doctor.html?window=10s`): at most
   16 admitted (kMaxCostlyInFlight), the rest 503 at once, counted in
   rdmascope_http_requests_rejected_total{reason="costly_requests"}; every admitted one
   answers 200 with the same live window (one observation shared), all within one window plus
   slack, not one after another.
3. Throughout both, /metrics on a fresh connection and on one kept alive, /-/healthy and
   /-/ready answer 200 every 0.3 s, each within METRICS_DEADLINE.

Usage: doctor_flood.py RDMASCOPE_BINARY FIXTURES_DIR"""

import http.client
import json
import os
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
import harness  # noqa: E402

METRICS_DEADLINE = 3.0  # seconds: /metrics of this fixture answers in milliseconds
WINDOW = 10             # the live window the flood asks for: the most the exporter allows
FLOOD = 20
COSTLY_LIMIT = 16       # HttpHandler::kMaxCostlyInFlight


def get(port, path, timeout=60):
    """(status, body, seconds)."""
    start = time.monotonic()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
            return r.status, r.read().decode(), time.monotonic() - start
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(), time.monotonic() - start
    except OSError as err:
        return None, repr(err), time.monotonic() - start


class Prober:
    """Scrapes and health probes every 0.3 s while the flood runs, timing each."""

    def __init__(self, port):
        self.port = port
        self.samples = []  # (what, status, seconds)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run)
        self.thread.start()

    def run(self):
        keep_alive = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        while True:
            for path in ("/metrics", "/-/healthy", "/-/ready"):
                status, _, seconds = get(self.port, path, timeout=30)
                self.samples.append((path, status, seconds))
            start = time.monotonic()
            try:
                keep_alive.request("GET", "/metrics")
                answer = keep_alive.getresponse()
                answer.read()
                status = answer.status
            except OSError as err:
                status = repr(err)
                keep_alive.close()
                keep_alive = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            self.samples.append(("/metrics (keep-alive)", status, time.monotonic() - start))
            if self.stop.wait(0.3):
                break
        keep_alive.close()

    def finish(self, phase, failures):
        self.stop.set()
        self.thread.join()
        slow = [s for s in self.samples if s[1] != 200 or s[2] > METRICS_DEADLINE]
        worst = max((s[2] for s in self.samples), default=0)
        if not self.samples:
            failures.append(f"{phase}: no probe ran")
        elif slow:
            failures.append(f"{phase}: {len(slow)} of {len(self.samples)} probes failed or "
                            f"took over {METRICS_DEADLINE} s: {slow[:5]}")
        else:
            print(f"ok: {phase}: {len(self.samples)} probes of /metrics and health, all 200, "
                  f"slowest {worst * 1000:.0f} ms")
        return worst


def flood(port, paths):
    results = [None] * len(paths)

    def one(i):
        results[i] = get(port, paths[i], timeout=120)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(paths))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    return results


def main(binary, fixtures):
    if os.geteuid() != 0:
        print("SKIP: the hostile tier runs the exporter as root")
        return harness.SKIP
    failures = []
    with tempfile.TemporaryDirectory(prefix="rdmascope-doctor-flood-") as work:
        sysfs = os.path.join(work, "sys")
        harness.materialise_tree(os.path.join(fixtures, "sysfs", "rdma_hosts.tree"), sysfs)
        with harness.Exporter(binary, ["--collector.disable-defaults", "--collector.rdma",
                                       f"--path.sysfs={sysfs}"]) as exporter:
            port = exporter.port
            # 1. Windows past the bound: refused at once.
            prober = Prober(port)
            start = time.monotonic()
            results = flood(port, ["/doctor?window=60s"] * 16)
            took = time.monotonic() - start
            prober.finish("16 x /doctor?window=60s", failures)
            statuses = sorted(str(r[0]) for r in results)
            if any(r[0] not in (400, 503) for r in results) or took > 5:
                failures.append(f"/doctor?window=60s: {statuses} in {took:.1f} s, want 400 "
                                f"or 503 at once; first body {results[0][1][:200]!r}")
            else:
                print(f"ok: 16 x /doctor?window=60s refused in {took:.2f} s: "
                      f"{results[0][1].strip()}")

            # 2. The most a client may ask for, many times over: one shared observation.
            prober = Prober(port)
            paths = [f"/doctor?window={WINDOW}s"] * FLOOD + \
                    [f"/doctor.html?window={WINDOW}s"] * 4
            start = time.monotonic()
            results = flood(port, paths)
            took = time.monotonic() - start
            prober.finish(f"{len(paths)} x /doctor?window={WINDOW}s", failures)
            served = [r for r in results if r[0] == 200]
            refused = [r for r in results if r[0] == 503]
            if len(served) + len(refused) != len(paths) or not served or \
                    len(served) > COSTLY_LIMIT:
                failures.append(f"window={WINDOW}s flood: "
                                f"{sorted(str(r[0]) for r in results)}, want at most "
                                f"{COSTLY_LIMIT} 200 and 503 for the rest")
            windows = set()
            for status, body, _ in served:
                if body.startswith("{"):
                    report = json.loads(body)
                    windows.add((report["window_kind"], report["window_seconds"]))
            if len(windows) != 1 or next(iter(windows))[0] != "live":
                failures.append(f"the admitted reports observed {len(windows)} windows "
                                f"{windows}: want one live window, shared")
            # Shared, not serialised on the lane's two threads: one window plus collections.
            if took > WINDOW + 8:
                failures.append(f"the flood took {took:.1f} s: the window was not shared")
            slow_refusals = [r[2] for r in refused if r[2] > 3]
            if slow_refusals:
                failures.append(f"a refusal took {max(slow_refusals):.1f} s")
            if len(windows) == 1 and took <= WINDOW + 8 and not slow_refusals:
                print(f"ok: {len(served)} served from one live window {windows}, "
                      f"{len(refused)} refused at once; {took:.1f} s in all")

            status, body, _ = get(port, "/metrics")
            samples = harness.parse(body) if status == 200 else []
            counted = harness.value(samples, "rdmascope_http_requests_rejected_total",
                                    reason="costly_requests") if samples else None
            if counted is None or counted < len(refused):
                failures.append(f"rejected_total{{reason=\"costly_requests\"}} = {counted}, "
                                f"want at least {len(refused)}")
            if exporter.proc.poll() is not None:
                failures.append("exporter died:\n" + exporter.read_log()[-2000:])
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
