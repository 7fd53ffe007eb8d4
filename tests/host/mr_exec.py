#!/usr/bin/env python3
"""Host tier: the regions of an image that exec'd are released, not outstanding.

The uverbs fd is O_CLOEXEC: at an exec the kernel destroys every memory region the old image
registered (ib_uverbs_close -> uverbs_destroy_ufile_hw), while the pid and the leader's start
time, which key the probes' per-process state, survive the exec. tests/host/fakeverbs/mr_exec.c
registers N regions then execs mr_workload, which registers M and waits; the exec is done by
the main thread, then (second case) by a non-leader thread, which takes over the pid
(de_thread() in fs/exec.c). The exporter must report M outstanding for the pid (under the new
comm, and no series left under the old one), and the N as released at exec under the old
comm; nothing as released at exit. Third case, the verbs probes: the old image's CQ is gone
after an exec into verbs_workload, whose own CQs alone are reported for the pid."""

import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
import harness  # noqa: E402

N, M, SIZE = 5, 3, 8192
OLD_CQ = 500  # the stand-in rounds to 511 entries; verbs_workload's CQs have 15, 127, 1023
value = harness.value


def read_word(proc, word):
    """The value after `word` on the next line the program prints starting with it."""
    for line in proc.stdout:
        parts = line.split()
        if parts[:1] == [word]:
            return parts[1]
    raise RuntimeError(f"program ended before printing {word}")


def released(samples, kind, comm):
    return value(samples, f"rdma_mr_{kind}_released_regions_total", comm=comm) or 0.0


def capacities(samples, pid):
    return sorted(harness.series(samples, "rdma_cq_capacity_entries", pid=pid).values())


def expecter(failures, case):
    def expect(what, got, want):
        ok = got == want
        print(("ok" if ok else "FAIL") + f": {case}: {what}: {got}" +
              ("" if ok else f" (want {want})"))
        if not ok:
            failures.append(f"{case}: {what}")
    return expect


def run_case(exporter, exec_program, workload, env, where):
    """Returns the failures of one case: exec from `where` (main or thread)."""
    failures = []
    expect = expecter(failures, f"exec from {where}")
    before = harness.parse(exporter.metrics())
    proc = subprocess.Popen(
        [exec_program, str(N), str(SIZE), "0", where, workload, "1", str(M), str(SIZE), str(M),
         "0", "0"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)
    try:
        pid = read_word(proc, "REGISTERED")
        samples = harness.parse(exporter.metrics())
        expect("outstanding before the exec", value(samples, "rdma_mr_outstanding_regions",
                                                    pid=pid, comm="mr_exec"), float(N))
        proc.stdin.write("exec\n")
        proc.stdin.flush()
        # mr_workload prints READY with its pid once its registrations are done.
        expect("pid after the exec", read_word(proc, "READY"), pid)
        after = harness.parse(exporter.metrics())
        expect("outstanding regions of the pid (new image only)",
               harness.series(after, "rdma_mr_outstanding_regions", pid=pid),
               {frozenset({("pid", pid), ("comm", "mr_workload")}): float(M)})
        expect("outstanding bytes of the pid", value(after, "rdma_mr_outstanding_bytes", pid=pid),
               float(M * SIZE))
        expect("registrations of the pid (new image only)",
               value(after, "rdma_mr_registrations_total", pid=pid), float(M))
        expect("released at exec (old comm)",
               released(after, "exec", "mr_exec") - released(before, "exec", "mr_exec"), float(N))
        bytes_name = "rdma_mr_exec_released_bytes_total"
        expect("bytes released at exec",
               (value(after, bytes_name, comm="mr_exec") or 0.0) -
               (value(before, bytes_name, comm="mr_exec") or 0.0), float(N * SIZE))
        expect("released at exit meanwhile",
               sum(after.get(k, 0.0) - v for k, v in before.items()
                   if k[0] == "rdma_mr_exit_released_regions_total")
               + sum(v for k, v in after.items()
                     if k[0] == "rdma_mr_exit_released_regions_total" and k not in before), 0.0)
        proc.stdin.write("exit\n")
        proc.stdin.flush()
        # Reaped: at the next scrape the exit event, or /proc, says it is gone.
        proc.wait(timeout=10)
        final = harness.parse(exporter.metrics())
        expect("new image released at exit",
               released(final, "exit", "mr_workload") - released(after, "exit", "mr_workload"),
               float(M))
        expect("released at exec unchanged by the exit",
               released(final, "exec", "mr_exec"), released(after, "exec", "mr_exec"))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return failures


def verbs_case(exporter, exec_program, verbs_workload, env):
    """A CQ of the old image is gone after an exec from a non-leader thread."""
    failures = []
    expect = expecter(failures, "verbs, exec from thread")
    before = harness.parse(exporter.metrics())
    proc = subprocess.Popen([exec_program, str(N), str(SIZE), str(OLD_CQ), "thread", verbs_workload],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)
    try:
        pid = read_word(proc, "REGISTERED")
        expect("CQs before the exec", capacities(harness.parse(exporter.metrics()), pid), [511.0])
        proc.stdin.write("exec\n")
        proc.stdin.flush()
        expect("pid after the exec", read_word(proc, "READY"), pid)
        after = harness.parse(exporter.metrics())
        expect("CQs of the pid (new image only)", capacities(after, pid), [15.0, 127.0, 1023.0])
        expect("comm of the CQs", {dict(labels)["comm"] for labels in
                                   harness.series(after, "rdma_cq_capacity_entries", pid=pid)},
               {"verbs_workload"})
        # A CQ of the old image would repeat a handle of the new one under the same labels.
        dropped = "rdmascope_collector_duplicate_series_dropped_total"
        expect("verbs series dropped as duplicates",
               (value(after, dropped, collector="verbs") or 0.0) -
               (value(before, dropped, collector="verbs") or 0.0), 0.0)
        expect("outstanding regions of the pid (the new image has none)",
               harness.series(after, "rdma_mr_outstanding_regions", pid=pid), {})
        expect("released at exec (old comm)",
               released(after, "exec", "mr_exec") - released(before, "exec", "mr_exec"), float(N))
        proc.stdin.write("exit\n")
        proc.stdin.flush()
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return failures


def main(binary, exec_program, workload, verbs_workload, library):
    if os.geteuid() != 0:
        print("SKIP: BPF needs root")
        return harness.SKIP
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(library))
    failures = []
    with harness.Exporter(binary, ["--collector.disable-defaults", "--collector.mr",
                                   "--collector.verbs", f"--probe.library={library}"]) as exporter:
        for where in ("main", "thread"):
            failures += run_case(exporter, exec_program, workload, env, where)
        failures += verbs_case(exporter, exec_program, verbs_workload, env)
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:6]))
