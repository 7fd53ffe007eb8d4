#!/usr/bin/env python3
"""Host tier: rdma_process_workload_info names the workload of each process the mr collector
exports, from real cgroup v2 directories in the shapes the kubelet (systemd and cgroupfs
drivers), Slurm's cgroup/v2 plugin and systemd make, with a registering program started inside
each (issue 28).

- each program's MR series have one workload series with exactly the expected labels;
- a process in no workload's cgroup has one with pid and comm only (joins keep it);
- a process moved to another cgroup while it runs is described by its new one once the
  recheck interval has passed (its last reading until then);
- /debug/mr/stacks, /debug/workloads and `profile --pid` name the same workloads (the landing
  page links the debug pages);
- a process that exits loses its workload series with its MR series.

The directories are made under a test directory of the cgroup2 mount (the host's, or one
mounted for the test), never in the host's own kubepods or system slices. The exporter (and
`profile`) run in a cgroup namespace rooted at that directory (`unshare --cgroup` from inside
it, tests/common/cgroups.py), so that they see the shapes at the top of the tree, where the
kubelet, the runtime and slurmstepd make them: the rules match only there (issue 37: a
delegated cgroup deeper down must not pass for a pod)."""

import json
import os
import subprocess
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "common"))
import cgroups  # noqa: E402
import harness  # noqa: E402

REGIONS, LEAKED, SIZE = 4, 2, 8192


class Program:
    """mr_workload started inside a cgroup directory (it moves itself there before exec)."""

    def __init__(self, workload, library, cgroup_dir):
        env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(library))
        self.proc = subprocess.Popen([workload, "1", str(REGIONS), str(SIZE), str(LEAKED), "0",
                                      "0"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     env=env, text=True, preexec_fn=cgroups.joiner(cgroup_dir))
        ready = self.proc.stdout.readline().split()
        if ready[:1] != ["READY"]:
            raise RuntimeError(f"workload did not start: {ready}")
        self.pid = ready[1]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.stdin.write("\n")
            self.proc.stdin.flush()
            self.proc.wait(timeout=30)


def workload_labels(samples, pid):
    found = harness.series(samples, "rdma_process_workload_info", pid=pid)
    if len(found) != 1:
        return None if not found else f"{len(found)} series"
    return dict(next(iter(found)))


def main(binary, workload, library):
    if os.geteuid() != 0:
        print("SKIP: BPF and cgroup directories need root")
        return harness.SKIP
    mount, unmount = cgroups.mount_cgroup2()
    root = cgroups.Root(mount, f"rdmascope-test-{os.getpid()}")
    uid = str(uuid.uuid4())
    uid2 = str(uuid.uuid4())
    cid = uuid.uuid4().hex * 2  # 64 hex digits
    cid2 = uuid.uuid4().hex * 2
    shapes = {
        "kubernetes-systemd": (
            "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
            f"{uid.replace('-', '_')}.slice/cri-containerd-{cid}.scope",
            {"pod_uid": uid, "container_id": f"containerd://{cid}"}),
        "kubernetes-cgroupfs": (
            f"kubepods/besteffort/pod{uid2}/{cid2}", {"pod_uid": uid2, "container_id": cid2}),
        "slurm": (
            "system.slice/slurmstepd.scope/job_4711/step_0/user/task_0",
            {"slurm_job_id": "4711", "slurm_step_id": "0", "systemd_unit": "slurmstepd.scope"}),
        "systemd": ("system.slice/rdma-storage.service", {"systemd_unit": "rdma-storage.service"}),
        # The test's own directory: under no workload's shape.
        "none": ("", {}),
    }
    moved_to = os.path.join(root.base, "system.slice", "rdma-moved.service")
    check = harness.Checker()
    failures, expect = check.failures, check.expect

    programs = {}
    try:
        for relative, _ in shapes.values():
            root.make(relative)
        os.makedirs(moved_to, exist_ok=True)
        # The test moves into its directory, and the exporter's cgroup namespace is rooted there.
        root.enter()
        with harness.Exporter(binary, ["--collector.disable-defaults", "--collector.mr",
                                       "--collector.workload",
                                       "--collector.workload.recheck-interval=2s",
                                       f"--probe.library={library}"],
                              launcher=cgroups.UNSHARE_CGROUP) as exporter:
            samples = harness.parse(exporter.metrics())
            if harness.value(samples, "rdmascope_probe_attached", probe="mr") != 1.0:
                print(exporter.read_log())
                print("FAIL: mr probes not attached")
                return 1
            for name, (relative, _) in shapes.items():
                programs[name] = Program(workload, library, os.path.join(root.base, relative))
            first_read = time.monotonic()
            samples = harness.parse(exporter.metrics())
            for name, (_, labels) in shapes.items():
                pid = programs[name].pid
                expect(f"{name}: outstanding regions",
                       harness.value(samples, "rdma_mr_outstanding_regions", pid=pid),
                       float(LEAKED))
                expect(f"{name}: workload labels", workload_labels(samples, pid),
                       {"pid": pid, "comm": "mr_workload", **labels})

            # Moved while it runs (as `systemctl` or a job scheduler's adopt step would).
            mover = programs["systemd"]
            cgroups.move(mover.pid, moved_to)
            samples = harness.parse(exporter.metrics())
            # Read again only after the recheck interval (1.5 to 2 s after the first reading;
            # the pidfd says it is the same process): until then the last reading stands.
            if time.monotonic() - first_read < 1.4:
                labels = workload_labels(samples, mover.pid)
                expect("moved, before the recheck interval: the last reading",
                       labels.get("systemd_unit") if isinstance(labels, dict) else labels,
                       "rdma-storage.service")
            time.sleep(max(0.0, first_read + 2.2 - time.monotonic()))
            samples = harness.parse(exporter.metrics())
            expect("moved: workload labels", workload_labels(samples, mover.pid),
                   {"pid": mover.pid, "comm": "mr_workload", "systemd_unit": "rdma-moved.service"})

            shapes["systemd"] = (shapes["systemd"][0], {"systemd_unit": "rdma-moved.service"})

            # The debug pages name the same workloads: /debug/mr/stacks beside each leak's
            # stacks, /debug/workloads for every process described, linked from the landing page.
            for name, (_, labels) in shapes.items():
                pid = programs[name].pid
                status, body = exporter.get(f"/debug/mr/stacks?pid={pid}")
                listed = json.loads(body).get("processes", []) if status == 200 else []
                expect(f"{name}: /debug/mr/stacks workload",
                       listed[0].get("workload") if len(listed) == 1 else f"{status} {body[:200]}",
                       {k: v for k, v in labels.items()})
            status, body = exporter.get("/debug/workloads")
            listed = {str(p["pid"]): p["workload"] for p in json.loads(body)["processes"]} \
                if status == 200 else {}
            expect("/debug/workloads", {name: listed.get(programs[name].pid) for name in shapes},
                   {name: labels for name, (_, labels) in shapes.items()})
            status, page = exporter.get("/")
            expect("landing page links /debug/workloads", 'href="/debug/workloads"' in page, True)

            # `profile --pid` of the Kubernetes one names its workload (profile.json, summary).
            k8s_pid = programs["kubernetes-systemd"].pid
            with tempfile.TemporaryDirectory() as out:
                run = subprocess.run(cgroups.in_namespace(
                    [binary, "profile", f"--pid={k8s_pid}", "--duration=2s", f"--output={out}",
                     "--collector.disable-defaults", "--collector.mr", "--collector.workload",
                     f"--probe.library={library}"]),
                    capture_output=True, text=True, timeout=120)
                try:
                    with open(os.path.join(out, "profile.json")) as f:
                        profiled = json.load(f).get("workload")
                except (OSError, ValueError) as error:
                    profiled = f"no profile.json ({error}): {run.stderr[-500:]}"
                expect("profile.json workload", profiled, shapes["kubernetes-systemd"][1])
                expect("profile summary names the workload",
                       f"pod_uid={shapes['kubernetes-systemd'][1]['pod_uid']}" in run.stdout, True)

            # Exited: no MR series, no workload series.
            gone = programs.pop("slurm")
            gone.stop()
            deadline = time.monotonic() + 10
            while True:
                samples = harness.parse(exporter.metrics())
                if not harness.series(samples, "rdma_mr_outstanding_regions", pid=gone.pid) or \
                        time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            expect("exited: MR series", harness.series(samples, "rdma_mr_outstanding_regions",
                                                      pid=gone.pid), {})
            expect("exited: workload series", workload_labels(samples, gone.pid), None)
            expect("workload collector succeeded",
                   harness.value(samples, "rdmascope_collector_success", collector="workload"),
                   1.0)
    finally:
        for program in programs.values():
            program.stop()
        root.close()
        unmount()
    if failures:
        print("FAIL: " + ", ".join(failures))
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
