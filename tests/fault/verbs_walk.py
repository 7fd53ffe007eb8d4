#!/usr/bin/env python3
"""Verbs probe map walks failing (issue 18): the exporter runs with tests/fault/bpf_faults.c
preloaded while verbs_workload holds 3 CQs and an SRQ.

- next_key@3: bpf_map_get_next_key goes through 3 times, then fails (EFAULT): the walk is cut
  short midway (the process map walked, the CQ map after its first CQ), then every walk of
  later scrapes fails at once. Before the fix that scrape served 1 of the 3 CQs (and later
  ones none) as if complete, with the verbs collector succeeding and nothing logged.
- next_key (EIO from the first call) and lookup (EIO for every entry): the same.
In each case: no CQ, SRQ or async event series of the workload, no rdma_verbs_lost_total,
the verbs collector failed, the reason in the log, the exporter alive; the fault gone, the
next scrape serves the 3 CQs and the SRQ exactly as before (nothing was deleted meanwhile).

Usage: verbs_walk.py RDMASCOPE_BINARY VERBS_WORKLOAD LIBFAKEVERBS BPF_FAULTS_SO"""

import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
import harness  # noqa: E402
from fault_checks import BpfFaults, Checks  # noqa: E402

CAPACITIES = [15.0, 127.0, 1023.0]  # tests/host/fakeverbs/verbs_workload.c
WHY = "cannot walk the verbs probes'"


def main(binary, workload, library, shim):
    if os.geteuid() != 0:
        print("SKIP: eBPF probes need root")
        return harness.SKIP
    checks = Checks()
    expect = checks.expect
    args = ["--collector.disable-defaults", "--collector.verbs", f"--probe.library={library}"]
    with BpfFaults(shim) as faults:
        fail = faults.set
        with harness.Exporter(binary, args, env=faults.env) as exporter:
            samples = harness.parse(exporter.metrics())
            if harness.value(samples, "rdmascope_probe_attached", probe="verbs") != 1.0:
                print(exporter.read_log())
                print("SKIP: verbs probes did not attach here")
                return harness.SKIP
            proc = subprocess.Popen(
                [workload], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                env=dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(library)))
            pid = proc.stdout.readline().split()[1]
            try:
                def complete(when):
                    samples = harness.parse(exporter.metrics())
                    expect(f"{when}: CQ capacities", sorted(harness.series(
                        samples, "rdma_cq_capacity_entries", pid=pid).values()), CAPACITIES)
                    expect(f"{when}: SRQ depth",
                           harness.value(samples, "rdma_srq_max_wrs", pid=pid), 256.0)
                    expect(f"{when}: verbs collector success", harness.value(
                        samples, "rdmascope_collector_success", collector="verbs"), 1.0)

                complete("no fault")
                for words in ("next_key@3", "next_key", "lookup"):
                    logged = exporter.read_log().count(WHY)
                    fail(words)
                    for scrape in (1, 2):  # the first cut midway (next_key@3), then at once
                        samples = harness.parse(exporter.metrics())
                        what = f"{words} failing, scrape {scrape}"
                        for name in ("rdma_cq_capacity_entries", "rdma_srq_max_wrs",
                                     "rdma_async_events_total"):
                            expect(f"{what}: no {name}",
                                   harness.series(samples, name, pid=pid), {})
                        expect(f"{what}: no made-up lost_total",
                               harness.series(samples, "rdma_verbs_lost_total"), {})
                        expect(f"{what}: verbs collector failed", harness.value(
                            samples, "rdmascope_collector_success", collector="verbs"), 0.0)
                    # Logged when the collector's state or reason changes, not at every scrape.
                    expect(f"{words} failing: reason logged",
                           exporter.read_log().count(WHY) > logged, True)
                    fail("")
                    complete(f"after {words}")
            finally:
                proc.stdin.write("exit\n")
                proc.stdin.close()
                proc.wait(timeout=20)
            if exporter.proc.poll() is not None:
                checks.fail("exporter died")
            if checks.failures:
                print(exporter.read_log())
    return checks.result()


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
