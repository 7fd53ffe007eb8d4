#!/usr/bin/env python3
"""Host tier: perf events counted for real on this machine (software events: it has no
hardware PMU). System-wide: cpu-clock advances by about the number of online CPUs per second
of wall time; a process that sleeps 200 times adds at least 200 context switches; a process
that touches 2000 new pages adds at least 2000 page faults; per-CPU series; a hardware event
is reported unsupported without failing the scrape. Per process (the profiler's mode): a
process with two spinning threads accrues about two seconds of task-clock per second, a
sleeping one almost none."""

import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
import harness  # noqa: E402


def main(binary, counts, busy):
    if os.geteuid() != 0:
        print("SKIP: system-wide perf counting needs root (or CAP_PERFMON)")
        return harness.SKIP
    failures = []

    def expect(what, ok, detail):
        print(("ok" if ok else "FAIL") + f": {what}: {detail}")
        if not ok:
            failures.append(what)

    cpus = os.cpu_count()
    args = ["--collector.disable-defaults", "--collector.perf", "--perf.event=cpu-clock",
            "--perf.event=context-switches", "--perf.event=page-faults", "--perf.event=cycles"]
    with harness.Exporter(binary, args) as exporter:
        def total(samples, event):
            return sum(harness.series(samples, "rdma_perf_events_total", event=event).values())

        first, t0 = harness.parse(exporter.metrics()), time.monotonic()
        subprocess.run([sys.executable, "-c",
                        "import time\nfor _ in range(200): time.sleep(0.001)"], check=True)
        subprocess.run([sys.executable, "-c",
                        "import mmap\nm = mmap.mmap(-1, 2000 * 4096)\n"
                        "for i in range(2000): m[i * 4096] = 1"], check=True)
        time.sleep(1)
        second, t1 = harness.parse(exporter.metrics()), time.monotonic()
        rate = (total(second, "cpu-clock") - total(first, "cpu-clock")) / 1e9 / (t1 - t0)
        expect("cpu-clock seconds per second ~ online CPUs", 0.75 * cpus <= rate <= 1.25 * cpus,
               f"{rate:.2f} for {cpus} CPUs")
        switches = total(second, "context-switches") - total(first, "context-switches")
        expect("context switches of 200 sleeps", switches >= 200, switches)
        faults = total(second, "page-faults") - total(first, "page-faults")
        expect("page faults of 2000 new pages", faults >= 2000, faults)
        expect("cycles unsupported here, reported as such",
               harness.value(second, "rdma_perf_event_supported", event="cycles") == 0.0,
               harness.value(second, "rdma_perf_event_supported", event="cycles"))
        expect("scrape healthy", harness.value(second, "rdmascope_collector_success",
                                               collector="perf") == 1.0, "")
        expect("reason logged", "perf event not counted" in exporter.read_log(), "")

    with harness.Exporter(binary, args[:3] + ["--perf.per-cpu"]) as exporter:
        samples = harness.parse(exporter.metrics())
        cpu_labels = {dict(k)["cpu"] for k in harness.series(samples, "rdma_perf_events_total",
                                                             event="cpu-clock")}
        expect("one series per CPU with --perf.per-cpu", len(cpu_labels) == cpus, cpu_labels)

    for mode, threads, low, high in [("spin", 2, 1.4e9, 2.6e9), ("sleep", 2, 0, 0.2e9)]:
        target = subprocess.Popen([busy, str(threads), "3"] + (["sleep"] if mode == "sleep" else []),
                                  stdout=subprocess.PIPE, text=True)
        target.stdout.readline()
        out = subprocess.run([counts, str(target.pid), "1", "task-clock"], capture_output=True,
                             text=True)
        target.wait()
        value = float(out.stdout.split()[1]) if out.returncode == 0 and out.stdout else -1
        expect(f"per-process task-clock over 1 s, {threads} threads {mode}", low <= value <= high,
               f"{value:.3g} ns {out.stderr.strip()}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
