#!/usr/bin/env python3
"""Host tier: the verbs probes' maps, once found empty, are not walked again until the probes
insert something (VerbsProbe::Snapshot skips the walk while their insert count stands still).
That must never leave the exporter blind: after idle scrapes, a program in its own pid
namespace (unshare --pid --fork) creates CQs and they are reported under its host pid; it
exits, the maps empty again, idle scrapes follow, and a second program is reported too.
Without the insert count the skip would miss both (checked by hand: it does)."""

import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
import harness  # noqa: E402

CQS = [15.0, 127.0, 1023.0]  # verbs_workload's CQ capacities (tests/host/verbs_tracking.py)


def main(binary, workload, library):
    if os.geteuid() != 0:
        print("SKIP: BPF needs root")
        return harness.SKIP
    check = harness.Checker()
    failures, expect = check.failures, check.expect

    def idle_scrapes(exporter, what):
        for i in range(3):
            samples = harness.parse(exporter.metrics())
            expect(f"{what}: no CQ (scrape {i + 1})",
                   len(harness.series(samples, "rdma_cq_capacity_entries")), 0)
            expect(f"{what}: verbs collector ok (scrape {i + 1})", harness.value(
                samples, "rdmascope_collector_success", collector="verbs"), 1.0)

    def cqs_of(exporter, pid):
        samples = harness.parse(exporter.metrics())
        return sorted(harness.series(samples, "rdma_cq_capacity_entries", pid=pid).values())

    def finish(proc):
        proc.stdin.write("exit\n")
        proc.stdin.flush()
        proc.wait()

    env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(library))
    with harness.Exporter(binary, ["--collector.disable-defaults", "--collector.verbs",
                                   f"--probe.library={library}"]) as exporter:
        idle_scrapes(exporter, "before any program")

        # A pid namespace: the program sees itself as pid 1; the probes key it by its host pid.
        proc = subprocess.Popen(["unshare", "--pid", "--fork", workload], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, env=env, text=True)
        expect("pid inside the namespace", proc.stdout.readline().split(), ["READY", "1"])
        with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as f:
            host_pid = f.read().split()[0]
        expect("CQs of the program in a pid namespace", cqs_of(exporter, host_pid), CQS)
        finish(proc)
        expect("its CQs after its exit", cqs_of(exporter, host_pid), [])

        idle_scrapes(exporter, "after the first program")
        proc = subprocess.Popen([workload], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                env=env, text=True)
        pid = proc.stdout.readline().split()[1]
        expect("CQs of a second program after idle scrapes", cqs_of(exporter, pid), CQS)
        finish(proc)
        if failures:
            print(exporter.read_log())
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
