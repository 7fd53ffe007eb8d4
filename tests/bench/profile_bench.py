#!/usr/bin/env python3
"""Benchmark (reported, never asserted): what running under `rdmascope profile` costs a program,
on the libibverbs stand-in (so the figures are the profiler's cost, not a NIC's):
1. ibv_reg_mr + ibv_dereg_mr pairs per second (mr_pairs): the MR probes' uprobes;
2. data path calls per second (preload_calls: empty ibv_poll_cq, signalled send + poll): the
   preload library the profile loads.
Each figure: median of 3 runs, alone vs under `rdmascope profile -- PROGRAM`.

Usage: profile_bench.py RDMASCOPE MR_PAIRS PRELOAD_CALLS FAKEVERBS_LIB PRELOAD_LIB OUTPUT_DIR"""

import os
import statistics
import subprocess
import sys
import tempfile

SKIP = 77
PAIRS, CALLS = 50000, 2000000


def figures(stdout):
    """mr_pairs prints one number; preload_calls prints "name value" lines. The profile's
    summary follows on the same stdout and is ignored."""
    out = {}
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) == 1:
            try:
                out.setdefault("pair_ns", float(parts[0]))
            except ValueError:
                pass
        elif len(parts) == 2 and parts[0].endswith("_ns"):
            try:
                out[parts[0]] = float(parts[1])
            except ValueError:
                pass
    return out


def median_run(cmd, env, runs=3):
    results = [figures(subprocess.run(cmd, env=env, capture_output=True, text=True,
                                      check=True).stdout) for _ in range(runs)]
    return {key: statistics.median(r[key] for r in results) for key in results[0]}


def main(binary, mr_pairs, preload_calls, library, preload, outdir):
    if os.geteuid() != 0:
        print("SKIP: BPF needs root")
        return SKIP
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(library))
    with tempfile.TemporaryDirectory(prefix="rdmascope-profile-bench-") as tmp:
        profile = [binary, "profile", "--quiet", "--collector.disable-defaults",
                   "--collector.mr", "--collector.verbs", "--collector.occupancy",
                   f"--probe.library={library}", f"--preload={preload}", "--duration=600s",
                   f"--output={tmp}/out", "--"]
        rows = []
        for name, cmd in (("mr_pairs", [mr_pairs, str(PAIRS)]),
                          ("preload_calls", [preload_calls, str(CALLS)])):
            alone = median_run(cmd, env)
            profiled = median_run(profile + cmd, env)
            for key, ns in alone.items():
                under = profiled[key]
                rows.append(f"| {name} {key} | {1e9 / ns:,.0f} | {1e9 / under:,.0f} | "
                            f"{under - ns:+.0f} ns ({under / ns:.2f}x) |")
    lines = ["# rdmascope profile overhead on the stand-in (one run, medians of 3)", "",
             "| calls | per second alone | per second under profile | added per call |",
             "|---|---|---|---|", *rows, ""]
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, "profile_bench.md"), "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:7]))
