#!/usr/bin/env python3
"""Benchmark (reported, never asserted; issue 18 item 2): `rdmascope serve` under load.

1. hey (Debian's, a Go client: keep-alive connections, Accept-Encoding: gzip as Prometheus
   sends) with 64 concurrent scrapers for --seconds against the default server settings
   (--web.threads=4, --web.max-requests=40): requests, errors (want 0), status codes, latency
   percentiles; the exporter's RSS sampled every 0.25 s throughout.
2. Slowloris: 50 scrapes one after the other on new connections, first with no other client,
   then with 100 idle and 100 half-sent connections open (dripping a byte every 0.5 s):
   median and worst scrape time of each, and the difference (want < 1 s).

The exporter serves the rdma collector on tests/fixtures/sysfs/rdma_hosts.tree (no root, no
hardware): the figures are the server's, not a large host's collection.

Usage: load_bench.py RDMASCOPE_BINARY FIXTURES_DIR OUTPUT_DIR [--seconds N]
Writes OUTPUT_DIR/load_bench.md and prints it."""

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
import harness  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
from slow_clients import SlowClients, rss_kib  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from prometheus_run import parse_hey  # noqa: E402


class RssSampler:
    def __init__(self, pid, period=0.25):
        self.pid, self.period, self.samples = pid, period, []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run)
        self.thread.start()

    def run(self):
        while not self.stop.is_set():
            self.samples.append(rss_kib(self.pid))
            self.stop.wait(self.period)

    def finish(self):
        self.stop.set()
        self.thread.join()
        return self.samples


def hey(url, seconds, concurrency):
    return parse_hey(subprocess.run(["hey", "-z", f"{seconds}s", "-c", str(concurrency), "-t",
                                     "20", url], capture_output=True, text=True, check=True).stdout)


def timed_scrapes(port, n):
    times = []
    for _ in range(n):
        start = time.perf_counter()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
            r.read()
        times.append(time.perf_counter() - start)
    return times


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("fixtures")
    parser.add_argument("output")
    parser.add_argument("--seconds", type=int, default=60)
    args = parser.parse_args()
    if shutil.which("hey") is None:
        print("SKIP: hey not installed (Debian package hey)")
        return harness.SKIP
    os.makedirs(args.output, exist_ok=True)
    lines = []
    with tempfile.TemporaryDirectory(prefix="rdmascope-load-") as sysfs:
        harness.materialise_tree(os.path.join(args.fixtures, "sysfs", "rdma_hosts.tree"), sysfs)
        with harness.Exporter(args.binary, ["--collector.disable-defaults", "--collector.rdma",
                                            f"--path.sysfs={sysfs}"]) as exporter:
            pid, port = exporter.proc.pid, exporter.port
            timed_scrapes(port, 5)
            rss_start = rss_kib(pid)
            sampler = RssSampler(pid)
            load = hey(f"http://127.0.0.1:{port}/metrics", args.seconds, 64)
            samples = sampler.finish()
            p = load["percentiles"]
            lines += [
                f"## 64 keep-alive gzip scrapers (hey) for {args.seconds} s",
                "",
                "| requests | req/s | errors | status codes | p50 | p90 | p99 | slowest |",
                "|---|---|---|---|---|---|---|---|",
                f"| {sum(load['codes'].values())} | {load['rps']:.0f} | {load['errors']} | "
                + ", ".join(f"{c}: {n}" for c, n in sorted(load["codes"].items()))
                + f" | {p.get(50, 0) * 1e3:.1f} ms | {p.get(90, 0) * 1e3:.1f} ms | "
                f"{p.get(99, 0) * 1e3:.1f} ms | {(load['slowest'] or 0) * 1e3:.1f} ms |",
                "",
                f"RSS: {rss_start} KiB before, {min(samples)}-{max(samples)} KiB during "
                f"({len(samples)} samples every 0.25 s), {rss_kib(pid)} KiB after.",
                "",
            ]
            quiet = timed_scrapes(port, 50)
            clients = SlowClients(port)
            try:
                loaded = timed_scrapes(port, 50)
            finally:
                clients.close()
            extra = statistics.median(loaded) - statistics.median(quiet)
            lines += [
                "## Slowloris: 50 scrapes on new connections, with 200 idle/half-sent open",
                "",
                "| | median | worst |",
                "|---|---|---|",
                f"| no other client | {statistics.median(quiet) * 1e3:.2f} ms | "
                f"{max(quiet) * 1e3:.2f} ms |",
                f"| 100 idle + 100 half-sent connections | {statistics.median(loaded) * 1e3:.2f} ms "
                f"| {max(loaded) * 1e3:.2f} ms |",
                "",
                f"Extra per scrape (median): {extra * 1e3:+.2f} ms; worst extra "
                f"{(max(loaded) - max(quiet)) * 1e3:+.2f} ms. RSS with them open: "
                f"{rss_kib(pid)} KiB.",
            ]
            if exporter.proc.poll() is not None:
                lines.append("\nThe exporter DIED during the run.")
    report = "\n".join(lines) + "\n"
    with open(os.path.join(args.output, "load_bench.md"), "w") as f:
        f.write(report)
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
