#!/usr/bin/env python3
"""Host tier: configuration changes show on the next scrape, with no caching in between:
an MTU change (the RoCE jumbo-frame pitfall: 1500 -> 4200), an interface added, one removed."""

import sys

import netns
from netns import harness


def mtu(samples, dev):
    values = list(harness.series(samples, "rdma_netdev_mtu_bytes", device=dev).values())
    return values[0] if values else None


def main(binary):
    harness.require_root_and_netns()
    failures = []
    with netns.Namespaces("m") as ns:
        netns.veth_pair(ns[0], "roce0", ns[0], "roce0p")
        with harness.Exporter(binary, [], netns=ns[0]) as exporter:
            first = harness.parse(exporter.metrics())
            netns.ip("-n", ns[0], "link", "set", "roce0", "mtu", "4200")
            second = harness.parse(exporter.metrics())
            netns.veth_pair(ns[0], "late0", ns[0], "late0p")
            netns.ip("-n", ns[0], "link", "del", "roce0")
            third = harness.parse(exporter.metrics())
        checks = [
            ("MTU before", mtu(first, "roce0"), 1500.0),
            ("MTU after `ip link set mtu 4200`", mtu(second, "roce0"), 4200.0),
            ("peer MTU unchanged", mtu(second, "roce0p"), 1500.0),
            ("new interface appears", mtu(third, "late0"), 1500.0),
            ("deleted interface (and its peer) disappear",
             (mtu(third, "roce0"), mtu(third, "roce0p")), (None, None)),
        ]
        for what, got, want in checks:
            print(("ok" if got == want else "FAIL") + f": {what}: {got} (want {want})")
            if got != want:
                failures.append(what)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
