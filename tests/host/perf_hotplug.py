#!/usr/bin/env python3
"""Host tier: perf counting follows CPU hotplug. CPU 1 is taken offline for about two seconds
and brought back (/sys/devices/system/cpu/cpu1/online). The kernel detaches a CPU's perf
events when it goes offline (kernel/events/core.c, perf_event_exit_cpu ->
__perf_event_exit_context) and does not re-enable them when it returns, so an exporter that
kept its old events would read CPU 1's cpu-clock frozen forever. Checked: CPU 1's series
never goes down, and after CPU 1 is back its count moves again between two scrapes.

CPU 1 is offline only for a couple of seconds (the machine is shared); it is always brought
back, also on failure. Skipped without root or where CPU 1 cannot be taken offline."""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
import harness  # noqa: E402

ONLINE = "/sys/devices/system/cpu/cpu1/online"


def set_online(value):
    with open(ONLINE, "w") as f:
        f.write(value)


def main(binary):
    if os.geteuid() != 0:
        print("SKIP: CPU hotplug and system-wide perf counting need root")
        return harness.SKIP
    if not os.access(ONLINE, os.W_OK):
        print(f"SKIP: {ONLINE} is absent or not writable: CPU 1 cannot be taken offline here")
        return harness.SKIP
    with open(ONLINE) as f:
        if f.read().strip() != "1":
            print("SKIP: CPU 1 is offline already")
            return harness.SKIP
    failures = []

    def expect(what, ok, detail):
        print(("ok" if ok else "FAIL") + f": {what}: {detail}")
        if not ok:
            failures.append(what)

    args = ["--collector.disable-defaults", "--collector.perf", "--collector.perf.event=cpu-clock",
            "--collector.perf.per-cpu"]
    with harness.Exporter(binary, args) as exporter:
        def cpu1():
            samples = harness.parse(exporter.metrics())
            return harness.value(samples, "rdma_perf_events_total", event="cpu-clock", cpu="1")

        before = cpu1()
        expect("CPU 1 counted at start", before is not None and before > 0, before)
        try:
            set_online("0")
        except OSError as error:
            print(f"SKIP: cannot take CPU 1 offline: {error}")
            return harness.SKIP
        try:
            time.sleep(1)
            offline = cpu1()
        finally:
            set_online("1")
        expect("offline: CPU 1's count kept, not lost", offline is not None and offline >= before,
               f"{before} -> {offline}")
        back = cpu1()  # this scrape reopens CPU 1's event
        time.sleep(1)
        later = cpu1()
        expect("CPU 1 counted again after it came back",
               later is not None and back is not None and later > back and later > offline,
               f"offline {offline}, back {back}, a second later {later}")
        expect("scrape healthy", harness.value(harness.parse(exporter.metrics()),
                                               "rdmascope_collector_success",
                                               collector="perf") == 1.0, "")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
