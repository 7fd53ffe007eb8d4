#!/usr/bin/env python3
"""Benchmark (reported, never asserted): the preload library's added cost per data path call,
same program with and without LD_PRELOAD, alternating runs, medians of 5.

Usage: preload_bench.py PRELOAD_CALLS FAKEVERBS_LIB PRELOAD_LIB OUTPUT_DIR [BASELINE_LIB]
BASELINE_LIB: another build of the library (e.g. before a change), run alternately with the
others so that a loaded machine affects all three alike."""

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


def main(program, library, preload, outdir, baseline=None):
    base = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(library))
    variants = [("without", None), ("with the library", preload)]
    if baseline:
        variants.append(("with the baseline library", baseline))
    results = {name: [] for name, _ in variants}
    with tempfile.TemporaryDirectory() as stats_dir:
        for _ in range(5):
            for name, lib in variants:
                env = base if lib is None else dict(base, LD_PRELOAD=lib,
                                                    RDMASCOPE_PRELOAD_DIR=stats_dir)
                results[name].append(run(program, env))
    lines = ["# Preload library benchmark (one run)", ""]
    for key, what in [("poll_cq_empty_ns", "ibv_poll_cq, empty CQ"),
                      ("send_and_poll_ns", "signalled ibv_post_send + the ibv_poll_cq reaping it")]:
        median = {name: statistics.median(r[key] for r in runs) for name, runs in results.items()}
        a = median["without"]
        line = f"- {what}: {a:.2f} ns without"
        for name, _ in variants[1:]:
            line += f", {median[name]:.2f} ns {name} (+{median[name] - a:.2f} ns)"
        lines.append(line + f" ({ITERATIONS} calls, median of 5 alternating runs)")
    lines.append("")
    report = "\n".join(lines)
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, "preload_bench.md"), "w") as f:
        f.write(report)
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:6]))
