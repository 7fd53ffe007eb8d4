#!/usr/bin/env python3
"""Host tier: a reused pid does not mix two processes' registrations.

Process A leaks regions and exits; before the exporter scrapes, process B is started with the
same pid (forced through /proc/sys/kernel/ns_last_pid) and registers its own. The exporter must
show B's counts alone, release A's leaks as released at exit, and later B's."""

import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
import harness  # noqa: E402

NS_LAST_PID = "/proc/sys/kernel/ns_last_pid"
# The workload runs under a name of its own: the released-at-exit counters are per comm, and
# the other host tests' mr_workload processes (run alongside by ctest -j) exit too.
COMM = "mr_pid_reuse"
B_THREADS = 8


value = harness.value


def start(workload, env, regions, leaked, threads=1):
    proc = subprocess.Popen([workload, str(threads), str(regions), "4096", str(leaked), "0", "0"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)
    ready = proc.stdout.readline().split()
    return proc, int(ready[1])


def main(binary, workload, library):
    if os.geteuid() != 0 or not os.path.exists(NS_LAST_PID):
        print("SKIP: needs root and", NS_LAST_PID)
        return harness.SKIP
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(library))
    with tempfile.TemporaryDirectory() as work:
        renamed = os.path.join(work, COMM)
        shutil.copy2(workload, renamed)
        return run(binary, renamed, library, env)


def run(binary, workload, library, env):
    with harness.Exporter(binary, ["--collector.disable-defaults", "--collector.mr",
                                   f"--probe.library={library}"]) as exporter:
        for attempt in range(10):
            a, pid_a = start(workload, env, regions=10, leaked=4)
            a.stdin.write("exit\n")
            a.stdin.flush()
            a.wait()
            with open(NS_LAST_PID, "w") as f:
                f.write(str(pid_a - 1))
            # B's threads all register at once: the reused pid's per-process entry is created
            # under contention (it used to be reset in place, wiping siblings' counts).
            b, pid_b = start(workload, env, regions=6, leaked=2, threads=B_THREADS)
            if pid_b == pid_a:
                break
            b.stdin.write("exit\n")
            b.stdin.flush()
            b.wait()
            exporter.metrics()  # settle before the next attempt
        else:
            print("SKIP: could not get the same pid twice (busy machine)")
            return harness.SKIP
        samples = harness.parse(exporter.metrics())
        released_before = value(samples, "rdma_mr_exit_released_regions_total",
                                comm=COMM) or 0.0
        got = {
            "registrations": value(samples, "rdma_mr_registrations_total", pid=str(pid_b)),
            "outstanding": value(samples, "rdma_mr_outstanding_regions", pid=str(pid_b)),
            "bytes": value(samples, "rdma_mr_outstanding_bytes", pid=str(pid_b)),
        }
        b.stdin.write("exit\n")
        b.stdin.flush()
        b.wait()
        time.sleep(0.2)
        after = harness.parse(exporter.metrics())
        released_after = value(after, "rdma_mr_exit_released_regions_total", comm=COMM)
        unknown = value(after, "rdma_mr_exit_released_regions_total", comm="unknown")
    want = {"registrations": 6.0 * B_THREADS, "outstanding": 2.0 * B_THREADS,
            "bytes": 8192.0 * B_THREADS}
    print(f"pid {pid_b} reused after {attempt + 1} attempt(s): second process {got} (want {want});"
          f" released at exit {released_before} then {released_after}")
    failures = []
    if got != want:
        failures.append(f"second process's counts mixed with the first's: {got}")
    # A's 4 leaks are released when the first scrape sees its exit, B's at the next.
    if (released_after is None or released_after - released_before != 2.0 * B_THREADS
            or released_before < 4):
        failures.append(f"released at exit: {released_before} -> {released_after}")
    if unknown is not None:
        failures.append(f"{unknown} regions released under comm 'unknown'")
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
