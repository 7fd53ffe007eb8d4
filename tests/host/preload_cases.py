#!/usr/bin/env python3
"""Host tier: the preload library never harms its application and counts what it claims
(issue #11). On the libibverbs stand-in:
- occupancy_cases.c's cases, each checking the process's own stats file: several threads
  posting to QPs sharing a CQ and polling it (exact counts, outstanding 0 once drained); 100
  device open/close cycles at a reused address with two providers; CQ and QP created at the
  address of one being destroyed; 70,000 live QPs (losses counted, tables reusable); QPs of
  two contexts whose keys would collide as context ^ qp_num << 1;
  flush-error completions with garbage opcodes; fork after open; exec;
- a plugin linking libibverbs loaded with dlopen(RTLD_LOCAL) by a program that does not link
  it: no crash, counted; and a call with no libibverbs loaded at all: fails with ENOSYS;
- a full filesystem under the stats directory (tmpfs in a private mount namespace): the
  application runs to completion, one warning line, no file left;
- two applications that are both pid 1 of their own pid namespace, sharing the directory:
  two files, both served under their pids as the exporter sees them, neither deleted;
- exec into an image that never opens a device: the old image's queues are not served and
  its file is deleted.
Needs root (mount and pid namespaces)."""

import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "common"))
import harness  # noqa: E402
import machine  # noqa: E402

CHECK = harness.Checker()
failures, expect = CHECK.failures, CHECK.expect


def occ_files(directory):
    return sorted(n for n in os.listdir(directory) if n.endswith(".occ"))


def children_of(pid):
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(p) for p in f.read().split()]


def main(binary, cases, library, preload, workload, plugin_host, plugin):
    if os.geteuid() != 0:
        print("SKIP: needs root (mount and pid namespaces)")
        return 77
    machine.require("mount-namespace")  # a full tmpfs mounted privately; --mount-proc
    libdir = os.path.dirname(library)
    with tempfile.TemporaryDirectory(prefix="rdmascope-preload-") as stats_dir:
        env = dict(os.environ, LD_LIBRARY_PATH=libdir, LD_PRELOAD=preload,
                   RDMASCOPE_PRELOAD_DIR=stats_dir)

        for case in ["threads", "contexts", "reuse", "many", "collide", "errors", "fork", "exec"]:
            run = subprocess.run([cases, case], env=env, capture_output=True, text=True,
                                 timeout=240)
            print(run.stdout + run.stderr, end="")
            expect(f"case {case} exit status", run.returncode, 0)

        # No libibverbs anywhere: the wrapper fails the call, never calls NULL.
        run = subprocess.run([plugin_host, "--no-verbs"], env=env, capture_output=True,
                             text=True, timeout=60)
        expect("no libibverbs: exit status", run.returncode, 0)
        expect("no libibverbs: NULL context, ENOSYS", run.stdout.split()[1:],
               ["(nil)", "38"])
        expect("no libibverbs: one log line", len(run.stderr.splitlines()), 1)

        # A full filesystem: posix_fallocate fails, the application is not tracked.
        full = os.path.join(stats_dir, "full")
        os.mkdir(full)
        script = (f"mount -t tmpfs -o size=256k rdmascope-full {full} && "
                  f"(dd if=/dev/zero of={full}/fill bs=4k 2>/dev/null; true) && "
                  f"RDMASCOPE_PRELOAD_DIR={full} {workload}; rc=$?; "
                  f"ls {full} | grep -c occ; exit $rc")
        run = subprocess.run(["unshare", "-m", "sh", "-c", script], env=env, input="exit\n",
                             capture_output=True, text=True, timeout=60)
        expect("full filesystem: application completes", run.returncode, 0)
        expect("full filesystem: no stats file left", run.stdout.splitlines()[-1:], ["0"])
        warnings = [line for line in run.stderr.splitlines() if "librdmascope_preload" in line]
        expect("full filesystem: one warning line", len(warnings), 1)
        print("\n".join(warnings))

        with harness.Exporter(binary, ["--collector.disable-defaults", "--collector.occupancy",
                                       f"--collector.occupancy.dir={stats_dir}"]) as exporter:
            for name in os.listdir(stats_dir):  # the cases' leftovers: exited or _exit'ed
                if name.endswith(".occ"):
                    os.unlink(os.path.join(stats_dir, name))

            # A plugin loaded RTLD_LOCAL.
            host = subprocess.Popen([plugin_host, plugin], env=env, stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, text=True)
            result = host.stdout.readline().split()
            pid = host.stdout.readline().split()[1] if result else None
            expect("plugin: completions polled through the preload", result, ["RESULT", "3"])
            samples = harness.parse(exporter.metrics())
            expect("plugin: counted", harness.value(
                samples, "rdma_cq_polled_completions_total", pid=pid), 3.0)
            host.communicate("exit\n", timeout=30)
            expect("plugin: exit status", host.returncode, 0)
            # Its file is left at exit: the next scrape serves the last figures and deletes it.
            samples = harness.parse(exporter.metrics())
            expect("plugin: final figures served", harness.value(
                samples, "rdma_cq_polled_completions_total", pid=pid), 3.0)
            expect("plugin: file deleted after", occ_files(stats_dir), [])

            # Two pid namespaces, both applications pid 1, one directory.
            apps = [subprocess.Popen(["unshare", "-p", "-f", "--mount-proc", workload],
                                     env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True) for _ in range(2)]
            expect("namespaced apps are pid 1",
                   [a.stdout.readline().split()[1] for a in apps], ["1", "1"])
            host_pids = sorted(str(children_of(a.pid)[0]) for a in apps)
            files = occ_files(stats_dir)
            expect("namespaced apps: two files", len(files), 2)
            for _ in range(2):  # the second scrape would not find deleted files
                samples = harness.parse(exporter.metrics())
            served = sorted({dict(k)["pid"] for k in harness.series(
                samples, "rdma_cq_outstanding_entries")})
            expect("namespaced apps: served under the exporter's pids", served, host_pids)
            expect("namespaced apps: outstanding of each", sorted(harness.series(
                samples, "rdma_cq_outstanding_entries").values()), [3.0, 3.0, 16.0, 16.0])
            expect("namespaced apps: files kept", occ_files(stats_dir), files)
            for a in apps:
                a.communicate("exit\n", timeout=30)
                expect("namespaced app exit status", a.returncode, 0)
            exporter.metrics()  # their final figures, then their files go
            expect("namespaced apps: files deleted after exit", occ_files(stats_dir), [])

            # exec into an image that never opens a device.
            idle = subprocess.Popen([cases, "exec-idle-from"], env=env, stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, text=True)
            idle_pid = idle.stdout.readline().split()[1]
            expect("exec: the old image's file is left", len(occ_files(stats_dir)), 1)
            samples = harness.parse(exporter.metrics())
            expect("exec: the old image's final figures served once", len(harness.series(
                samples, "rdma_cq_capacity_entries", pid=idle_pid)) > 0, True)
            expect("exec: its file deleted", occ_files(stats_dir), [])
            samples = harness.parse(exporter.metrics())
            expect("exec: the old image's queues not served again", len(harness.series(
                samples, "rdma_cq_capacity_entries", pid=idle_pid)), 0)
            idle.communicate("", timeout=30)
            if failures:
                print(exporter.read_log())
    print("FAILED: " + ", ".join(failures) if failures else "PASS")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:8]))
