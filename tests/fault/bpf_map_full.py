#!/usr/bin/env python3
"""BPF map full (issue 18 item 3): the MR probes with --collector.mr.max-regions=16 while a
process (the libibverbs stand-in) keeps 40 regions registered.

- The scrape answers 200; the regions the map could not hold are counted in
  rdma_mr_lost_total{reason="regions"}, and outstanding + lost = 40 (nothing vanishes
  silently, nothing is invented: outstanding never exceeds the map's 16).
- rdma_mr_lost_total is a counter: once that process exits, its lost regions stay counted.
- Once that process exits its series leave and the map has room again: a second process's
  10 regions are counted exactly, with no new loss (the collector recovers when the fault
  stops; rdmascope_collector_success{collector="mr"} is 1 throughout).

Usage: bpf_map_full.py RDMASCOPE_BINARY MR_WORKLOAD LIBFAKEVERBS"""

import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
import harness  # noqa: E402
from fault_checks import Checks  # noqa: E402

MAP = 16
SIZE = 4096


def start(workload, library, regions):
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(library))
    # 1 thread, REGIONS registrations of SIZE, all of them kept (leaked) until stdin closes.
    proc = subprocess.Popen([workload, "1", str(regions), str(SIZE), str(regions), "0", "0"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)
    ready = proc.stdout.readline().split()
    if ready[:1] != ["READY"]:
        proc.kill()
        raise RuntimeError(f"workload did not start: {ready}")
    return proc, ready[1]


def stop(proc):
    proc.stdin.close()
    proc.wait(timeout=20)


def main(binary, workload, library):
    if os.geteuid() != 0:
        print("SKIP: eBPF probes need root")
        return harness.SKIP
    checks = Checks()
    expect = checks.expect

    with harness.Exporter(binary, ["--collector.disable-defaults", "--collector.mr",
                                   f"--probe.library={library}",
                                   f"--collector.mr.max-regions={MAP}"]) as exporter:
        samples = harness.parse(exporter.metrics())
        if harness.value(samples, "rdmascope_probe_attached", probe="mr") != 1.0:
            print(exporter.read_log())
            print("SKIP: MR probes did not attach here")
            return harness.SKIP
        lost_before = harness.value(samples, "rdma_mr_lost_total", reason="regions") or 0.0
        proc, pid = start(workload, library, 40)
        try:
            samples = harness.parse(exporter.metrics())
            outstanding = harness.value(samples, "rdma_mr_outstanding_regions", pid=pid)
            lost = harness.value(samples, "rdma_mr_lost_total", reason="regions") - lost_before
            expect("outstanding regions within the map", outstanding is not None and
                   outstanding <= MAP, True)
            expect("outstanding + lost regions", (outstanding or 0) + lost, 40.0)
            expect("mr collector success with the map full",
                   harness.value(samples, "rdmascope_collector_success", collector="mr"), 1.0)
        finally:
            stop(proc)
        # The exit is reaped at the next scrape; then the map has room again.
        deadline = time.monotonic() + 20
        while True:
            samples = harness.parse(exporter.metrics())
            if not harness.series(samples, "rdma_mr_outstanding_regions", pid=pid):
                break
            if time.monotonic() > deadline:
                checks.fail("the full process's series stayed after its exit")
                break
            time.sleep(0.2)
        lost_after_first = harness.value(samples, "rdma_mr_lost_total", reason="regions")
        # A counter: the exited process's losses stay counted (it fell to 0 before the fix).
        expect("lost regions after the exit (monotonic)", lost_after_first, lost_before + lost)
        proc, pid = start(workload, library, 10)
        try:
            samples = harness.parse(exporter.metrics())
            expect("second process: outstanding regions",
                   harness.value(samples, "rdma_mr_outstanding_regions", pid=pid), 10.0)
            expect("second process: outstanding bytes",
                   harness.value(samples, "rdma_mr_outstanding_bytes", pid=pid), 10.0 * SIZE)
            expect("second process: no new loss",
                   harness.value(samples, "rdma_mr_lost_total", reason="regions"),
                   lost_after_first)
        finally:
            stop(proc)
        if exporter.proc.poll() is not None:
            checks.fail("exporter died")
    return checks.result()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3]))
