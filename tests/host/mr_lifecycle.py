#!/usr/bin/env python3
"""Host tier: the MR probes keep counting through what used to blind them or make them drift
(issue #11, items 8, 9 and 11), on the libibverbs stand-in (tests/host/fakeverbs/mr_lifecycle.c
drives each case; its hook runs code inside the stand-in's registration calls).

- probes attached while threads loop ibv_reg_mr/ibv_dereg_mr: every thread is counted after;
- longjmp out of a deregistration and out of a registration: the thread is counted after;
- a registration on another thread gets the pointer a deregistration freed before it
  returned: that deregistration must not take the new region with it;
- main() calls pthread_exit while a worker goes on: the process is not dropped;
- an implicit ODP registration (length SIZE_MAX) counts as a region but adds no bytes;
- /debug/mr/stacks shows symbols only and says when its bounded walk stopped early."""

import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
import harness  # noqa: E402

THREADS, HOLD, SIZE = 8, 25, 8192
value = harness.value


def start(workload, args, env):
    proc = subprocess.Popen([workload, *map(str, args)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env=env, text=True)
    return proc


def command(proc, line):
    proc.stdin.write(line + "\n")
    proc.stdin.flush()


def read_word(proc, word):
    """The value after `word` on the next line the workload prints starting with it."""
    for line in proc.stdout:
        parts = line.split()
        if parts[:1] == [word]:
            return parts[1] if len(parts) > 1 else ""
    raise RuntimeError(f"workload ended before printing {word}")


def figures(exporter, pid):
    samples = harness.parse(exporter.metrics())
    names = ["rdma_mr_outstanding_regions", "rdma_mr_outstanding_bytes",
             "rdma_mr_registrations_total", "rdma_mr_deregistrations_total"]
    return samples, tuple(value(samples, name, pid=pid) for name in names)


def attach_during_loop(check, binary, workload, library, env, jumps):
    """The exporter attaches while THREADS threads loop; then each holds HOLD regions (and,
    with jumps, one more left registered by the longjmp out of ibv_dereg_mr)."""
    proc = start(workload, ["loop", THREADS, HOLD, SIZE, int(jumps)], env)
    pid = read_word(proc, "LOOPING")
    with harness.Exporter(binary, ["--collector.disable-defaults", "--collector.mr",
                                   f"--probe.library={library}"]) as exporter:
        exporter.metrics()  # the loop runs on under the probes
        command(proc, "hold")
        read_word(proc, "READY")
        samples, (regions, nbytes, _, _) = figures(exporter, pid)
        held = THREADS * (HOLD + int(jumps))
        name = "longjmp out of calls" if jumps else "attached during the loop"
        check.expect(f"{name}: outstanding regions", regions, float(held))
        check.expect(f"{name}: outstanding bytes", nbytes, float(held * SIZE))
        unseen = value(samples, "rdma_mr_lost_total", reason="unseen_returns")
        if jumps:
            # Each thread's two abandoned calls are found when it enters the next one.
            check.expect(f"{name}: calls whose return was never seen", unseen,
                         float(2 * THREADS))
        command(proc, "exit")
        proc.wait(timeout=10)
        time.sleep(0.2)
        samples = harness.parse(exporter.metrics())
        check.expect(f"{name}: series after exit",
                     len(harness.series(samples, "rdma_mr_outstanding_regions", pid=pid)), 0)
        check.expect(f"{name}: released at exit",
                     value(samples, "rdma_mr_exit_released_regions_total", comm="mr_lifecycle"),
                     float(held))


def main(binary, workload, library, many_workload):
    if os.geteuid() != 0:
        print("SKIP: BPF needs root")
        return harness.SKIP
    check = harness.Checker()
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(library))
    attach_during_loop(check, binary, workload, library, env, jumps=False)
    attach_during_loop(check, binary, workload, library, env, jumps=True)

    with harness.Exporter(binary, ["--collector.disable-defaults", "--collector.mr",
                                   f"--probe.library={library}"]) as exporter:
        # One glibc arena and no per-thread cache: the pointer thread A's deregistration frees
        # is the next one handed out, to thread B.
        race_env = dict(env, GLIBC_TUNABLES="glibc.malloc.tcache_count=0:glibc.malloc.arena_max=1")
        proc = start(workload, ["race", SIZE], race_env)
        reused = read_word(proc, "REUSED")
        pid = read_word(proc, "READY")
        check.expect("race: the stand-in reused the freed pointer", reused, "1")
        _, got = figures(exporter, pid)
        check.expect("race: (outstanding, bytes, registrations, deregistrations)", got,
                     (0.0, 0.0, 2.0, 2.0))
        command(proc, "exit")
        proc.wait(timeout=10)

        proc = start(workload, ["leader_exit", HOLD, SIZE], env)
        pid = read_word(proc, "READY")
        _, got = figures(exporter, pid)
        check.expect("leader pthread_exit: process still tracked (outstanding, bytes)", got[:2],
                     (float(HOLD), float(HOLD * SIZE)))
        command(proc, "exit")
        proc.wait(timeout=10)
        time.sleep(0.2)
        samples = harness.parse(exporter.metrics())
        check.expect("leader pthread_exit: released at exit once the worker exits",
                     value(samples, "rdma_mr_exit_released_regions_total", comm="mr_lifecycle"),
                     float(HOLD))

        size_sum = "rdma_mr_registration_size_bytes_sum"
        sum_before = value(harness.parse(exporter.metrics()), size_sum, comm="mr_lifecycle")
        proc = start(workload, ["odp", SIZE], env)
        pid = read_word(proc, "READY")
        samples, got = figures(exporter, pid)
        check.expect("implicit ODP: (outstanding, bytes, registrations, deregistrations)", got,
                     (2.0, float(SIZE), 2.0, 0.0))
        check.expect("implicit ODP: outstanding implicit ODP regions",
                     value(samples, "rdma_mr_outstanding_implicit_odp_regions", pid=pid), 1.0)
        # The histogram is by comm and keeps the earlier runs: only this run's increase.
        check.expect("implicit ODP: size histogram sum increase",
                     value(samples, size_sum, comm="mr_lifecycle") - sum_before, float(SIZE))
        command(proc, "dereg")
        read_word(proc, "DEREGISTERED")
        _, got = figures(exporter, pid)
        check.expect("implicit ODP after dereg", got, (0.0, 0.0, 2.0, 2.0))
        command(proc, "exit")
        proc.wait(timeout=10)

        # /debug/mr/stacks: more regions than one request walks (65,536).
        many = 70000
        proc = start(many_workload, [1, many, 4096, many, 0, 0], env)
        pid = read_word(proc, "READY")
        status, body = exporter.get(f"/debug/mr/stacks?pid={pid}&top=3")
        check.expect("stacks: status", status, 200)
        report = json.loads(body) if status == 200 else {}
        check.expect("stacks: truncated", report.get("truncated"), True)
        check.expect("stacks: regions walked", report.get("regions_walked"), 65536)
        frames = [frame for process in report.get("processes", [])
                  for stack in process["stacks"] for frame in stack["frames"]]
        check.expect("stacks: top frame", [f["function"].split("+")[0] for f in frames[:1]],
                     ["work"])
        check.expect("stacks: every frame is function+offset",
                     all(re.fullmatch(r"\S+\+0x[0-9a-f]+|\?\?", f["function"]) for f in frames)
                     and len(frames) > 0, True)
        # No absolute address anywhere: user-space addresses are 0x55..., 0x7f... (ASLR).
        leaked = re.findall(r"0x[0-9a-f]{9,}", body)
        check.expect("stacks: absolute addresses in the body", leaked, [])
        check.expect("stacks: no address field", '"address"' in body, False)
        samples = harness.parse(exporter.metrics())
        check.expect("stacks: outstanding regions (the scrape sees all)",
                     value(samples, "rdma_mr_outstanding_regions", pid=pid), float(many))
        command(proc, "exit")
        proc.wait(timeout=30)
    for failure in check.failures:
        print("FAIL:", failure)
    return 1 if check.failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
