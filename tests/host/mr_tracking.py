#!/usr/bin/env python3
"""Host tier: the MR probes count exactly what a program registers, leaks and deregisters.

A workload linked against a libibverbs stand-in (same versioned symbols, real struct ibv_mr)
registers from several threads through ibv_reg_mr@@IBVERBS_1.1 (which tail-calls
ibv_reg_mr_iova2: must count once), fails some registrations, and registers/deregisters
through the IBVERBS_1.0 ABI (which nests the 1.1 calls: must count once). While it waits, the
exported per-process values must match exactly; after it exits its series must be gone and
its leaks counted as released at exit."""

import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
import harness  # noqa: E402

# 16 threads start registering at once: the per-process entry is created under contention.
THREADS, REGIONS, SIZE, LEAKED, FAILURES, OLD_ABI = 16, 50, 8192, 7, 3, 5


value = harness.value


def main(binary, workload, library, static_binary=None):
    if os.geteuid() != 0:
        print("SKIP: BPF needs root")
        return harness.SKIP
    failures = []
    # Degraded mode: without privileges the probes cannot load; the exporter says so, reports
    # rdmascope_probe_attached 0 and keeps serving everything else.
    if subprocess.run(["id", "nobody"], capture_output=True).returncode == 0:
        with tempfile.TemporaryDirectory() as empty, harness.reachable_copy(binary) as copy:
            os.chmod(empty, 0o755)
            with harness.Exporter("runuser", ["--collector.ethtool", f"--path.sysfs={empty}"],
                                  prefix=["-u", "nobody", "--", copy]) as exporter:
                samples = harness.parse(exporter.metrics())
                log = exporter.read_log()
        checks = [
            ("probe_attached 0", value(samples, "rdmascope_probe_attached", probe="mr"), 0.0),
            ("mr collector no data", value(samples, "rdmascope_collector_no_data",
                                           collector="mr"), 1.0),
            ("mr collector not failed", value(samples, "rdmascope_collector_success",
                                              collector="mr"), 1.0),
            ("clear log line", "mr probes not attached" in log, True),
        ]
        for what, got, want in checks:
            print(("ok" if got == want else "FAIL") + f": unprivileged: {what}: {got}")
            if got != want:
                failures.append(f"unprivileged: {what}: {got}")
    # A second run of the workload checks that a new process starts from zero.
    with harness.Exporter(binary, ["--collector.disable-defaults", "--collector.mr",
                                   f"--probe.library={library}", "--collector.mr.leak-age=2s"]) as exporter:
        samples = harness.parse(exporter.metrics())
        if value(samples, "rdmascope_probe_attached", probe="mr") != 1.0:
            print(exporter.read_log())
            print("FAIL: probes not attached")
            return 1
        env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(library))
        for run in (1, 2):
            proc = subprocess.Popen([workload, *map(str, (THREADS, REGIONS, SIZE, LEAKED,
                                                         FAILURES, OLD_ABI, 1))],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                                    text=True)
            ready = proc.stdout.readline().split()
            if ready[:1] != ["READY"]:
                failures.append(f"workload did not start: {ready}")
                break
            pid = ready[1]
            samples = harness.parse(exporter.metrics())
            # EXTRAS: per thread one ibv_rereg_mr growing a leaked region from SIZE to 2 x SIZE,
            # and one ibv_import_mr (2 MiB, aligned) + ibv_unimport_mr.
            expected = {
                "rdma_mr_registrations_total": THREADS * (REGIONS + OLD_ABI + 1),
                "rdma_mr_deregistrations_total": THREADS * (REGIONS - LEAKED + OLD_ABI + 1),
                "rdma_mr_registration_failures_total": THREADS * FAILURES,
                "rdma_mr_outstanding_regions": THREADS * LEAKED,
                "rdma_mr_outstanding_bytes": THREADS * (LEAKED + 1) * SIZE,
            }
            registered = THREADS * (REGIONS + OLD_ABI)
            imported = THREADS
            expected.update({
                # malloc'd buffers: never 2 MiB-aligned; SIZE is a multiple of 4 KiB.
                "rdma_mr_not_hugepage_aligned_bytes_total": registered * SIZE,
                "rdma_mr_length_not_page_multiple_total": 0,
            })
            flags = {dict(k)["flag"] for k in
                     harness.series(samples, "rdma_mr_access_flag_seen", pid=pid)}
            if flags != {"LOCAL_WRITE"}:
                failures.append(f"run {run}: access flags seen {flags}")
            # Histograms are by comm and keep the counts of exited runs.
            histogram_checks = {
                ("rdma_mr_registration_size_bytes_count", None): run * (registered + imported),
                ("rdma_mr_registration_size_bytes_bucket", str(SIZE)): run * registered,
                ("rdma_mr_registration_size_bytes_bucket", str(SIZE // 2)): 0,
                ("rdma_mr_registration_size_bytes_bucket", str(2 << 20)): run * (registered +
                                                                               imported),
                ("rdma_mr_registration_size_bytes_sum", None):
                    run * (registered * SIZE + imported * (2 << 20)),
                ("rdma_mr_registration_duration_seconds_count", None): run * (registered +
                                                                              imported),
                ("rdma_mr_registration_duration_seconds_bucket", "+Inf"): run * (registered +
                                                                                imported),
            }
            for (name, le), want in histogram_checks.items():
                labels = {"comm": "mr_workload", **({"le": le} if le else {})}
                got = value(samples, name, **labels)
                print(("ok" if got == want else "FAIL") + f": run {run} {name}{labels} = {got}")
                if got != want:
                    failures.append(f"run {run} {name}{labels}: {got} != {want}")
            for name, want in expected.items():
                got = value(samples, name, pid=pid, comm="mr_workload")
                status = "ok" if got == want else "FAIL"
                print(f"{status}: run {run} {name}{{pid={pid}}} = {got} (want {want})")
                if got != want:
                    failures.append(f"run {run} {name}: {got} != {want}")
            # Leak-suspect call sites: the stack must name the function that registered (the
            # workload is built with frame pointers).
            status, body = exporter.get(f"/debug/mr/stacks?pid={pid}&top=3")
            stacks = json.loads(body)["processes"] if status == 200 else []
            top = stacks[0]["stacks"][0] if stacks and stacks[0]["stacks"] else {}
            # Frames are "function+0xoffset" (symbols only: no address leaves the host).
            functions = [frame["function"].split("+")[0] for frame in top.get("frames", [])]
            site = (top.get("outstanding_regions"), functions[:1])
            print(f"run {run} /debug/mr/stacks: top call site {site}")
            if site != (THREADS * LEAKED, ["work"]):
                failures.append(f"run {run}: stacks {status} {body[:500]}")
            # Leak suspects: none while the regions are young, all leaks once older than 2 s.
            young = value(samples, "rdma_mr_leak_suspect_regions", pid=pid)
            time.sleep(2.2)
            aged = harness.parse(exporter.metrics())
            old = (value(aged, "rdma_mr_leak_suspect_regions", pid=pid),
                   value(aged, "rdma_mr_leak_suspect_bytes", pid=pid))
            want_old = (float(THREADS * LEAKED), float(THREADS * (LEAKED + 1) * SIZE))
            print(f"run {run} leak suspects: {young} when young, {old} after 2.2 s "
                  f"(want 0, {want_old})")
            if young != 0.0 or old != want_old:
                failures.append(f"run {run}: leak suspects {young}, {old}")
            proc.stdin.write("exit\n")
            proc.stdin.flush()
            proc.wait(timeout=10)
            time.sleep(0.2)
            samples = harness.parse(exporter.metrics())
            leftover = harness.series(samples, "rdma_mr_outstanding_regions", pid=pid)
            released = value(samples, "rdma_mr_exit_released_regions_total", comm="mr_workload")
            released_bytes = value(samples, "rdma_mr_exit_released_bytes_total",
                                   comm="mr_workload")
            want_released = run * THREADS * LEAKED
            print(f"run {run} after exit: series for pid {pid}: {len(leftover)}; released at exit "
                  f"{released} regions, {released_bytes} bytes (want {want_released})")
            if leftover:
                failures.append(f"run {run}: series of exited pid {pid} remain")
            if released != want_released or released_bytes != run * THREADS * (LEAKED + 1) * SIZE:
                failures.append(f"run {run}: released at exit {released}/{released_bytes}")
        lost = harness.series(samples, "rdma_mr_lost_total")
        if any(v != 0 for v in lost.values()):
            failures.append(f"lost events: {lost}")
    # --probe.binary: a statically linked program carrying its own ibv_reg_mr_iova2. It registers
    # one region and exits without deregistering it.
    if static_binary:
        with harness.Exporter(binary, ["--collector.disable-defaults", "--collector.mr",
                                       f"--probe.library={library}",
                                       f"--probe.binary={static_binary}"]) as exporter:
            subprocess.run([static_binary], capture_output=True, check=True)
            time.sleep(0.2)
            samples = harness.parse(exporter.metrics())
        comm = os.path.basename(static_binary)[:15]
        got = (value(samples, "rdma_mr_registration_size_bytes_count", comm=comm),
               value(samples, "rdma_mr_exit_released_regions_total", comm=comm))
        print(f"static binary: registrations {got[0]}, released at exit {got[1]} (want 1, 1)")
        if got != (1.0, 1.0):
            failures.append(f"--probe.binary static program: {got}")

    # --collector.mr.aggregate-by-comm: no pid label, and counters keep exited processes' counts.
    with harness.Exporter(binary, ["--collector.disable-defaults", "--collector.mr",
                                   f"--probe.library={library}", "--collector.mr.aggregate-by-comm"]) as exporter:
        env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(library))
        seen = []
        for run in (1, 2):
            subprocess.run([workload, "2", "10", "4096", "3", "0", "0"], input="exit\n",
                           capture_output=True, text=True, env=env, check=True)
            time.sleep(0.2)
            samples = harness.parse(exporter.metrics())
            seen.append(value(samples, "rdma_mr_registrations_total", comm="mr_workload"))
            if any("pid" in dict(k) for k in harness.series(samples,
                                                              "rdma_mr_registrations_total")):
                failures.append("aggregate-by-comm: a pid label is still exported")
        print(f"aggregate-by-comm: registrations_total{{comm=mr_workload}} after each exited run: "
              f"{seen} (want [20.0, 40.0])")
        if seen != [20.0, 40.0]:
            failures.append(f"aggregate-by-comm counters {seen}")
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
