#!/usr/bin/env python3
"""Host tier (issue 39): the mr and verbs collectors under `rdmascope capture` and `--replay`.

As root, `capture` attaches the MR and verbs probes to the libibverbs stand-in (uprobes: this
host refuses fentry) for its window and records each sample's probe reading (bpf/mr.json,
bpf/verbs.json). Three samples: before a workload starts, while it holds registrations (some
leaked), after it exited (its leaks released at exit). `serve --replay` of the capture then
gives, scrape by scrape, the series the capture's collectors made live (samples/N/metrics.prom),
every rdma_mr_* series included; and under strace the replay makes no bpf() call, no
perf_event_open (uprobes are attached through it) and opens nothing of the host.

Unprivileged, the capture records why the probes did not attach (index.json "not_recorded") and
the replay reports them not attached with that reason: rdmascope_probe_attached 0, no rdma_mr_*
series (never a made-up 0).

Series the comparison ignores: capture_replay.IGNORED (the exporter's own process and timing)
and rdmascope_http_* (the replaying server's own; the capture has no server).
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
import harness  # noqa: E402
import capture_replay  # noqa: E402

THREADS, REGIONS, SIZE, LEAKED, FAILURES, OLD_ABI = 2, 20, 8192, 3, 1, 1
IGNORED = re.compile(capture_replay.IGNORED.pattern[:-1] + "|rdmascope_http_)")


def compared(body):
    return {key: value for key, value in harness.parse(body).items()
            if not IGNORED.match(key[0])}


def wait_for(path, pattern, proc, timeout=60):
    capture_replay.wait_for(path, pattern, proc, timeout)


def metrics_prom(capture, n):
    with open(os.path.join(capture, "samples", f"{n:04d}", "metrics.prom")) as f:
        return compared(f.read())


def captured(binary, library, workload, work):
    """The capture, and the workload's pid: sample 1 before it starts, 2 while it holds its
    regions, 3 after it exited."""
    capture = os.path.join(work, "capture")
    log_path = os.path.join(work, "capture.log")
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [binary, "capture", "--output", capture, "--samples", "3", "--interval", "3s",
             "--exporter", "none", "--no-collector.perf", f"--probe.library={library}"],
            stdout=log, stderr=subprocess.STDOUT)
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(library))
    try:
        wait_for(log_path, r'msg="sample recorded" sample=1', proc)
        work_proc = subprocess.Popen(
            [workload, *map(str, (THREADS, REGIONS, SIZE, LEAKED, FAILURES, OLD_ABI))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)
        ready = work_proc.stdout.readline().split()
        wait_for(log_path, r'msg="sample recorded" sample=2', proc)
        work_proc.communicate("exit\n", timeout=30)
    finally:
        code = proc.wait(timeout=60)
    output = open(log_path).read()
    print(output)
    if code != 0:
        raise RuntimeError(f"capture failed ({code})")
    if ready[:1] != ["READY"]:
        raise RuntimeError(f"workload did not start: {ready}")
    return capture, ready[1]


def check_privileged(binary, library, workload, work):
    failures = []
    capture, pid = captured(binary, library, workload, work)
    with open(os.path.join(capture, "index.json")) as f:
        index = json.load(f)
    for name in ("mr", "verbs"):
        if name not in index["collectors_replayed"]:
            failures.append(f"index: {name} not in collectors_replayed")
    for n in (1, 2, 3):
        for name in ("mr", "verbs"):
            if not os.path.exists(os.path.join(capture, "samples", f"{n:04d}", "bpf",
                                               name + ".json")):
                failures.append(f"sample {n}: no bpf/{name}.json")
    live = [metrics_prom(capture, n) for n in (1, 2, 3)]
    value = harness.value
    # What the live collection saw, so that the equality below proves something.
    expected = {
        "rdma_mr_registrations_total": THREADS * (REGIONS + OLD_ABI),
        "rdma_mr_outstanding_regions": THREADS * LEAKED,
        "rdma_mr_registration_failures_total": THREADS * FAILURES,
    }
    for name, want in expected.items():
        got = value(live[1], name, pid=pid)
        print(("ok" if got == want else "FAIL") + f": sample 2 {name}{{pid={pid}}} = {got}")
        if got != want:
            failures.append(f"sample 2 {name}: {got} != {want}")
    released = value(live[2], "rdma_mr_exit_released_regions_total", comm="mr_workload")
    if released != THREADS * LEAKED:
        failures.append(f"sample 3: released at exit {released} != {THREADS * LEAKED}")
    for n, sample in enumerate(live, 1):
        for probe in ("mr", "verbs"):
            if value(sample, "rdmascope_probe_attached", probe=probe) != 1.0:
                failures.append(f"sample {n}: the {probe} probes were not attached")

    with harness.Exporter(binary, ["--replay", capture]) as replay:
        replayed = [compared(replay.metrics()) for _ in range(3)]
        status, _ = replay.get("/debug/mr/stacks")
    mr_series = 0
    for n, (want, got) in enumerate(zip(live, replayed), 1):
        mr_series += sum(1 for key in got if key[0].startswith("rdma_mr_"))
        if want != got:
            failures.append(f"sample {n}: replay differs from the capture's metrics.prom:\n" +
                            "\n".join(capture_replay.differences(want, got)))
    print(f"compared {sum(map(len, replayed))} series over 3 samples, {mr_series} rdma_mr_*")
    if mr_series < 20:
        failures.append(f"only {mr_series} rdma_mr_* series replayed: the check proves little")
    # No exporter was asked (--exporter none) and the mr collector adds no route under replay.
    if status != 404:
        failures.append(f"/debug/mr/stacks under replay: {status}, want 404")
    failures += strace_no_bpf(binary, capture, work)
    return failures


def strace_no_bpf(binary, capture, work):
    """serve --replay loads no BPF object: no bpf(), no perf_event_open, nothing of the host
    opened (capture_replay.strace_replay's checks)."""
    failures = capture_replay.strace_replay(binary, capture, work)
    with open(os.path.join(work, "strace.txt"), errors="replace") as f:
        traced = f.read()
    if "openat" not in traced:
        failures.append("strace traced nothing: the bpf() check proves little")
    return failures


def check_unprivileged(binary, library, work):
    """Without the privilege to load BPF: not_recorded says why, the replay says not attached."""
    if subprocess.run(["id", "nobody"], capture_output=True).returncode != 0:
        print("skip unprivileged half: no user nobody")
        return []
    failures = []
    with tempfile.TemporaryDirectory(dir="/tmp") as out, harness.reachable_copy(binary) as copy:
        os.chmod(out, 0o777)
        capture = os.path.join(out, "capture")
        result = subprocess.run(
            ["runuser", "-u", "nobody", "--", copy, "capture", "--output", capture,
             "--samples", "1", "--exporter", "none", "--no-collector.perf",
             f"--probe.library={library}"], capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            return [f"unprivileged capture failed: {result.stderr[-800:]}"]
        with open(os.path.join(capture, "index.json")) as f:
            missed = {entry["source"]: entry["reason"] for entry in json.load(f)["not_recorded"]}
        for source in ("mr: eBPF probes", "verbs: eBPF probes"):
            print(f"not_recorded {source}: {missed.get(source)}")
            if not missed.get(source, "").startswith("not attached: "):
                failures.append(f"unprivileged: not_recorded lacks {source}: {missed}")
        with open(os.path.join(capture, "samples", "0001", "bpf", "mr.json")) as f:
            reason = json.load(f).get("error", "")
        with harness.Exporter(binary, ["--replay", capture]) as replay:
            samples = harness.parse(replay.metrics())
        check = subprocess.run([binary, "check", "--replay", capture], capture_output=True,
                               text=True, timeout=60).stdout
    checks = [
        ("probe_attached mr 0", harness.value(samples, "rdmascope_probe_attached", probe="mr"), 0.0),
        ("probe_attached verbs 0",
         harness.value(samples, "rdmascope_probe_attached", probe="verbs"), 0.0),
        ("mr no data", harness.value(samples, "rdmascope_collector_no_data", collector="mr"), 1.0),
        ("mr not failed", harness.value(samples, "rdmascope_collector_success", collector="mr"),
         1.0),
        ("no rdma_mr_* series", any(key[0].startswith("rdma_mr_") for key in samples), False),
        ("check --replay names the recorded reason", bool(reason) and reason in check, True),
    ]
    for what, got, want in checks:
        print(("ok" if got == want else "FAIL") + f": unprivileged replay: {what}: {got}")
        if got != want:
            failures.append(f"unprivileged replay: {what}: {got}")
    return failures


def main(binary, workload, library):
    if os.geteuid() != 0:
        print("SKIP: BPF needs root")
        return harness.SKIP
    with tempfile.TemporaryDirectory() as work:
        failures = check_privileged(binary, library, workload, work)
        failures += check_unprivileged(binary, library, work)
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
