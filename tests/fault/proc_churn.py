#!/usr/bin/env python3
"""Processes exiting mid-scan (issue 18 item 3): 300 short-lived programs, each registering
a memory region through the libibverbs stand-in and exiting at once, 30 at a time, while
another thread scrapes without pause. The collectors that scan /proc (the mr collector's
probes and its VmPin fallback, resources, the exporter's own process_* metrics) read the
files of processes as they vanish.

- Every scrape answers 200 and the exporter stays up.
- No series anywhere has comm="" (a comm read that fails must not become an empty label).
- No stale series: once they have all exited, no rdma_mr_* series names any of their pids
  (the exits are handled at the next scrapes; waited for, bounded).
- The mr collector succeeds throughout (a vanished /proc entry is not a failure).

Usage: proc_churn.py RDMASCOPE_BINARY MR_WORKLOAD LIBFAKEVERBS"""

import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
import harness  # noqa: E402

PROCESSES = 300
AT_ONCE = 30


def main(binary, workload, library):
    if os.geteuid() != 0:
        print("SKIP: eBPF probes need root")
        return harness.SKIP
    failures = []
    args = ["--collector.disable-defaults", "--collector.mr", "--collector.resources",
            f"--probe.library={library}"]
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(library))
    with harness.Exporter(binary, args) as exporter:
        samples = harness.parse(exporter.metrics())
        if harness.value(samples, "rdmascope_probe_attached", probe="mr") != 1.0:
            print(exporter.read_log())
            print("SKIP: MR probes did not attach here")
            return harness.SKIP
        stop = threading.Event()
        scrapes = {"count": 0, "empty_comm": 0, "not_ok": 0, "mr_failed": 0}

        def scrape_loop():
            while not stop.is_set():
                status, body = exporter.get("/metrics")
                scrapes["count"] += 1
                if status != 200:
                    scrapes["not_ok"] += 1
                    continue
                if 'comm=""' in body:
                    scrapes["empty_comm"] += 1
                    print("comm=\"\" in:", [line for line in body.splitlines()
                                            if 'comm=""' in line][:5])
                samples = harness.parse(body)
                if harness.value(samples, "rdmascope_collector_success", collector="mr") != 1.0:
                    scrapes["mr_failed"] += 1

        scraper = threading.Thread(target=scrape_loop)
        scraper.start()
        pids = set()
        try:
            started = 0
            while started < PROCESSES:
                batch = []
                for _ in range(min(AT_ONCE, PROCESSES - started)):
                    # 1 thread, 1 region of 4 KiB kept; stdin at EOF: exits once READY.
                    batch.append(subprocess.Popen(
                        [workload, "1", "1", "4096", "1", "0", "0"], stdin=subprocess.DEVNULL,
                        stdout=subprocess.PIPE, env=env, text=True))
                    started += 1
                for proc in batch:
                    ready = proc.stdout.readline().split()
                    if ready[:1] == ["READY"]:
                        pids.add(ready[1])
                    proc.wait(timeout=20)
                    proc.stdout.close()
        finally:
            stop.set()
            scraper.join()
        print(f"{len(pids)} processes came and went during {scrapes['count']} scrapes")
        if len(pids) != PROCESSES:
            failures.append(f"only {len(pids)} of {PROCESSES} workloads got ready")
        for key, what in (("not_ok", "scrapes not answered 200"),
                          ("empty_comm", 'scrapes with comm=""'),
                          ("mr_failed", "scrapes where the mr collector failed")):
            print(("ok" if scrapes[key] == 0 else "FAIL") + f": {what}: {scrapes[key]}")
            if scrapes[key]:
                failures.append(what)
        # All exited: their series leave within a few scrapes (exit events, or the /proc
        # liveness check for one whose event was lost).
        deadline = time.monotonic() + 30
        while True:
            samples = harness.parse(exporter.metrics())
            stale = {dict(labels).get("pid") for (name, labels) in samples
                     if name.startswith("rdma_") and dict(labels).get("pid") in pids}
            if not stale or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        print(("ok" if not stale else "FAIL") + f": stale series of exited pids: {len(stale)}")
        if stale:
            failures.append(f"stale series of {len(stale)} exited processes")
        if exporter.proc.poll() is not None:
            failures.append("exporter died")
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
