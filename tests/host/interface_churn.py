#!/usr/bin/env python3
"""Host tier: interfaces created and deleted as fast as `ip` can while the exporter is scraped
in a loop. Every scrape must return 200 with a parseable exposition; the exporter must live."""

import sys
import threading
import time

import netns
from netns import harness

DURATION_SECONDS = 15


def main(binary):
    harness.require_root_and_netns()
    stop = threading.Event()
    churned = [0]
    with netns.Namespaces("c") as ns:
        def churn():
            i = 0
            while not stop.is_set():
                name = f"ch{i % 8}"
                netns.ip("-n", ns[0], "link", "add", name, "type", "veth", "peer",
                         f"{name}p", check=False)
                netns.ip("-n", ns[0], "link", "set", name, "up", check=False)
                netns.ip("-n", ns[0], "link", "set", name, "mtu", str(1500 + i % 3000),
                         check=False)
                netns.ip("-n", ns[0], "link", "del", name, check=False)
                churned[0] += 1
                i += 1

        failures = []
        scrapes = 0
        with harness.Exporter(binary, ["--log.level=debug"], netns=ns[0]) as exporter:
            worker = threading.Thread(target=churn)
            worker.start()
            deadline = time.monotonic() + DURATION_SECONDS
            try:
                while time.monotonic() < deadline:
                    status, body = exporter.get()
                    scrapes += 1
                    if status != 200:
                        failures.append(f"scrape {scrapes}: HTTP {status}")
                        continue
                    harness.parse(body)
                    success = harness.series(harness.parse(body), "rdmascope_collector_success",
                                             collector="ethtool")
                    if list(success.values()) != [1.0]:
                        failures.append(f"scrape {scrapes}: ethtool collector failed")
            finally:
                stop.set()
                worker.join()
            if exporter.proc.poll() is not None:
                failures.append(f"exporter exited with {exporter.proc.returncode}")
        print(f"{scrapes} scrapes during {churned[0]} interface create/delete cycles, "
              f"{len(failures)} failures")
    for failure in failures[:20]:
        print("FAIL:", failure)
    return 1 if failures or scrapes < 10 or churned[0] < 10 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
