#!/usr/bin/env python3
"""Host tier: the preload library counts exactly the CQ and SRQ occupancy of a program that
drives the libibverbs stand-in's data path (its operations table, as a provider's), and the
exporter serves it from the stats file: outstanding completions and their peak, poll batch
fullness, the SRQ fill level against its limit; queues disappear when destroyed; a file whose
process exited or was killed (nobody holds its lock) is left by the library while an exporter
reads the directory (it holds a read lock on .readers), served once by the exporter's next scrape
(the process's last interval counts) and deleted by it; with no reader, a process that exits
deletes its own file (nothing piles up in /run), and a killed one's stays until a reader runs.
The figures are derived in tests/host/fakeverbs/occupancy_workload.c. No root needed."""

import os
import re
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
import harness  # noqa: E402


def occ_files(directory):
    """The stats files (not the readers' lock file)."""
    return sorted(n for n in os.listdir(directory) if n.endswith(".occ"))


def main(binary, workload, library, preload):
    check = harness.Checker()
    failures, expect = check.failures, check.expect

    with tempfile.TemporaryDirectory() as stats_dir:
        env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(library), LD_PRELOAD=preload,
                   RDMASCOPE_PRELOAD_DIR=stats_dir)
        with harness.Exporter(binary, ["--collector.disable-defaults", "--collector.occupancy",
                                       f"--collector.occupancy.dir={stats_dir}"]) as exporter:
            samples = harness.parse(exporter.metrics())
            expect("no data before any process", harness.value(
                samples, "rdmascope_collector_no_data", collector="occupancy"), 1.0)
            proc = subprocess.Popen([workload], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    env=env, text=True)
            pid = proc.stdout.readline().split()[1]
            # <pid namespace inode>-<pid>-<start ticks>-<image>.occ (preload/stats_file.h)
            expect("stats file created", [re.fullmatch(r"\d+-(\d+)-\d+-0\.occ", n).group(1)
                                          for n in occ_files(stats_dir)], [pid])
            samples = harness.parse(exporter.metrics())

            def by_capacity(name):
                capacity = {dict(k)["cq"]: v for k, v in harness.series(
                    samples, "rdma_cq_capacity_entries", pid=pid).items()}
                return {capacity[dict(k)["cq"]]: v
                        for k, v in harness.series(samples, name, pid=pid).items()}

            expect("outstanding by capacity", by_capacity("rdma_cq_outstanding_entries"),
                   {255.0: 16.0, 127.0: 3.0})
            expect("peak", by_capacity("rdma_cq_outstanding_peak_entries"),
                   {255.0: 30.0, 127.0: 3.0})
            expect("polls", by_capacity("rdma_cq_polls_total"), {255.0: 3.0, 127.0: 1.0})
            expect("empty polls", by_capacity("rdma_cq_empty_polls_total"),
                   {255.0: 1.0, 127.0: 0.0})
            expect("polled", by_capacity("rdma_cq_polled_completions_total"),
                   {255.0: 15.0, 127.0: 20.0})
            # Summed over the polls that returned completions (the empty one asked for 16).
            expect("requested", by_capacity("rdma_cq_poll_requested_entries_total"),
                   {255.0: 32.0, 127.0: 32.0})
            expect("SRQ fill", harness.value(samples, "rdma_srq_posted_wrs", pid=pid), 30.0)
            expect("SRQ depth", harness.value(samples, "rdma_srq_max_wrs", pid=pid), 128.0)
            expect("SRQ limit", harness.value(samples, "rdma_srq_limit_wrs", pid=pid), 16.0)
            expect("labels", {(dict(k)["device"], dict(k)["comm"]) for k in harness.series(
                samples, "rdma_cq_outstanding_entries", pid=pid)},
                {("fakedev0", "occupancy_workl")})

            proc.stdin.write("destroy\n")
            proc.stdin.flush()
            expect("destroyed", proc.stdout.readline().strip(), "DESTROYED")
            samples = harness.parse(exporter.metrics())
            expect("CQ series after destroy",
                   len(harness.series(samples, "rdma_cq_outstanding_entries", pid=pid)), 0)
            proc.stdin.write("exit\n")
            proc.stdin.flush()
            proc.wait()
            expect("file left at exit", [n.split("-")[1] for n in occ_files(stats_dir)], [pid])
            samples = harness.parse(exporter.metrics())
            expect("exited process: final figures served once", len(harness.series(
                samples, "rdma_preload_untracked_queues_total", pid=pid)), 3)
            expect("exited process: file deleted after", occ_files(stats_dir), [])
            samples = harness.parse(exporter.metrics())
            expect("exited process: then gone", len(harness.series(
                samples, "rdma_preload_untracked_queues_total", pid=pid)), 0)

            killed = subprocess.Popen([workload], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      env=env, text=True)
            killed_pid = killed.stdout.readline().split()[1]
            killed.send_signal(signal.SIGKILL)
            killed.wait()
            expect("file left by a killed process",
                   [n.split("-")[1] for n in occ_files(stats_dir)], [killed_pid])
            samples = harness.parse(exporter.metrics())
            expect("killed process: its last figures served once", len(harness.series(
                samples, "rdma_cq_outstanding_entries", pid=killed_pid)) > 0, True)
            expect("its file forgotten", occ_files(stats_dir), [])
            samples = harness.parse(exporter.metrics())
            expect("killed process: then gone", len(harness.series(
                samples, "rdma_cq_outstanding_entries", pid=killed_pid)), 0)
            if failures:
                print(exporter.read_log())

        # No reader any more (the exporter stopped; .readers stays, unlocked): a process that
        # exits deletes its own file, one that is killed leaves it.
        for reader_file in (True, False):
            if not reader_file:
                os.remove(os.path.join(stats_dir, ".readers"))
            alone = subprocess.Popen([workload], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     env=env, text=True)
            alone.stdout.readline()
            alone.stdin.write("exit\n")
            alone.stdin.flush()
            alone.wait()
            expect(f"no reader ({'unlocked .readers' if reader_file else 'no .readers'}): "
                   "an exiting process deletes its file", occ_files(stats_dir), [])
        killed = subprocess.Popen([workload], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  env=env, text=True)
        killed.stdout.readline()
        killed.send_signal(signal.SIGKILL)
        killed.wait()
        expect("no reader: a killed process's file stays", len(occ_files(stats_dir)), 1)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
