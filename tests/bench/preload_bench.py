#!/usr/bin/env python3
"""Benchmark (reported, never asserted): the preload library's added cost per data path call,
same program with and without LD_PRELOAD, alternating runs.

Usage: preload_bench.py PRELOAD_CALLS FAKEVERBS_LIB PRELOAD_LIB OUTPUT_DIR [[NAME=]LIB ...]
Each extra LIB is another build of the library (e.g. before a change, or a wrapper that only
calls through: the floor), run in turn with the others so that a loaded machine affects all
alike. The added cost of a run is its time minus that of the run without the library in the
same round; reported: median and range over the rounds (PRELOAD_BENCH_ROUNDS, default 5).
The library runs twice a round: as plain occupancy users run it, and with message sizes
counted (RDMASCOPE_PRELOAD_MESSAGE_SIZES=1, as under `rdmascope profile`)."""

import os
import statistics
import subprocess
import sys
import tempfile

ITERATIONS = 20_000_000
KEYS = [("poll_cq_empty_ns", "ibv_poll_cq, empty CQ"),
        ("send_and_poll_ns", "signalled ibv_post_send + the ibv_poll_cq reaping it")]


def run(program, env):
    out = subprocess.run([program, str(ITERATIONS)], env=env, capture_output=True, text=True,
                         check=True).stdout
    return {line.split()[0]: float(line.split()[1]) for line in out.splitlines()}


def main(program, library, preload, outdir, *extra):
    rounds = int(os.environ.get("PRELOAD_BENCH_ROUNDS", "5"))
    base = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(library))
    base.pop("RDMASCOPE_PRELOAD_MESSAGE_SIZES", None)
    sizes_on = {"RDMASCOPE_PRELOAD_MESSAGE_SIZES": "1"}
    variants = [("without", None), ("with the library", preload),
                ("with the library, sizes counted", (preload, sizes_on))]
    for i, spec in enumerate(extra):
        name, _, lib = spec.rpartition("=")
        variants.append((name or ("with the baseline library" if i == 0 else f"with {lib}"),
                         lib))
    results = {name: [] for name, _ in variants}
    with tempfile.TemporaryDirectory() as stats_dir:
        for _ in range(rounds):
            for name, lib in variants:
                lib, extra_env = lib if isinstance(lib, tuple) else (lib, {})
                env = base if lib is None else dict(base, LD_PRELOAD=lib,
                                                    RDMASCOPE_PRELOAD_DIR=stats_dir, **extra_env)
                results[name].append(run(program, env))
    lines = ["# Preload library benchmark (one run)", ""]
    for key, what in KEYS:
        without = [r[key] for r in results["without"]]
        line = f"- {what}: {statistics.median(without):.2f} ns without"
        for name, _ in variants[1:]:
            added = [r[key] - w for r, w in zip(results[name], without)]
            line += (f"; {name} +{statistics.median(added):.2f} ns"
                     f" (+{min(added):.2f} to +{max(added):.2f})")
        lines.append(line + f" ({ITERATIONS} calls, median and range of {rounds} alternating"
                     " rounds)")
    lines.append("")
    report = "\n".join(lines)
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, "preload_bench.md"), "w") as f:
        f.write(report)
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
