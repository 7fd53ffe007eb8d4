"""Checks for workload.sh: the MR (kernel path, seeded from restrack) and resources series of
each program join, on pid, to the rdma_process_workload_info of the cgroup shape it runs in."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "e2e"))
import harness  # noqa: E402

SIZES = [65536, 131072, 4096]
UID1 = "0c1e3f3a-2b6d-4f6a-9d3e-7a2b1c0d9e8f"
UID2 = "5a6b7c8d-1111-2222-3333-444455556666"
CID1, CID2 = "a" * 64, "b" * 64
EXPECTED = {
    "k8s_systemd": {"pod_uid": UID1, "container_id": f"containerd://{CID1}"},
    "k8s_cgroupfs": {"pod_uid": UID2, "container_id": CID2},
    "slurm": {"slurm_job_id": "4711", "slurm_step_id": "0", "systemd_unit": "slurmstepd.scope"},
    "systemd": {"systemd_unit": "rdma-storage.service"},
}


def check(lab):
    failures = []
    pids = {}
    for line in lab.console:
        if line.startswith("@@@PID "):
            _, name, pid = line.split()
            pids[name] = pid
    scrape = harness.parse("\n".join(lab.blocks["scrape"]))
    for name, labels in EXPECTED.items():
        pid = pids.get(name)
        if pid is None:
            failures.append(f"{name}: no pid on the console")
            continue
        info = harness.series(scrape, "rdma_process_workload_info", pid=pid)
        got = dict(next(iter(info))) if len(info) == 1 else f"{len(info)} series"
        want = {"pid": pid, "comm": "mr_holder", **labels}
        if got != want:
            failures.append(f"{name}: workload {got!r}, want {want!r}")
        regions = harness.value(scrape, "rdma_mr_outstanding_regions", pid=pid)
        if regions != float(len(SIZES)):
            failures.append(f"{name}: rdma_mr_outstanding_regions {regions}, want {len(SIZES)}")
        held = harness.series(scrape, "rdma_process_resources", pid=pid, device="rxe0")
        if not held:
            failures.append(f"{name}: no rdma_process_resources for pid {pid}")
    lab.notes.append(f"guest: {len(pids)} mr_holder programs in kubepods, Slurm and systemd "
                     "cgroup shapes, each joined to its workload")
    return failures
