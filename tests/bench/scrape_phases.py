#!/usr/bin/env python3
"""Benchmark (reported, never asserted), issue #17 item 2: where a scrape's time goes on the
large-host fixture (large_host_bench.py: 16 RDMA devices x 2 ports, ~3,600 counter files,
256 veths). `rdmascope serve --log.level=debug` logs one "scrape phases" line per scrape
(collect, serialise, gzip); rdmascope_collector_duration_seconds splits the collect phase per
collector. Optionally `strace -c -f` (syscall counts and time) and `perf record -e cpu-clock
-g` (the software clock: no PMU needed) over the same scrapes.

Usage: scrape_phases.py RDMASCOPE_BINARY OUTPUT_DIR [--scrapes N] [--interfaces N]
                        [--strace] [--perf]
Writes OUTPUT_DIR/scrape_phases.md and prints it."""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "host"))
import netns  # noqa: E402
from netns import harness  # noqa: E402
from large_host_bench import make_sysfs  # noqa: E402
from scrape_bench import wait_listening  # noqa: E402

PORT = 19882
PHASE = re.compile(r'msg="scrape phases" collect_ms=([\d.]+) serialise_ms=([\d.]+) '
                   r'gzip_ms=([\d.]+) text_bytes=(\d+) body_bytes=(\d+)')


def scrape(ns, gzip):
    cmd = ["ip", "netns", "exec", ns, "curl", "-sf", f"http://127.0.0.1:{PORT}/metrics"]
    if gzip:
        cmd[5:5] = ["-H", "Accept-Encoding: gzip", "-o", "/dev/null"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("outdir")
    parser.add_argument("--scrapes", type=int, default=100)
    parser.add_argument("--interfaces", type=int, default=256)
    parser.add_argument("--strace", action="store_true")
    parser.add_argument("--perf", action="store_true")
    args = parser.parse_args()
    harness.require_root_and_netns()
    os.makedirs(args.outdir, exist_ok=True)
    per_collector, phases, extra = {}, [], []
    with tempfile.TemporaryDirectory(prefix="rdmascope-phases-") as tmp, \
            netns.Namespaces("phases") as ns:
        for i in range(args.interfaces // 2):
            netns.veth_pair(ns[0], f"pv{i}a", ns[0], f"pv{i}b")
        sysfs = os.path.join(tmp, "sys")
        make_sysfs(sysfs)
        cmd = [args.binary, "serve", f"--web.listen-address=127.0.0.1:{PORT}",
               "--log.level=debug", f"--path.sysfs={sysfs}"]
        if args.strace:
            cmd = ["strace", "-c", "-f", "-o", os.path.join(tmp, "strace.txt"), *cmd]
        log_path = os.path.join(tmp, "serve.log")
        with open(log_path, "w") as log:
            proc = subprocess.Popen(["ip", "netns", "exec", ns[0], *cmd],
                                    stdout=subprocess.DEVNULL, stderr=log)
        perf = None
        try:
            wait_listening(ns[0], PORT, proc, timeout=120)
            for _ in range(5):
                scrape(ns[0], gzip=True)
            offset = os.path.getsize(log_path)
            if args.perf:
                pid = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True,
                                     text=True).stdout.split() or [str(proc.pid)]
                perf = subprocess.Popen(["perf", "record", "-e", "cpu-clock", "-g", "-p",
                                         pid[0], "-o", os.path.join(tmp, "perf.data")],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                time.sleep(1)
            for i in range(args.scrapes):
                # Even scrapes as Prometheus asks (gzip); odd ones plain, read for the
                # per-collector durations of that scrape.
                body = scrape(ns[0], gzip=i % 2 == 0)
                for name, value in harness.series(
                        harness.parse(body), "rdmascope_collector_duration_seconds").items():
                    per_collector.setdefault(dict(name)["collector"], []).append(value * 1e3)
            if perf is not None:
                perf.send_signal(2)
                perf.wait()
        finally:
            proc.terminate()
            proc.wait()
        with open(log_path) as log:
            log.seek(offset)
            for line in log:
                m = PHASE.search(line)
                if m:
                    phases.append([float(m[1]), float(m[2]), float(m[3]), int(m[4]),
                                   int(m[5])])
        if args.strace:
            with open(os.path.join(tmp, "strace.txt")) as f:
                extra += ["", "strace -c -f over the whole run (start-up included):", "",
                          "```", *f.read().splitlines()[:22], "```"]
        if perf is not None:
            report = subprocess.run(
                ["perf", "report", "-i", os.path.join(tmp, "perf.data"), "--no-children",
                 "--sort", "dso,symbol", "--stdio", "-g", "none", "--percent-limit", "1.5"],
                capture_output=True, text=True).stdout
            extra += ["", "perf record -e cpu-clock -g (self time, >= 1.5%):", "", "```",
                      *[" ".join(ln.split()[:4]) for ln in report.splitlines()
                        if ln.strip() and not ln.startswith("#")][:30],
                      "```"]
    gz = [p for p in phases if p[4] < p[3]]
    plain = [p for p in phases if p[4] == p[3]]
    med = lambda rows, i: statistics.median(r[i] for r in rows) if rows else 0.0  # noqa: E731
    lines = [f"# Scrape phases, large-host fixture ({args.interfaces} veths), "
             f"{args.scrapes} scrapes (half gzip), medians", "",
             "| phase | median ms |", "|---|---|"]
    for collector, values in sorted(per_collector.items()):
        lines.append(f"| collect: {collector} | {statistics.median(values):.3f} |")
    lines += [f"| collect (all, wall) | {med(phases, 0):.3f} |",
              f"| serialise (prometheus-cpp text) | {med(phases, 1):.3f} |",
              f"| gzip | {med(gz, 2):.3f} |",
              f"| no gzip (plain request) | {med(plain, 2):.3f} |", "",
              f"Text {med(phases, 3) / 1024:.0f} KiB, gzip body {med(gz, 4) / 1024:.0f} KiB.",
              *extra, ""]
    report = "\n".join(lines)
    with open(os.path.join(args.outdir, "scrape_phases.md"), "w") as f:
        f.write(report)
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
