#!/usr/bin/env python3
"""Host tier: the verbs probes report exactly the CQs, SRQ and async events a program
creates through the libibverbs stand-in (real structs, rdma-core's symbol versions): CQ
capacity after provider rounding and ibv_resize_cq, the summed depth of the QPs feeding each
CQ (an SRQ counted once per receive CQ), the SRQ limit armed then disarmed by
SRQ_LIMIT_REACHED, a CQ created through the IBVERBS_1.0 ABI counted once, a failed
ibv_destroy_cq keeping its CQ, and nothing left after teardown or exit.
The figures are derived in tests/host/fakeverbs/verbs_workload.c."""

import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
import harness  # noqa: E402


def main(binary, workload, library):
    if os.geteuid() != 0:
        print("SKIP: BPF needs root")
        return harness.SKIP
    check = harness.Checker()
    failures, expect = check.failures, check.expect

    env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(library))
    with harness.Exporter(binary, ["--collector.disable-defaults", "--collector.verbs",
                                   f"--probe.library={library}"]) as exporter:
        samples = harness.parse(exporter.metrics())
        expect("probes attached", harness.value(samples, "rdmascope_probe_attached",
                                                probe="verbs"), 1.0)
        proc = subprocess.Popen([workload], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                env=env, text=True)
        pid = proc.stdout.readline().split()[1]
        samples = harness.parse(exporter.metrics())

        def by_cq(name):
            return sorted((v for _, v in harness.series(samples, name, pid=pid).items()))

        expect("CQ capacities", by_cq("rdma_cq_capacity_entries"), [15.0, 127.0, 1023.0])
        expect("CQ requested", by_cq("rdma_cq_requested_entries"), [10.0, 100.0, 1000.0])
        capacity_to_feeding = {
            dict(labels)["cq"]: v for labels, v in
            harness.series(samples, "rdma_cq_feeding_wrs", pid=pid).items()}
        capacity = {dict(labels)["cq"]: v for labels, v in
                    harness.series(samples, "rdma_cq_capacity_entries", pid=pid).items()}
        expect("feeding per CQ (capacity -> feeding)",
               sorted((capacity[cq], feeding) for cq, feeding in capacity_to_feeding.items()),
               [(15.0, 0.0), (127.0, 136.0), (1023.0, 272.0)])
        expect("device label", {dict(labels)["device"] for labels in
                                harness.series(samples, "rdma_cq_capacity_entries", pid=pid)},
               {"fakedev0"})
        expect("comm label", {dict(labels)["comm"] for labels in
                              harness.series(samples, "rdma_cq_capacity_entries", pid=pid)},
               {"verbs_workload"})
        expect("SRQ depth", harness.value(samples, "rdma_srq_max_wrs", pid=pid), 256.0)
        expect("SRQ limit disarmed by SRQ_LIMIT_REACHED",
               harness.value(samples, "rdma_srq_limit_wrs", pid=pid), 0.0)
        expect("SRQ limit events", harness.value(samples, "rdma_srq_limit_reached_total", pid=pid),
               1.0)
        for event, count in [("SRQ_LIMIT_REACHED", 1.0), ("QP_FATAL", 1.0), ("PORT_ERR", 2.0),
                             ("CQ_ERR", 0.0)]:
            expect(f"async event {event}", harness.value(
                samples, "rdma_async_events_total", pid=pid, event=event), count)
        expect("no queue omitted", harness.value(samples, "rdmascope_verbs_queues_omitted"), 0.0)

        proc.stdin.write("teardown\n")
        proc.stdin.flush()
        expect("workload tore down", proc.stdout.readline().strip(), "TORNDOWN")
        samples = harness.parse(exporter.metrics())
        expect("CQs after teardown",
               len(harness.series(samples, "rdma_cq_capacity_entries", pid=pid)), 0)
        expect("SRQs after teardown", len(harness.series(samples, "rdma_srq_max_wrs", pid=pid)), 0)
        expect("events kept while the process lives", harness.value(
            samples, "rdma_async_events_total", pid=pid, event="PORT_ERR"), 2.0)

        proc.stdin.write("exit\n")
        proc.stdin.flush()
        proc.wait()
        samples = harness.parse(exporter.metrics())
        expect("series after exit",
               len(harness.series(samples, "rdma_async_events_total", pid=pid)), 0)
        expect("nothing lost", sum(v for _, v in
                                   harness.series(samples, "rdma_verbs_lost_total").items()), 0.0)
        if failures:
            print(exporter.read_log())
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
