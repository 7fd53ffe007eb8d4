#!/usr/bin/env python3
"""Host tier (issue 39): the occupancy collector under capture and replay, on the real preload
library over the libibverbs stand-in's data path (occupancy_workload.c, as host_occupancy_tracking).
Two programs run with the library, their stats files in a shared directory (mode 1777, as
/run/rdmascope: every claim is checked against /proc); one exits between the two samples.

`rdmascope capture` beside a running exporter takes nothing from the directory: the exited
program's file is left, and the exporter serves its final figures after the capture; the
capture's second sample holds them too. `serve --replay`'s n-th scrape equals sample n's
metrics.prom (rdma_cq_*, rdma_srq_*, rdma_process_*, the refusal counters), and under strace
the replay opens nothing of the host (not the stats directory, no /proc/PID, /run, /sys, /dev),
unlinks nothing and takes no lock, and the directory is as it was.

Series the comparison leaves out, each for its reason (as host_capture_replay):
  process_*, rdmascope_collector_duration_seconds, exposer_*, rdmascope_scrape_*,
  rdmascope_http_*, rdmascope_build_info: the exporter's own process, timings and server."""

import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
import harness  # noqa: E402

IGNORED = re.compile(r"^(process_|rdmascope_collector_duration_seconds|exposer_|rdmascope_scrape_|"
                     r"rdmascope_http_|rdmascope_build_info)")
# glibc's malloc reads /proc/sys/vm/overcommit_memory once when a thread's arena shrinks
# (malloc/arena.c check_may_shrink_heap): the allocator's, not a collector's.
HOST_PATHS = re.compile(r'"(/sys/|/dev/|/run/|/proc/(?!self/|thread-self/|stat"|'
                        r'sys/vm/overcommit_memory"))')


def compared(body):
    return {key: value for key, value in harness.parse(body).items()
            if not IGNORED.match(key[0])}


def differences(expected, actual, limit=12):
    out = [f"  {key}: live {expected.get(key)}, replay {actual.get(key)}"
           for key in sorted(set(expected) | set(actual), key=str)
           if expected.get(key) != actual.get(key)]
    return out[:limit] + ([f"  ... {len(out) - limit} more"] if len(out) > limit else [])


def listing(directory):
    return {name: os.lstat(os.path.join(directory, name)).st_mtime_ns
            for name in os.listdir(directory)}


def main(binary, workload, library, preload):
    failures = []
    with tempfile.TemporaryDirectory() as work:
        stats = os.path.join(work, "stats")
        os.mkdir(stats)
        os.chmod(stats, 0o1777)
        env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(library), LD_PRELOAD=preload,
                   RDMASCOPE_PRELOAD_DIR=stats)
        programs = [subprocess.Popen([workload], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     env=env, text=True) for _ in range(2)]
        pids = [p.stdout.readline().split()[1] for p in programs]
        flags = ["--collector.disable-defaults", "--collector.occupancy",
                 f"--collector.occupancy.dir={stats}"]
        capture = os.path.join(work, "capture")
        log_path = os.path.join(work, "capture.log")
        # An exporter serving beside the capture (it holds .readers: an exiting program leaves
        # its file for it), not scraped until the capture ends.
        with harness.Exporter(binary, flags) as serving:
            with open(log_path, "w") as log:
                proc = subprocess.Popen([binary, "capture", "--output", capture, "--samples",
                                         "2", "--interval", "3s", "--exporter", "none", *flags],
                                        stdout=log, stderr=subprocess.STDOUT)
            deadline = time.monotonic() + 60
            while 'msg="sample recorded" sample=1' not in open(log_path).read():
                if proc.poll() is not None or time.monotonic() > deadline:
                    print(open(log_path).read())
                    return 1
                time.sleep(0.05)
            programs[1].stdin.write("exit\n")  # exits between the samples: its file left, stale
            programs[1].stdin.flush()
            programs[1].wait()
            if proc.wait(timeout=60) != 0:
                print(open(log_path).read())
                return 1
            print(open(log_path).read())
            names = os.listdir(stats)
            if not any(f"-{pids[1]}-" in n for n in names):
                failures.append(f"capture deleted the exited program's file: {names}")
            # The capture took nothing: the running exporter still serves the final figures.
            if f'pid="{pids[1]}"' not in serving.metrics():
                failures.append("the exporter beside the capture lost the exited program's "
                                "final figures")
        live = [open(os.path.join(capture, f"samples/000{n}/metrics.prom")).read() for n in (1, 2)]
        for n, text in enumerate(live, 1):
            if f'rdma_cq_outstanding_entries{{device="fakedev0",pid="{pids[0]}"' not in text:
                failures.append(f"sample {n}: no CQ of the running program:\n{text[:2000]}")
        if f'pid="{pids[1]}"' not in live[1]:
            failures.append("sample 2: the exited program's final figures are not served")

        before = listing(stats)
        trace = os.path.join(work, "strace.txt")
        launcher = ["strace", "-f", "-qq", "-e",
                    "trace=open,openat,openat2,unlink,unlinkat,rename,renameat,renameat2,fcntl,"
                    "flock,mkdir,mkdirat", "-o", trace]
        with harness.Exporter(binary, ["--replay", capture, *flags], launcher=launcher) as replay:
            scrapes = [compared(replay.metrics()) for _ in range(3)]
        for n in (0, 1):
            expected = compared(live[n])
            if scrapes[n] != expected:
                failures.append(f"sample {n + 1}: replay differs from the capture's metrics.prom:\n"
                                + "\n".join(differences(expected, scrapes[n])))
        if any(key for key in scrapes[2] if dict(key[1]).get("pid") == pids[1]):
            failures.append("the exited program's final figures served twice")
        series = sum(1 for key in scrapes[1] if key[0].startswith(("rdma_cq_", "rdma_srq_",
                                                                   "rdma_process_")))
        print(f"compared {len(scrapes[1])} series of sample 2 ({series} rdma_cq/srq/process)")
        if series < 10:
            failures.append(f"only {series} occupancy series replayed: the comparison proves little")
        if listing(stats) != before:
            failures.append(f"the replay changed the stats directory: {before} -> {listing(stats)}")
        opens = 0
        with open(trace, errors="replace") as f:
            for line in f:
                if re.search(r"\bopen(at2?)?\(", line):
                    opens += 1
                    if HOST_PATHS.search(line) or stats in line:
                        failures.append(f"strace: the host opened under replay: {line.strip()}")
                if re.search(r"\b(unlink|unlinkat|rename|renameat2?|mkdir|mkdirat)\(", line):
                    failures.append(f"strace: the replay changed a file: {line.strip()}")
                if re.search(r"F_OFD_SETLK|F_SETLK|F_OFD_GETLK|\bflock\(", line):
                    failures.append(f"strace: a lock under replay: {line.strip()}")
        print(f"strace: {opens} opens under replay")
        programs[0].stdin.write("exit\n")
        programs[0].stdin.flush()
        programs[0].wait()
    for failure in failures[:20]:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
