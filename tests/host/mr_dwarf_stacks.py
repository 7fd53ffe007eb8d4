#!/usr/bin/env python3
"""Host tier (issue 27): leak call sites of a program built without frame pointers.

mr_leak_nofp (-O2 -fomit-frame-pointer, no -g, not stripped) leaks 12 regions from
leak_one_region <- register_batch <- main, then 12 more once a collection has taken the first
samples in (the second batch must cost no copy: deduplicated in BPF). With the default --collector.mr.stack-bytes the
uprobes capture the registering stack and user space unwinds it with DWARF CFI:
/debug/mr/stacks names all three, "unwind": "dwarf". With --collector.mr.stack-bytes=0 (the
frame-pointer walk alone, what every release before did) main is never reached. The stack
figures are reported on /metrics."""

import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
import harness  # noqa: E402

LEAKS, SIZE = 12, 65536
FUNCTIONS = ["leak_one_region", "register_batch", "main"]


def stacks_of(exporter, pid):
    status, body = exporter.get(f"/debug/mr/stacks?pid={pid}")
    if status != 200:
        raise RuntimeError(f"/debug/mr/stacks: HTTP {status}")
    processes = json.loads(body)["processes"]
    return processes[0]["stacks"] if processes else []


def run(binary, program, library, stack_bytes):
    """The program's stacks and the exporter's metrics with this --collector.mr.stack-bytes."""
    env = {**os.environ, "LD_LIBRARY_PATH": os.path.dirname(library)}
    with harness.Exporter(binary, ["--collector.disable-defaults", "--collector.mr",
                                   "--collector.mr.tracking=uprobes",
                                   f"--collector.mr.stack-bytes={stack_bytes}",
                                   f"--probe.library={library}"]) as exporter:
        proc = subprocess.Popen([program, str(LEAKS), str(SIZE)], env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            if proc.stdout.readline().strip() != "ready":
                raise RuntimeError("the program did not get ready")
            # A collection takes the samples in and gives the probes the program's code
            # ranges: the same call site registering again is then sent no more.
            exporter.metrics()
            proc.stdin.write("again\n")
            proc.stdin.flush()
            if proc.stdout.readline().strip() != "again":
                raise RuntimeError("the program did not register again")
            # The samples are unwound in the background (within a fraction of a second; more
            # on a loaded machine): wait until every one sent is.
            deadline = time.monotonic() + 20
            while True:
                samples = harness.parse(exporter.metrics())
                sent = harness.value(samples, "rdmascope_mr_stack_samples_total", result="sent")
                done = harness.value(samples, "rdmascope_mr_stacks_unwound_total")
                if not stack_bytes or sent == done or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            stacks = stacks_of(exporter, proc.pid)
        finally:
            proc.kill()
            proc.wait()
    return stacks, samples


def names(stack):
    return [frame["function"].split("+")[0] for frame in stack["frames"]]


def main(binary, program, library):
    if os.geteuid() != 0:
        print("SKIP: BPF needs root")
        return 77
    checks = harness.Checker()
    expect, failures = checks.expect, checks.failures

    stacks, samples = run(binary, program, library, 16384)
    expect("one call site", len(stacks), 1)
    if stacks:
        site = stacks[0]
        print("dwarf frames:", names(site))
        expect("its regions", site["outstanding_regions"], 2 * LEAKS)
        expect("unwound with", site["unwind"], "dwarf")
        expect("named in order", [n for n in names(site) if n in FUNCTIONS], FUNCTIONS)
    sent = harness.value(samples, "rdmascope_mr_stack_samples_total", result="sent")
    dedup = harness.value(samples, "rdmascope_mr_stack_samples_total", result="deduplicated")
    print(f"samples sent {sent}, deduplicated {dedup}, sites "
          f"{harness.value(samples, 'rdmascope_mr_stack_sites')}, bytes "
          f"{harness.value(samples, 'rdmascope_mr_stack_bytes')}")
    expect("every registration captured", (sent or 0) + (dedup or 0), float(2 * LEAKS))
    # Registrations before the program's code ranges reach the probes are a sample each (the
    # stack thread writes them a fraction of a second after the first sample; the first
    # collection at the latest); after that its one site costs no copy: the whole second batch
    # but the first registration of its hashed site at least.
    expect("second batch deduplicated in BPF", (dedup or 0) >= LEAKS - 1, True)
    expect("nothing dropped", sum(
        harness.value(samples, "rdmascope_mr_stacks_dropped_total", reason=reason) or 0
        for reason in ("ring_full", "memory_bound", "process_gone", "copy_failed")), 0.0)

    stacks, _ = run(binary, program, library, 0)
    fp_names = [n for stack in stacks for n in names(stack)]
    print("frame-pointer frames:", fp_names)
    expect("frame pointers alone never reach main", "main" in fp_names, False)
    expect("frame pointers alone: unwound with", {s["unwind"] for s in stacks} <= {"frame_pointer", ""}, True)

    if failures:
        print("FAIL:", "; ".join(failures))
        return 1
    print("PASS: the call site of a program without frame pointers named by DWARF unwinding")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
