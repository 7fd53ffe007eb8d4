"""Checks for resources.sh: the exported per-device and per-process RDMA objects equal
`rdma res show` (iproute2, same kernel interface) at the same moment, for a waiting
ibv_rc_pingpong server and a waiting ib_write_bw server; nothing is left once they exit."""

import collections
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "e2e"))
import harness  # noqa: E402

KINDS = ["qp", "cq", "mr", "pd", "ctx", "srq", "cm_id"]


def rows(samples, name):
    """(labels as a dict, value) for every series of `name`."""
    return [(dict(labels), v) for labels, v in harness.series(samples, name).items()]


def rdma_json(lab, name):
    text = "\n".join(lab.blocks.get(name, [])).strip()
    return json.loads(text) if text else []


def check(lab):
    failures = []

    def expect(what, got, want):
        if got != want:
            failures.append(f"{what}: got {got!r}, want {want!r}")

    pids = next(line.split()[1:] for line in lab.console if line.startswith("@@@PIDS "))
    before = harness.parse("\n".join(lab.blocks["scrape_before"]))
    after = harness.parse("\n".join(lab.blocks["scrape_after"]))
    expect("objects stable while the servers wait",
           harness.series(before, "rdma_process_resources"),
           harness.series(after, "rdma_process_resources"))

    # Host-wide summary.
    summary = {}
    for row in rdma_json(lab, "res_summary"):
        device = row.get("ifname")
        for kind in KINDS:
            if kind in row:
                summary[(device, kind)] = float(row[kind])
    exported = {(labels["device"], labels["resource"]): v
                for labels, v in rows(after, "rdma_resources")}
    expect("rdma_resources == rdma res show", exported, summary)

    # Per process: objects of each kind, CQ capacity, MR bytes, QPs by type and state.
    counts = collections.Counter()
    cqe = collections.Counter()
    mrlen = collections.Counter()
    qps = collections.Counter()
    comms = {}
    for kind in KINDS:
        for row in rdma_json(lab, f"res_{kind}"):
            if "pid" not in row:
                continue  # kernel consumers: checked by count below
            key = (row["ifname"], str(row["pid"]))
            comms[key[1]] = row.get("comm")
            counts[key + (kind,)] += 1
            if kind == "cq":
                cqe[key] += int(row["cqe"])
            if kind == "mr" and "mrlen" in row:
                mrlen[key] += int(row["mrlen"])
            if kind == "qp":
                qps[key + (row["type"], row["state"])] += 1
    got_counts = {(l["device"], l["pid"], l["resource"]): v
                  for l, v in rows(after, "rdma_process_resources")
                  if l["pid"] not in ("kernel", "other", "unknown")}
    expect("rdma_process_resources == rdma res show per pid", got_counts,
           {k: float(v) for k, v in counts.items()})
    expect("rdma_process_cq_entries == summed cqe",
           {(l["device"], l["pid"]): v
            for l, v in rows(after, "rdma_process_cq_entries")
            if l["pid"] in pids},
           {k: float(v) for k, v in cqe.items()})
    expect("rdma_process_mr_bytes == summed mrlen",
           {(l["device"], l["pid"]): v
            for l, v in rows(after, "rdma_process_mr_bytes")
            if l["pid"] in pids},
           {k: float(v) for k, v in mrlen.items()})
    expect("rdma_process_qps == rdma res show qp",
           {(l["device"], l["pid"], l["type"], l["state"]): v
            for l, v in rows(after, "rdma_process_qps") if l["pid"] in pids},
           {k: float(v) for k, v in qps.items()})
    for labels, _ in rows(after, "rdma_process_resources"):
        if labels["pid"] in comms:
            expect(f"comm of {labels['pid']}", labels["comm"], comms[labels["pid"]])

    pingpong = pids[0]
    for kind in ("ctx", "pd", "cq", "qp", "mr"):
        got = harness.value(after, "rdma_process_resources", pid=pingpong, resource=kind)
        if not got:
            failures.append(f"ibv_rc_pingpong server holds no {kind}")
    # rxe has no raw CQ dump: the raw queries are refused and the series absent, quietly.
    expect("no hardware occupancy on rxe",
           len(harness.series(after, "rdma_cq_hardware_occupancy_entries")), 0)
    expect("resources collector healthy", harness.value(
        after, "rdmascope_collector_success", collector="resources"), 1.0)
    gone = harness.parse("\n".join(lab.blocks["scrape_gone"]))
    for pid in pids:
        expect(f"series of pid {pid} after exit",
               len(harness.series(gone, "rdma_process_resources", pid=pid)), 0)
    lab.notes.append("guest: " + ", ".join(
        f"{pid} {comms.get(pid)}: " + " ".join(
            f"{kind}={int(counts[(d, p, kind)])}" for (d, p, kind) in counts if p == pid)
        for pid in pids))
    return failures
