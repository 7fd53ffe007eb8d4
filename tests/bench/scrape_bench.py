#!/usr/bin/env python3
"""Benchmark (reported, never asserted): scrape latency, CPU per scrape and RSS of
`rdmascope serve` and `prometheus-node-exporter --collector.disable-defaults
--collector.ethtool`, side by side in one run, on 64 veth interfaces in one namespace.

Usage: scrape_bench.py RDMASCOPE_BINARY OUTPUT_DIR [--scrapes N] [--interfaces N]
Writes OUTPUT_DIR/scrape_bench.md and prints it."""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "host"))
import netns  # noqa: E402
from netns import harness  # noqa: E402

# Runs inside the namespace: scrapes one URL N times, prints one latency (seconds) per line.
SCRAPER = r"""
import sys, time, urllib.request
url, n = sys.argv[1], int(sys.argv[2])
for _ in range(5):
    urllib.request.urlopen(url).read()
for _ in range(n):
    t = time.perf_counter()
    body = urllib.request.urlopen(url).read()
    print(time.perf_counter() - t, len(body))
"""


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def memory_kib(pid):
    values = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0])
    return values


def wait_listening(ns, port, proc, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("server exited early")
        r = subprocess.run(["ip", "netns", "exec", ns, "curl", "-sf", "-o", "/dev/null",
                            f"http://127.0.0.1:{port}/metrics"])
        if r.returncode == 0:
            return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listening on {port}")


def collector_durations(ns, port, rounds=20):
    """Median of rdmascope_collector_duration_seconds per collector over `rounds` scrapes (ms):
    where a scrape's time goes. Empty for an exporter without that series."""
    seen = {}
    for _ in range(rounds):
        body = subprocess.run(["ip", "netns", "exec", ns, "curl", "-sf",
                               f"http://127.0.0.1:{port}/metrics"],
                              capture_output=True, text=True).stdout
        for name, value in harness.series(harness.parse(body),
                                          "rdmascope_collector_duration_seconds").items():
            seen.setdefault(dict(name)["collector"], []).append(value * 1e3)
    return {c: statistics.median(v) for c, v in sorted(seen.items())}


def measure(ns, name, cmd, port, scrapes):
    proc = subprocess.Popen(["ip", "netns", "exec", ns, *cmd], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        wait_listening(ns, port, proc)
        # `ip netns exec` execs the server, so proc.pid is the server's pid.
        cpu_before = cpu_seconds(proc.pid)
        out = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", SCRAPER,
                              f"http://127.0.0.1:{port}/metrics", str(scrapes)],
                             check=True, capture_output=True, text=True).stdout
        cpu_after = cpu_seconds(proc.pid)
        mem = memory_kib(proc.pid)
        durations = collector_durations(ns, port)
    finally:
        proc.terminate()
        proc.wait()
    latencies = [float(line.split()[0]) for line in out.splitlines()]
    size = int(out.splitlines()[-1].split()[1])
    return {
        "name": name,
        "median_ms": statistics.median(latencies) * 1e3,
        "p90_ms": sorted(latencies)[int(len(latencies) * 0.9)] * 1e3,
        "cpu_ms_per_scrape": (cpu_after - cpu_before) / scrapes * 1e3,
        "rss_mib": mem["VmRSS"] / 1024,
        "peak_rss_mib": mem["VmHWM"] / 1024,
        "bytes": size,
        "collector_ms": durations,
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("outdir")
    parser.add_argument("--scrapes", type=int, default=300)
    parser.add_argument("--interfaces", type=int, default=64)
    args = parser.parse_args()
    harness.require_root_and_netns()
    node_exporter = shutil.which("prometheus-node-exporter")
    if node_exporter is None:
        print("SKIP: prometheus-node-exporter is not installed")
        return harness.SKIP

    os.makedirs(args.outdir, exist_ok=True)
    with netns.Namespaces("bench") as ns:
        for i in range(args.interfaces // 2):
            netns.veth_pair(ns[0], f"bv{i}a", ns[0], f"bv{i}b")
        results = [
            measure(ns[0], "rdmascope serve",
                    [args.binary, "serve", "--web.listen-address=127.0.0.1:19879",
                     "--log.level=warn"], 19879, args.scrapes),
            measure(ns[0], "node_exporter --collector.ethtool",
                    [node_exporter, "--collector.disable-defaults", "--collector.ethtool",
                     "--web.listen-address=127.0.0.1:19100"], 19100, args.scrapes),
        ]
    version_out = subprocess.run([node_exporter, "--version"], capture_output=True, text=True)
    version = ((version_out.stdout + version_out.stderr).strip().splitlines() or ["?"])[0]
    ours, theirs = results
    lines = [
        f"# Scrape benchmark: {args.interfaces} veth interfaces, {args.scrapes} sequential "
        "scrapes each, one run",
        "",
        f"node_exporter: `{version}`; machine: {os.cpu_count()} CPUs, "
        f"kernel {os.uname().release}",
        "",
        "| exporter | median ms | p90 ms | CPU ms/scrape | RSS MiB | peak RSS MiB | bytes |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(f"| {r['name']} | {r['median_ms']:.2f} | {r['p90_ms']:.2f} | "
                     f"{r['cpu_ms_per_scrape']:.2f} | {r['rss_mib']:.1f} | "
                     f"{r['peak_rss_mib']:.1f} | {r['bytes']} |")
    lines += [
        "",
        f"Median latency ratio (node_exporter / rdmascope): "
        f"{theirs['median_ms'] / ours['median_ms']:.1f}x; CPU per scrape ratio: "
        f"{theirs['cpu_ms_per_scrape'] / max(ours['cpu_ms_per_scrape'], 1e-9):.1f}x.",
        "",
        "rdmascope per collector (median rdmascope_collector_duration_seconds of 20 more "
        "scrapes, ms): " + ", ".join(f"{c} {ms:.3f}" for c, ms in ours["collector_ms"].items()),
        "",
    ]
    report = "\n".join(lines)
    with open(os.path.join(args.outdir, "scrape_bench.md"), "w") as f:
        f.write(report)
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
