#!/usr/bin/env python3
"""Host tier: every rdma_ethtool_stat the exporter serves equals what `ethtool -S` prints for
the same interface at the same moment (veth pairs across two namespaces, XDP attached so that
the per-queue counters move, different traffic per pair). The label and sum queue modes are
checked against the same `ethtool -S` output."""

import collections
import sys

import netns
from netns import harness


def snapshot(ns, devices):
    return {dev: netns.ethtool_stats(ns, dev) for dev in devices}


def scrape_when_quiet(exporter, ns, devices):
    """ethtool before and after the scrape must agree, else the counters moved: retry."""
    for _ in range(5):
        before = snapshot(ns, devices)
        samples = harness.parse(exporter.metrics())
        after = snapshot(ns, devices)
        if before == after:
            return samples, before
    raise RuntimeError("counters kept moving during the scrape")


def main(binary):
    harness.require_root_and_netns()
    failures = []
    with netns.Namespaces("a", "b") as ns, netns.tempdir() as work:
        xdp = netns.build_xdp_object(work)
        if xdp is None:
            return 1
        devices = []
        for i, queues in enumerate((1, 2, 4)):
            a, b = f"eq{i}a", f"eq{i}b"
            netns.veth_pair(ns[0], a, ns[1], b, queues, f"10.77.{i}.1/24", f"10.77.{i}.2/24")
            for n, dev in ((ns[0], a), (ns[1], b)):
                netns.ip("-n", n, "link", "set", "dev", dev, "xdp", "obj", xdp, "sec", "xdp")
            devices.append(a)
            # Different traffic per pair, both directions, so that values differ.
            netns.send_udp(ns[0], f"10.77.{i}.2", 10 * (i + 1))
            netns.send_udp(ns[1], f"10.77.{i}.1", 7 * (i + 1), size=300)

        with harness.Exporter(binary, [], netns=ns[0]) as exporter:
            samples, truth = scrape_when_quiet(exporter, ns[0], devices)
        nonzero = 0
        for dev in devices:
            exported = {dict(labels)["stat"]: value for labels, value in
                        harness.series(samples, "rdma_ethtool_stat", device=dev).items()}
            if set(exported) != set(truth[dev]):
                failures.append(f"{dev}: stat names differ: only exported "
                                f"{sorted(set(exported) - set(truth[dev]))}, only ethtool "
                                f"{sorted(set(truth[dev]) - set(exported))}")
            for stat, value in truth[dev].items():
                if exported.get(stat) != float(value):
                    failures.append(f"{dev} {stat}: exported {exported.get(stat)}, ethtool {value}")
                nonzero += value != 0
            info = harness.series(samples, "rdma_netdev_info", device=dev)
            if not info or dict(next(iter(info)))["driver"] != "veth":
                failures.append(f"{dev}: rdma_netdev_info missing or wrong: {info}")
        print(f"compared {sum(len(t) for t in truth.values())} stats on {len(devices)} "
              f"interfaces, {nonzero} of them non-zero")
        if nonzero < 2 * len(devices):
            failures.append("too few non-zero counters: the comparison would prove little")

        # Queue folding modes against the same truth.
        for mode in ("label", "sum"):
            with harness.Exporter(binary, [f"--collector.ethtool.queue-stats={mode}"],
                                  netns=ns[0]) as exporter:
                samples, truth = scrape_when_quiet(exporter, ns[0], devices)
            for dev in devices:
                sums = collections.Counter()
                for stat, value in truth[dev].items():
                    parts = stat.split("_")
                    if len(parts) > 3 and parts[1] == "queue" and parts[2].isdigit():
                        template = "_".join(parts[:2] + parts[3:])
                        sums[template] += value
                        if mode == "label":
                            got = harness.series(samples, "rdma_ethtool_queue_stat", device=dev,
                                                 queue=parts[2], stat=template)
                            if list(got.values()) != [float(value)]:
                                failures.append(f"label {dev} {stat}: {got} != {value}")
                    elif not harness.series(samples, "rdma_ethtool_stat", device=dev, stat=stat):
                        failures.append(f"{mode} {dev}: device-wide stat {stat} missing")
                if mode == "sum":
                    for template, total in sums.items():
                        got = harness.series(samples, "rdma_ethtool_queue_stat_sum", device=dev,
                                             stat=template)
                        if list(got.values()) != [float(total)]:
                            failures.append(f"sum {dev} {template}: {got} != {total}")
            print(f"queue-stats={mode}: checked against ethtool -S")

    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
