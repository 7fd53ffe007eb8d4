#!/usr/bin/env python3
"""Host tier: the number of ethtool stats changes while the exporter reads them. A thread
flips veth channel counts (`ethtool -L`, 1 <-> 8 queues: 18 <-> 73 stats) as fast as it can
while the exporter is scraped in a loop. Every scrape must succeed and every exported set of
stats must be one consistent configuration: names and values from the same moment (a name/value
mismatch would shift `peer_ifindex`)."""

import re
import subprocess
import sys
import threading
import time

import netns
from netns import harness

DURATION_SECONDS = 12
RX_STATS = {"xdp_packets", "xdp_bytes", "drops", "xdp_redirect", "xdp_drops", "xdp_tx",
            "xdp_tx_errors"}
TX_STATS = {"xdp_xmit", "xdp_xmit_errors"}


def consistent(names):
    """True if the stat names describe rx queues 0..n-1 and tx queues 0..m-1, complete."""
    queues = {"rx": {}, "tx": {}}
    for name in names:
        if name == "peer_ifindex":
            continue
        match = re.fullmatch(r"(rx|tx)_queue_(\d+)_(.+)", name)
        if not match:
            return False
        queues[match.group(1)].setdefault(int(match.group(2)), set()).add(match.group(3))
    for direction, expected in (("rx", RX_STATS), ("tx", TX_STATS)):
        indices = sorted(queues[direction])
        if indices != list(range(len(indices))) or not indices:
            return False
        if any(stats != expected for stats in queues[direction].values()):
            return False
    return True


def main(binary):
    harness.require_root_and_netns()
    failures = []
    flips = [0]
    stop = threading.Event()
    with netns.Namespaces("r") as ns:
        netns.ip("link", "add", "race0", "numtxqueues", "8", "numrxqueues", "8", "netns", ns[0],
                 "type", "veth", "peer", "race0p", "numtxqueues", "8", "numrxqueues", "8",
                 "netns", ns[0])
        for dev in ("race0", "race0p"):
            netns.ip("-n", ns[0], "link", "set", dev, "up")
        peer_index = float(netns.ethtool_stats(ns[0], "race0")["peer_ifindex"])

        def flip():
            while not stop.is_set():
                for n in ("1", "8", "3", "8"):
                    subprocess.run(["ip", "netns", "exec", ns[0], "ethtool", "-L", "race0", "rx",
                                    n, "tx", n], capture_output=True)
                    flips[0] += 1

        scrapes = seen_sizes = 0
        sizes = set()
        with harness.Exporter(binary, ["--log.level=debug",
                                       "--collector.ethtool.device-include=race0"],
                              netns=ns[0]) as exporter:
            worker = threading.Thread(target=flip)
            worker.start()
            deadline = time.monotonic() + DURATION_SECONDS
            try:
                while time.monotonic() < deadline:
                    samples = harness.parse(exporter.metrics())
                    scrapes += 1
                    stats = {dict(k)["stat"]: v for k, v in
                             harness.series(samples, "rdma_ethtool_stat", device="race0").items()}
                    ok = list(harness.series(samples, "rdmascope_collector_success",
                                             collector="ethtool").values()) == [1.0]
                    if not ok:
                        failures.append(f"scrape {scrapes}: ethtool collector failed")
                    elif not stats:
                        continue  # all retries raced: a missing series, allowed
                    elif not consistent(stats) or stats.get("peer_ifindex") != peer_index:
                        failures.append(f"scrape {scrapes}: inconsistent stats {sorted(stats)}")
                    else:
                        sizes.add(len(stats))
            finally:
                stop.set()
                worker.join()
            retries = exporter.read_log().count("retrying")
        seen_sizes = len(sizes)
        print(f"{scrapes} scrapes during {flips[0]} channel changes; stat counts seen "
              f"{sorted(sizes)}; {retries} reads retried after a change")
    for failure in failures[:10]:
        print("FAIL:", failure)
    if seen_sizes < 2:
        print("FAIL: the channel changes were never observed; the test proved nothing")
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
