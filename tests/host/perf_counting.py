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
    args = ["--collector.disable-defaults", "--collector.perf", "--collector.perf.event=cpu-clock",
            "--collector.perf.event=context-switches", "--collector.perf.event=page-faults", "--collector.perf.event=cycles"]
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

    with harness.Exporter(binary, args[:3] + ["--collector.perf.per-cpu"]) as exporter:
        samples = harness.parse(exporter.metrics())
        cpu_labels = {dict(k)["cpu"] for k in harness.series(samples, "rdma_perf_events_total",
                                                             event="cpu-clock")}
        expect("one series per CPU with --collector.perf.per-cpu", len(cpu_labels) == cpus, cpu_labels)

    # The kernel's own account of the target's CPU time over the same second is the reference:
    # on a loaded machine two spinning threads get less than two CPUs, and so does task-clock.
    tick_ns = 1e9 / os.sysconf("SC_CLK_TCK")

    def cpu_ns(pid):
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * tick_ns  # utime + stime

    for mode in ("spinning", "sleeping"):
        target = subprocess.Popen([busy, "2", "3"] + (["sleep"] if mode == "sleeping" else []),
                                  stdout=subprocess.PIPE, text=True)
        target.stdout.readline()
        before = cpu_ns(target.pid)
        out = subprocess.run([counts, str(target.pid), "1", "task-clock"], capture_output=True,
                             text=True)
        spent = cpu_ns(target.pid) - before
        target.wait()
        value = float(out.stdout.split()[1]) if out.returncode == 0 and out.stdout else -1
        # Counting starts a few ms after `before` (the helper starts); ticks are 10 ms coarse.
        ok = value >= 0 and abs(value - spent) <= 0.15 * spent + 60e6
        if mode == "spinning":
            ok = ok and value > 0.5e9  # the threads did run for most of the second
        expect(f"per-process task-clock of 2 {mode} threads over 1 s equals their CPU time",
               ok, f"task-clock {value:.3g} ns, /proc CPU time {spent:.3g} ns {out.stderr.strip()}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
