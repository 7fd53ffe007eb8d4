"""Checks for verbs.sh: on real libibverbs over rxe, the CQ capacity the probes read equals the
kernel's (`rdma res show cq`), the depth feeding a CQ is the QP's actual send + receive depth
(so the 1.5x sizing rule flags the undersized CQ), ibv_srq_pingpong's SRQ and shared CQ are
seen, a PORT_ERR/PORT_ACTIVE pair from a link bounce is counted, and nothing is left after the
processes exit."""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "e2e"))
import harness  # noqa: E402


def scrape(lab, name):
    return harness.parse("\n".join(lab.blocks[name]))


def kernel_cqe(lab, pid):
    rows = json.loads("\n".join(lab.blocks["res_cq"]) or "[]")
    return sorted(float(r["cqe"]) for r in rows if str(r.get("pid")) == pid)


def check(lab):
    failures = []

    def expect(what, got, want):
        if got != want:
            failures.append(f"{what}: got {got!r}, want {want!r}")

    probe = scrape(lab, "probe")
    expect("verbs probes attached in the guest",
           harness.value(probe, "rdmascope_probe_attached", probe="verbs"), 1.0)

    ready = next(line.split() for line in lab.blocks["helper_ready"] if line.startswith("READY"))
    helper, cqe, send_wr, recv_wr = ready[1], float(ready[2]), int(ready[3]), int(ready[4])
    srq_pid = next(line.split()[1] for line in lab.console if line.startswith("@@@SRQ-PID "))
    sizes = scrape(lab, "scrape_sizes")

    capacity = harness.value(sizes, "rdma_cq_capacity_entries", pid=helper)
    feeding = harness.value(sizes, "rdma_cq_feeding_wrs", pid=helper)
    expect("undersized CQ capacity == the CQ's cqe", capacity, cqe)
    expect("undersized CQ capacity == rdma res show cq", [capacity], kernel_cqe(lab, helper))
    expect("requested entries", harness.value(sizes, "rdma_cq_requested_entries", pid=helper),
           16.0)
    expect("feeding == actual send + receive WRs", feeding, float(send_wr + recv_wr))
    if capacity is None or feeding is None or not capacity < 1.5 * feeding:
        failures.append(f"sizing rule does not flag the CQ: {capacity} entries for {feeding} WRs")

    srq_max = harness.value(sizes, "rdma_srq_max_wrs", pid=srq_pid)
    if srq_max is None or srq_max < 500:
        failures.append(f"ibv_srq_pingpong SRQ depth {srq_max}, want >= 500 (its rx-depth)")
    expect("SRQ not armed", harness.value(sizes, "rdma_srq_limit_wrs", pid=srq_pid), 0.0)
    srq_cq_capacity = harness.value(sizes, "rdma_cq_capacity_entries", pid=srq_pid)
    expect("srq_pingpong CQ capacity == rdma res show cq", [srq_cq_capacity],
           kernel_cqe(lab, srq_pid))
    srq_feeding = harness.value(sizes, "rdma_cq_feeding_wrs", pid=srq_pid)
    if srq_feeding is None or srq_max is None or srq_feeding < srq_max + 16:
        failures.append(f"srq_pingpong CQ feeding {srq_feeding}: want the SRQ's {srq_max} "
                        "(once) + 16 QPs' send WRs")

    # The preload library in ibv_srq_pingpong: its 500 receives wait in the SRQ, none consumed.
    expect("SRQ fill level (preload)",
           harness.value(sizes, "rdma_srq_posted_wrs", pid=srq_pid), 500.0)
    expect("srq_pingpong CQ outstanding (preload)",
           harness.value(sizes, "rdma_cq_outstanding_entries", pid=srq_pid), 0.0)
    expect("CQ capacity reported once by two collectors", len(harness.series(
        sizes, "rdma_cq_capacity_entries", pid=srq_pid)), 1)

    events = scrape(lab, "scrape_events")
    printed = [line for line in lab.blocks["helper_events"] if line.startswith("EVENT")]
    # The bounce gives one PORT_ERR and one PORT_ACTIVE; a PORT_ACTIVE may also arrive at the
    # helper's start when rxe's port comes up just after it opened the device (seen in CI):
    # each must be counted as often as the helper received it.
    for event, text in (("PORT_ERR", "EVENT port error"), ("PORT_ACTIVE", "EVENT port active")):
        received = sum(1 for line in printed if line.strip() == text)
        expect(f"{event} received from the bounce", received >= 1, True)
        expect(f"{event} counted", harness.value(events, "rdma_async_events_total", pid=helper,
                                                 event=event), float(received))
    # IPv6 address changes add GID_CHANGE events: every event the helper received is counted.
    expect("events counted == events the helper received",
           sum(harness.series(events, "rdma_async_events_total", pid=helper).values()),
           float(len(printed)))

    final = scrape(lab, "scrape_final")
    expect("final figures of the killed srq_pingpong served once after its exit",
           len(harness.series(final, "rdma_srq_posted_wrs", pid=srq_pid)), 1)
    gone = scrape(lab, "scrape_gone")
    expect("stats file of the killed server forgotten",
           [line for line in lab.blocks.get("stats_files", []) if line.strip()], [])
    for pid in (helper, srq_pid):
        expect(f"CQ series of {pid} after exit",
               len(harness.series(gone, "rdma_cq_capacity_entries", pid=pid)), 0)
    lab.notes.append(f"guest: CQ {int(cqe)} entries fed by {send_wr}+{recv_wr} WRs "
                     f"(ratio {cqe / (send_wr + recv_wr):.2f}); srq_pingpong SRQ {srq_max} WRs, "
                     f"CQ {srq_cq_capacity} entries fed by {srq_feeding}; events: "
                     f"{' / '.join(line[6:] for line in printed)}")
    return failures
