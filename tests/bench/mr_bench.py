#!/usr/bin/env python3
"""Benchmark (reported, never asserted) of the MR probes, in one run:
1. added cost per ibv_reg_mr + ibv_dereg_mr pair, tracking off vs on, with the user stack copies
   for DWARF unwinding (--collector.mr.stack-bytes, default) and without (the libibverbs
   stand-in, so the figure is the probes' cost, not a NIC's), on the main thread (a shallow
   stack) and on a thread of its own;
2. scrape time with 100,000 outstanding regions across 100 processes, and the memory their
   call sites take (rdmascope_mr_stack_bytes), the unwinding time per stack;
3. memory at 102,400 outstanding regions from 1,024 distinct call sites of one program built
   without frame pointers (mr_sites): the sites' bytes, the exporter's RSS growth.

Usage: mr_bench.py RDMASCOPE MR_PAIRS MR_WORKLOAD MR_SITES FAKEVERBS_LIB OUTPUT_DIR"""

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
SITE_DEPTH, REGIONS_PER_SITE = 10, 100  # 1,024 sites, 102,400 regions


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def pair_cost(mr_pairs, env, runs=3, thread=False):
    return statistics.median(
        float(subprocess.run([mr_pairs, str(PAIRS), *(["thread"] if thread else [])], env=env,
                             capture_output=True, text=True, check=True).stdout)
        for _ in range(runs))


def many_sites(binary, sites_program, library, env):
    """Outstanding regions from 1,024 call sites: what their stacks cost the exporter."""
    with harness.Exporter(binary, ["--collector.disable-defaults", "--collector.mr",
                                   f"--probe.library={library}"]) as exporter:
        exporter.metrics()
        rss_before = rss_bytes(exporter.proc.pid)
        program = subprocess.Popen([sites_program, str(SITE_DEPTH), str(REGIONS_PER_SITE)],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                                   text=True)
        program.stdout.readline()
        start = time.perf_counter()
        samples = harness.parse(exporter.metrics())
        first_scrape = time.perf_counter() - start
        samples = harness.parse(exporter.metrics())
        status, body = exporter.get(f"/debug/mr/stacks?pid={program.pid}&top=100")
        result = {
            "regions": sum(harness.series(samples, "rdma_mr_outstanding_regions").values()),
            "sites": harness.value(samples, "rdmascope_mr_stack_sites"),
            "stack_bytes": harness.value(samples, "rdmascope_mr_stack_bytes"),
            "sent": harness.value(samples, "rdmascope_mr_stack_samples_total", result="sent"),
            "rss_growth": rss_bytes(exporter.proc.pid) - rss_before,
            "first_scrape": first_scrape,
            "stacks_answer": len(body) if status == 200 else 0,
        }
        program.stdin.write("exit\n")
        program.stdin.flush()
        program.wait()
        return result


def main(binary, mr_pairs, workload, sites_program, library, outdir):
    if os.geteuid() != 0:
        print("SKIP: BPF needs root")
        return harness.SKIP
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(library))
    off = pair_cost(mr_pairs, env)
    off_thread = pair_cost(mr_pairs, env, thread=True)
    with harness.Exporter(binary, ["--collector.disable-defaults", "--collector.mr",
                                   "--collector.mr.stack-bytes=0",
                                   f"--probe.library={library}"]) as exporter:
        exporter.metrics()
        on_no_stacks = pair_cost(mr_pairs, env)
        on_no_stacks_thread = pair_cost(mr_pairs, env, thread=True)
    with harness.Exporter(binary, ["--collector.disable-defaults", "--collector.mr",
                                   f"--probe.library={library}"]) as exporter:
        # The first collection starts the thread that takes stack samples in: from then on a
        # new program's code ranges reach the probes after its first registration.
        exporter.metrics()
        on = pair_cost(mr_pairs, env)
        on_thread = pair_cost(mr_pairs, env, thread=True)
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
        samples = harness.parse(body)
        total = sum(harness.series(samples, "rdma_mr_outstanding_regions").values())
        stack_bytes = harness.value(samples, "rdmascope_mr_stack_bytes")
        stack_sites = harness.value(samples, "rdmascope_mr_stack_sites")
        unwound = harness.value(samples, "rdmascope_mr_stacks_unwound_total") or 0
        unwind_s = harness.value(samples, "rdmascope_mr_stack_unwind_seconds_total") or 0
        sent = harness.value(samples, "rdmascope_mr_stack_samples_total", result="sent")
        dedup = harness.value(samples, "rdmascope_mr_stack_samples_total",
                              result="deduplicated")
        dropped = {reason: harness.value(samples, "rdmascope_mr_stacks_dropped_total",
                                         reason=reason)
                   for reason in ("ring_full", "memory_bound", "process_gone", "copy_failed")}
        for p in procs:
            p.stdin.write("exit\n")
            p.stdin.flush()
            p.wait()
    sites = many_sites(binary, sites_program, library, env)
    lines = [
        "# MR probe benchmark (one run)",
        "",
        f"- reg+dereg pair, tracking off: {off:.0f} ns; on: {on:.0f} ns; added {on - off:.0f} ns "
        f"per pair ({on / off:.1f}x) over {PAIRS} pairs, median of 3 runs",
        f"- the same without the user stack copies (--collector.mr.stack-bytes=0): "
        f"{on_no_stacks:.0f} ns: the copies (the stack up to 16 KiB read, code words hashed, "
        f"one ring record per site) add {on - on_no_stacks:.0f} ns per pair",
        f"- on a thread of its own: off {off_thread:.0f} ns, on {on_thread:.0f} ns, without "
        f"the copies {on_no_stacks_thread:.0f} ns (the copies add "
        f"{on_thread - on_no_stacks_thread:.0f} ns)",
        f"- call sites of those {int(total)} regions: {stack_sites} sites, "
        f"{stack_bytes} bytes (rdmascope_mr_stack_bytes); stacks sent {sent}, deduplicated "
        f"{dedup}, dropped {dropped}; unwinding: "
        f"{(unwind_s / unwound * 1e6) if unwound else 0:.0f} us per stack over {unwound:.0f} "
        f"stacks (wall time, cold sessions included)",
        f"- scrape with {int(total)} outstanding regions in {PROCESSES} processes: median "
        f"{statistics.median(times) * 1e3:.2f} ms, max {max(times) * 1e3:.2f} ms over 30 scrapes",
        f"- {int(sites['regions'])} outstanding regions from {1 << SITE_DEPTH} call paths of one "
        f"program without frame pointers: {sites['sites']} sites in {sites['stack_bytes']} "
        f"bytes (rdmascope_mr_stack_bytes), {sites['sent']} stacks sent; exporter RSS grew "
        f"{sites['rss_growth'] / 2**20:.1f} MiB; first scrape {sites['first_scrape'] * 1e3:.0f} "
        f"ms; /debug/mr/stacks?top=100 answer {sites['stacks_answer']} bytes",
        "",
    ]
    report = "\n".join(lines)
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, "mr_bench.md"), "w") as f:
        f.write(report)
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:7]))
