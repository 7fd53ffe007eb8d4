#!/usr/bin/env python3
"""Host tier: `rdmascope profile` on the libibverbs stand-in (profile_workload.c).

1. `profile -- profile_workload linger`: every MR figure of profile.json exact, the regions
   left at exit named by their registering functions (leak_buffers: 5 x 64 KiB; leak_late:
   2 x 4 KiB, registered 0.5 s before exit, so they are seen only if the call sites are read
   before the probe forgets the exited process), the program's exit status, folded stacks
   summing to the outstanding bytes.
2. Ctrl-C (SIGINT to rdmascope) mid-window: the report is still written, the window is
   "interrupted" and the still-running program is said to keep running.
3. `profile --pid`: attached to a waiting process before it registers; the same figures.
In 1 and 3: each QP's depths exact (max_send/recv_wr, max_send/recv_sge, type) and the threads'
NUMA samples; in 3 the program runs pinned to one CPU: every sample on that CPU's node.
Message sizes are checked when the preload library exports them (rdma_process_message_size_bytes,
being added); until then profile.json must say "not measured" (null), never 0."""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77

EXPECTED_MR = {
    "registrations": 29,
    "deregistrations": 22,
    "failures": 1,
    "registered_bytes": 20 * 8192 + 5 * 65536 + 2 * 4096 + (2 << 20) + 1000,
    "outstanding_regions": 7,
    "outstanding_bytes": 5 * 65536 + 2 * 4096,
    # Per registration (profile_workload.c): alignment of address and length, churn, flags.
    "aligned_2mib": 1,
    "aligned_4kib": 20 + 5 + 2,
    "unaligned": 1,
    "churn_registrations": 19,
    "churn_bytes": 19 * 8192,
    "access_flags": {"LOCAL_WRITE": 29, "REMOTE_READ": 27, "REMOTE_WRITE": 1,
                     "REMOTE_ATOMIC": 1, "RELAXED_ORDERING": 1},
    "unmeasured": [],
}


def profile_cmd(binary, library, preload, output, extra):
    return [binary, "profile", "--collector.disable-defaults", "--collector.mr",
            "--collector.verbs", "--collector.occupancy", f"--probe.library={library}",
            "--interval=200ms", "--duration=60s", f"--output={output}",
            f"--preload={preload}", *extra]


def env_for(library):
    return dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(library))


def stack_of(report, function):
    """The stacks naming `function`, summed: a loop the compiler unrolled calls from two sites."""
    found = [s for s in report["stacks"] if any(f["function"] == function for f in s["frames"])]
    if not found:
        return None
    return {key: sum(s[key] for s in found) for key in ("outstanding_regions", "outstanding_bytes")}


def check(failures, what, got, want):
    ok = got == want
    print(("ok" if ok else "FAIL") + f": {what}: {got!r}" + ("" if ok else f" (want {want!r})"))
    if not ok:
        failures.append(what)


def check_mr(failures, label, report, at_exit):
    for key, want in EXPECTED_MR.items():
        check(failures, f"{label}: mr.{key}", report["mr"].get(key, "absent"), want)
    if at_exit:
        check(failures, f"{label}: mr.released_at_exit_regions",
              report["mr"]["released_at_exit_regions"], 7)
        check(failures, f"{label}: mr.released_at_exit_bytes",
              report["mr"]["released_at_exit_bytes"], 5 * 65536 + 2 * 4096)
    size = report["mr"]["size_bytes"]
    check(failures, f"{label}: size histogram count", size and size["count"], 29)
    for function, regions, nbytes in (("leak_buffers", 5, 5 * 65536), ("leak_late", 2, 8192)):
        stack = stack_of(report, function)
        check(failures, f"{label}: a stack names {function}", stack is not None, True)
        if stack:
            check(failures, f"{label}: {function} regions", stack["outstanding_regions"], regions)
            check(failures, f"{label}: {function} bytes", stack["outstanding_bytes"], nbytes)


def check_messages(failures, label, report):
    messages = report.get("messages")
    send = messages and messages.get("send_bytes")
    if not report.get("preload_active") or send is None:
        # The preload library's message metrics have not landed: "not measured", never 0.
        check(failures, f"{label}: messages not measured (null)", send, None)
        return
    check(failures, f"{label}: send messages", send["count"], 10)
    check(failures, f"{label}: send bytes", send["sum"], 10 * 2048)
    recv = messages["recv_bytes"]
    check(failures, f"{label}: receive messages", recv and recv["count"], 4)


def check_perf(failures, label, report, switches):
    """The program's own perf counters (ProcessPerfCounters): the software events it certainly
    caused while counted (profile_workload.c: 1024 pages touched; `switches` times it blocked:
    2 sleeps in linger mode, or, attached with --pid while it already waits for its first
    line, the wait for its second one); a hardware event on this PMU-less host is unavailable
    with its reason, never 0."""
    perf = report["perf"]
    events = perf["events"]
    check(failures, f"{label}: perf events are the process's own", perf.get("events_scope"),
          "process")
    check(failures, f"{label}: page-faults >= 1024", events.get("page-faults", 0) >= 1024, True)
    check(failures, f"{label}: context-switches >= {switches}",
          events.get("context-switches", 0) >= switches, True)
    check(failures, f"{label}: task-clock > 0", events.get("task-clock", 0) > 0, True)
    if os.path.exists("/sys/bus/event_source/devices/cpu"):
        return  # a hardware PMU: cycles may count here
    check(failures, f"{label}: cycles not reported as a count", "cycles" in events, False)
    check(failures, f"{label}: cycles unavailable with a reason",
          bool(perf.get("unavailable", {}).get("cycles")), True)


# profile_workload.c's QPs as the stand-in grants them (max_send_wr, max_recv_wr rounded up to
# powers of two; SGEs as asked), on its CQ's device.
EXPECTED_QPS = [
    {"type": "RC", "device": "fakedev0", "max_send_wr": 16, "max_recv_wr": 16,
     "max_send_sge": 1, "max_recv_sge": 1, "uses_srq": False},
    {"type": "UD", "device": "fakedev0", "max_send_wr": 128, "max_recv_wr": 64,
     "max_send_sge": 3, "max_recv_sge": 2, "uses_srq": False},
]


def check_qps(failures, label, report):
    qps = [q for q in report["queues"] if q["kind"] == "qp"]
    keys = EXPECTED_QPS[0].keys()
    got = sorted(({k: q.get(k) for k in keys} for q in qps), key=lambda q: q["type"])
    check(failures, f"{label}: per-QP depths", got, EXPECTED_QPS)
    for qp in qps:
        # The stand-in's device has no active port: the bandwidth to fill is unknown, so the
        # needed depth is null, never 0.
        check(failures, f"{label}: qp {qp['handle']} needed_send_wrs", qp.get("needed_send_wrs"),
              None)
        check(failures, f"{label}: qp {qp['handle']} capacity is max_send_wr", qp["capacity"],
              qp.get("max_send_wr"))


def pinned_cpu():
    return min(os.sched_getaffinity(0))


def node_of(cpu):
    """The NUMA node of `cpu` from sysfs (0 on a host without node directories)."""
    base = "/sys/devices/system/node"
    for entry in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        if not entry.startswith("node") or not entry[4:].isdigit():
            continue
        for part in open(os.path.join(base, entry, "cpulist")).read().strip().split(","):
            if not part:
                continue
            low, _, high = part.partition("-")
            if int(low) <= cpu <= int(high or low):
                return int(entry[4:])
    return None


def check_numa(failures, label, report, cpu):
    """Pinned on `cpu` (None: not pinned), every thread sample is on its node. The stand-in
    has no RDMA device, so the NIC's node and the off-node share are null (never 0)."""
    numa = report["numa"]
    node = None if cpu is None else node_of(cpu)
    threads = numa["threads"]
    check(failures, f"{label}: numa threads sampled", len(threads) >= 1, True)
    check(failures, f"{label}: numa samples counted", numa["samples"],
          sum(sum(t["samples_by_node"].values()) for t in threads))
    if node is not None:
        check(failures, f"{label}: every thread sample on node {node}",
              {n for t in threads for n in t["samples_by_node"]}, {str(node)})
        check(failures, f"{label}: majority nodes", {t["majority_node"] for t in threads}, {node})
        check(failures, f"{label}: perf.thread_numa_nodes", set(report["perf"]["thread_numa_nodes"]),
              {node})
    memory = numa["memory_bytes_by_node"]
    check(failures, f"{label}: resident memory per node read",
          memory is not None and sum(memory.values()) > 0, True)
    check(failures, f"{label}: numa_maps lines all parsed", numa["malformed_numa_maps_lines"], 0)
    check(failures, f"{label}: nic_node unknown", numa["nic_node"], None)
    check(failures, f"{label}: off_nic_share unknown", numa["off_nic_share"], None)
    check(failures, f"{label}: no numa advice without a NIC node",
          [a["id"] for a in report["advice"] if a["id"] == "host.numa_placement"], [])
    check(failures, f"{label}: schema_version", report["schema_version"], 2)


def check_outputs(failures, label, output, report):
    folded = open(os.path.join(output, "outstanding_bytes.folded")).read().split("\n")
    total = sum(int(line.rsplit(" ", 1)[1]) for line in folded if line.strip())
    check(failures, f"{label}: folded outstanding bytes sum", total,
          report["mr"]["outstanding_bytes"])
    for name in ("profile.pb.gz", "profile.html", "registered_bytes.folded"):
        check(failures, f"{label}: {name} written",
              os.path.getsize(os.path.join(output, name)) > 0, True)


def launch_case(binary, workload, library, preload, root, failures):
    output = os.path.join(root, "launch")
    run = subprocess.run(profile_cmd(binary, library, preload, output,
                                     ["--", workload, "linger"]),
                         capture_output=True, text=True, env=env_for(library), timeout=120)
    print(run.stdout)
    check(failures, "launch: rdmascope exit code", run.returncode, 0)
    if run.returncode != 0:
        print(run.stderr)
        return
    check(failures, "launch: progress on stderr", "elapsed" in run.stderr, True)
    report = json.load(open(os.path.join(output, "profile.json")))
    check(failures, "launch: end_reason", report["end_reason"], "exited")
    check(failures, "launch: exit_status", report["exit_status"], 3)
    check(failures, "launch: comm", report["comm"], "profile_workloa")
    check(failures, "launch: probes active", report["probes_active"], True)
    check_mr(failures, "launch", report, at_exit=True)
    check_messages(failures, "launch", report)
    check_outputs(failures, "launch", output, report)
    check_perf(failures, "launch", report, switches=2)
    check_qps(failures, "launch", report)
    check_numa(failures, "launch", report, None)
    check(failures, "launch: summary names leak_buffers", "leak_buffers" in run.stdout, True)


def interrupt_case(binary, workload, library, preload, root, failures):
    output = os.path.join(root, "interrupt")
    proc = subprocess.Popen(profile_cmd(binary, library, preload, output,
                                        ["--", workload, "wait"]),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env_for(library))
    # The child shares rdmascope's stdin and stdout: READY comes through the same pipe.
    ready = proc.stdout.readline().split()
    check(failures, "interrupt: workload started", ready[:1], ["READY"])
    child = int(ready[1])
    proc.stdin.write("go\n")
    proc.stdin.flush()
    check(failures, "interrupt: workload did its work", proc.stdout.readline().strip(), "DONE")
    # One progress line: the window has sampled the work at least once.
    while "elapsed" not in proc.stderr.readline():
        pass
    os.kill(proc.pid, signal.SIGINT)
    # The program still holds rdmascope's stdout: wait for rdmascope itself, not for EOF.
    proc.wait(timeout=60)
    check(failures, "interrupt: rdmascope exit code", proc.returncode, 0)
    alive = os.path.exists(f"/proc/{child}")
    check(failures, "interrupt: the program keeps running", alive, True)
    if alive:
        os.kill(child, signal.SIGKILL)
    print(proc.stdout.read())
    report = json.load(open(os.path.join(output, "profile.json")))
    check(failures, "interrupt: end_reason", report["end_reason"], "interrupted")
    check(failures, "interrupt: exit_status", report["exit_status"], None)
    check(failures, "interrupt: note says it keeps running",
          any("keeps running" in note for note in report["notes"]), True)
    check_mr(failures, "interrupt", report, at_exit=False)


def pid_case(binary, workload, library, preload, root, failures):
    output = os.path.join(root, "pid")
    cpu = pinned_cpu()
    app = subprocess.Popen([workload, "wait"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           text=True, env=env_for(library),
                           preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))
    ready = app.stdout.readline().split()
    check(failures, "pid: workload started", ready[:1], ["READY"])
    proc = subprocess.Popen(profile_cmd(binary, library, preload, output,
                                        ["--pid", ready[1]]),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env_for(library))
    while "window open" not in proc.stderr.readline():
        if proc.poll() is not None:
            break
    app.stdin.write("go\n")
    app.stdin.flush()
    check(failures, "pid: workload did its work", app.stdout.readline().strip(), "DONE")
    time.sleep(0.5)  # at least one sample of the live process (its call sites symbolised)
    app.stdin.write("exit\n")
    app.stdin.flush()
    app.wait(timeout=30)  # reaped: its pid is gone
    out, err = proc.communicate(timeout=60)
    print(out)
    check(failures, "pid: rdmascope exit code", proc.returncode, 0)
    report = json.load(open(os.path.join(output, "profile.json")))
    check(failures, "pid: end_reason", report["end_reason"], "exited")
    check(failures, "pid: pid", report["pid"], int(ready[1]))
    check(failures, "pid: command empty", report["command"], [])
    check_mr(failures, "pid", report, at_exit=True)
    check_perf(failures, "pid", report, switches=1)
    check_qps(failures, "pid", report)
    check_numa(failures, "pid", report, cpu)


def main(binary, workload, library, preload):
    if os.geteuid() != 0:
        print("SKIP: BPF needs root")
        return SKIP
    failures = []
    with tempfile.TemporaryDirectory(prefix="rdmascope-profile-test-") as root:
        for case in (launch_case, interrupt_case, pid_case):
            case(binary, workload, library, preload, root, failures)
    print("FAILED: " + ", ".join(failures) if failures else "all profile cases passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
