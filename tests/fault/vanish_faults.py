#!/usr/bin/env python3
"""RDMA devices vanishing mid-scrape (issue 18 item 3), deterministically: the rdma collector's
open of mlx5_0/fw_ver is held (tests/e2e/hold_open.c, LD_PRELOAD) while the test removes the
sysfs directories of mlx5_0 (the device being read) and mlx5_1 (the next one), as a hot
unplug, a driver unbind or a destroyed VF does; then the scrape goes on.

- The held scrape answers 200 and serves no mlx5_0 or mlx5_1 series at all (not an info series
  with empty labels, not a zero); every other rdma_* series has its value from before.
- The collector does not fail over it (success 1) and the exporter does not die or hang.
- Once the devices are back (the tree restored), the next scrape equals the one before.

Usage: vanish_faults.py RDMASCOPE_BINARY FIXTURES_DIR HOLD_OPEN_SO"""

import os
import shutil
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
import harness  # noqa: E402

DEADLINE = 20  # seconds: a hung exporter fails the test instead of hanging it
GONE = ("mlx5_0", "mlx5_1")


def rdma_series(samples):
    return {key: value for key, value in samples.items() if key[0].startswith("rdma_")}


def device_of(key):
    return dict(key[1]).get("device")


def main(binary, fixtures, hold_so):
    failures = []
    with tempfile.TemporaryDirectory(prefix="rdmascope-fault-vanish-") as work:
        sysfs = os.path.join(work, "sys")
        tree = os.path.join(fixtures, "sysfs", "rdma_hosts.tree")
        harness.materialise_tree(tree, sysfs)
        fifo = os.path.join(work, "hold")
        os.mkfifo(fifo)
        env = {"LD_PRELOAD": hold_so, "RDMASCOPE_HOLD_MATCH": "/mlx5_0/fw_ver",
               "RDMASCOPE_HOLD_FIFO": fifo}
        with harness.Exporter(binary, ["--collector.disable-defaults", "--collector.rdma",
                                       f"--path.sysfs={sysfs}"], env=env) as exporter:
            baseline = rdma_series(harness.parse(exporter.metrics()))
            if not any(device_of(k) in GONE for k in baseline):
                failures.append("baseline has no mlx5_0/mlx5_1 series")
            open(fifo + ".armed", "w").close()
            result = {}
            scraper = threading.Thread(
                target=lambda: result.update(zip(("status", "body"),
                                                 exporter.get(timeout=DEADLINE))))
            scraper.start()
            deadline = time.monotonic() + DEADLINE
            while "rdmascope-hold: entered" not in exporter.read_log():
                if time.monotonic() > deadline:
                    failures.append("the scrape never reached mlx5_0/fw_ver")
                    break
                time.sleep(0.05)
            for device in GONE:
                shutil.rmtree(os.path.join(sysfs, "class", "infiniband", device))
            open(fifo + ".released", "w").close()
            with open(fifo, "w"):
                pass
            scraper.join(DEADLINE * 2)
            if result.get("status") != 200:
                failures.append(f"scrape during the removal: {result.get('status')}")
            else:
                during = harness.parse(result["body"])
                present = rdma_series(during)
                left = sorted({device_of(k) for k in present if device_of(k) in GONE})
                if left:
                    failures.append(f"series of removed devices {left} served, e.g. " +
                                    ", ".join(f"{k[0]}{dict(k[1])}" for k in present
                                              if device_of(k) in GONE)[:400])
                changed = [k for k, v in present.items()
                           if device_of(k) not in GONE and baseline.get(k) != v]
                if changed:
                    failures.append(f"{len(changed)} series of the remaining devices changed, "
                                    f"e.g. {changed[:3]}")
                success = harness.value(during, "rdmascope_collector_success", collector="rdma")
                if success != 1:
                    failures.append(f"rdma collector success {success} during the removal")
                if not failures:
                    print(f"ok: devices removed mid-scrape: {len(present)} series served, none "
                          f"of {', '.join(GONE)}, the others unchanged")
            harness.materialise_tree(tree, sysfs)  # the devices come back
            after = rdma_series(harness.parse(exporter.metrics()))
            if after != baseline:
                failures.append(f"after the devices came back: {len(after)} series, "
                                f"{len(baseline)} before")
            else:
                print("ok: devices back, the next scrape equals the one before")
            if exporter.proc.poll() is not None:
                failures.append("exporter died")
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3]))
