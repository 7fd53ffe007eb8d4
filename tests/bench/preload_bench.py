#!/usr/bin/env python3
"""Benchmark (reported, never asserted): the preload library's added cost per data path call,
same program with and without LD_PRELOAD, alternating runs, medians of 5.

Usage: preload_bench.py PRELOAD_CALLS FAKEVERBS_LIB PRELOAD_LIB OUTPUT_DIR"""

import os
import statistics
import subprocess
import sys
import tempfile

ITERATIONS = 20_000_000


def run(program, env):
    out = subprocess.run([program, str(ITERATIONS)], env=env, capture_output=True, text=True,
                         check=True).stdout
    return {line.split()[0]: float(line.split()[1]) for line in out.splitlines()}


def main(program, library, preload, outdir):
    base = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(library))
    with tempfile.TemporaryDirectory() as stats_dir:
        wrapped = dict(base, LD_PRELOAD=preload, RDMASCOPE_PRELOAD_DIR=stats_dir)
        off, on = [], []
        for _ in range(5):
            off.append(run(program, base))
            on.append(run(program, wrapped))
    lines = ["# Preload library benchmark (one run)", ""]
    for key, what in [("poll_cq_empty_ns", "ibv_poll_cq, empty CQ"),
                      ("send_and_poll_ns", "signalled ibv_post_send + the ibv_poll_cq reaping it")]:
        a = statistics.median(r[key] for r in off)
        b = statistics.median(r[key] for r in on)
        lines.append(f"- {what}: {a:.2f} ns without, {b:.2f} ns with the library: "
                     f"+{b - a:.2f} ns per call ({ITERATIONS} calls, median of 5 alternating runs)")
    lines.append("")
    report = "\n".join(lines)
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, "preload_bench.md"), "w") as f:
        f.write(report)
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
