#!/usr/bin/env python3
"""Benchmark (reported, never asserted) of the MR probes, in one run:
1. added cost per ibv_reg_mr + ibv_dereg_mr pair, tracking off vs on (the libibverbs stand-in,
   so the figure is the probes' cost, not a NIC's);
2. scrape time with 100,000 outstanding regions across 100 processes.

Usage: mr_bench.py RDMASCOPE MR_PAIRS MR_WORKLOAD FAKEVERBS_LIB OUTPUT_DIR"""

import os
import statistics
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
import harness  # noqa: E402

PAIRS = 50000
PROCESSES, REGIONS_EACH = 100, 1000


def pair_cost(mr_pairs, env, runs=3):
    return statistics.median(
        float(subprocess.run([mr_pairs, str(PAIRS)], env=env, capture_output=True, text=True,
                             check=True).stdout) for _ in range(runs))


def main(binary, mr_pairs, workload, library, outdir):
    if os.geteuid() != 0:
        print("SKIP: BPF needs root")
        return harness.SKIP
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(library))
    off = pair_cost(mr_pairs, env)
    with harness.Exporter(binary, ["--collector.disable-defaults", "--collector.mr",
                                   f"--probe.library={library}"]) as exporter:
        on = pair_cost(mr_pairs, env)
        procs = []
        for _ in range(PROCESSES):
            p = subprocess.Popen([workload, "1", str(REGIONS_EACH), "4096", str(REGIONS_EACH),
                                  "0", "0"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 env=env, text=True)
            p.stdout.readline()
            procs.append(p)
        url = f"http://127.0.0.1:{exporter.port}/metrics"
        times = []
        for _ in range(30):
            start = time.perf_counter()
            body = urllib.request.urlopen(url).read().decode()
            times.append(time.perf_counter() - start)
        total = sum(harness.series(harness.parse(body), "rdma_mr_outstanding_regions").values())
        for p in procs:
            p.stdin.write("exit\n")
            p.stdin.flush()
            p.wait()
    lines = [
        "# MR probe benchmark (one run)",
        "",
        f"- reg+dereg pair, tracking off: {off:.0f} ns; on: {on:.0f} ns; added {on - off:.0f} ns "
        f"per pair ({on / off:.1f}x) over {PAIRS} pairs, median of 3 runs",
        f"- scrape with {int(total)} outstanding regions in {PROCESSES} processes: median "
        f"{statistics.median(times) * 1e3:.2f} ms, max {max(times) * 1e3:.2f} ms over 30 scrapes",
        "",
    ]
    report = "\n".join(lines)
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, "mr_bench.md"), "w") as f:
        f.write(report)
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:6]))
