#!/usr/bin/env python3
"""Host tier: a carrier-down edge seen live (issue 40, link-down reasons). A veth pair in a
network namespace; `ip link set dev ldB down` on the peer takes ldA's carrier away
(veth_close: netif_carrier_off on the peer). The exporter's link collector must see the edge
from rtnetlink within 100 ms, ask ETHTOOL_MSG_LINKSTATE_GET, count it with reason `none` (veth
has no get_link_ext_state: the kernel answers without ETHTOOL_A_LINKSTATE_EXT_STATE, so
rdma_link_source_available{source="link_ext_state"} is 0) and show it on /debug/links as JSON
and as escaped HTML. The link collector follows physical interfaces only (a parent device):
the exporter reads its ports from a --path.sysfs tree where ldA has one; rtnetlink and ethtool
netlink are the namespace's own."""

import json
import os
import sys
import tempfile
import time

import netns
from netns import harness

LATENCY_BOUND_SECONDS = 0.1


def wait_for(exporter, path, predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, body = exporter.get(path)
        if status == 200 and predicate(body):
            return body
        time.sleep(0.05)
    return None


def carrier_of(body, netdev):
    for port in json.loads(body)["ports"]:
        if port["netdev"] == netdev:
            return port["carrier"]
    return None


def main(binary):
    harness.require_root_and_netns()
    check = harness.Checker()
    with tempfile.TemporaryDirectory() as sysfs, netns.Namespaces("ld") as ns:
        # The port list: ldA as a physical interface (class/net/ldA/device).
        os.makedirs(os.path.join(sysfs, "class", "net", "ldA", "device"))
        netns.veth_pair(ns[0], "ldA", ns[0], "ldB")
        args = ["--collector.disable-defaults", "--collector.link",
                "--collector.link.refresh-interval=1s", f"--path.sysfs={sysfs}"]
        with harness.Exporter(binary, args, netns=ns[0]) as exporter:
            exporter.metrics()  # the first scrape starts the collector's refresher
            body = wait_for(exporter, "/debug/links?format=json",
                            lambda b: carrier_of(b, "ldA") == "up")
            check.expect("ldA followed with its carrier up before the edge",
                         body is not None, True)
            before = time.time()
            netns.ip("-n", ns[0], "link", "set", "dev", "ldB", "down")
            body = wait_for(exporter, "/debug/links?format=json",
                            lambda b: carrier_of(b, "ldA") == "down")
            check.expect("the down edge on /debug/links (JSON)", body is not None, True)
            events = []
            if body:
                events = [p for p in json.loads(body)["ports"] if p["netdev"] == "ldA"][0]["events"]
            down = [e for e in events if e["direction"] == "down"]
            check.expect("one down event", len(down), 1)
            if down:
                event = down[0]
                seen = time.strptime(event["time"][:19], "%Y-%m-%dT%H:%M:%S")
                seen_seconds = (time.mktime(seen) - time.timezone +
                                int(event["time"][20:23]) / 1000.0)
                latency = seen_seconds - before
                print(f"latency from `ip link set down` to the handled edge: "
                      f"{latency * 1000:.1f} ms (notice to LINKSTATE answer: "
                      f"{event.get('query_seconds', float('nan')) * 1000:.2f} ms)")
                check.expect(f"edge seen within {LATENCY_BOUND_SECONDS * 1000:.0f} ms",
                             latency < LATENCY_BOUND_SECONDS, True)
                check.expect("reason (veth gives no extended state)", event["reason"], "none")
                check.expect("no LINKSTATE error", event.get("linkstate_error"), None)
            # The counter, published at the refresher's next pass (a tenth of the interval).
            deadline = time.monotonic() + 5
            counted = None
            while time.monotonic() < deadline and counted is None:
                samples = harness.parse(exporter.metrics())
                counted = harness.value(samples, "rdma_link_down_events_total",
                                        netdev="ldA", reason="none")
                time.sleep(0.1)
            check.expect("rdma_link_down_events_total{netdev=ldA,reason=none}", counted, 1.0)
            check.expect("rdma_link_source_available{source=link_ext_state}",
                         harness.value(samples, "rdma_link_source_available", netdev="ldA",
                                       source="link_ext_state"), 0.0)
            check.expect("rdma_link_last_down_info names none",
                         harness.value(samples, "rdma_link_last_down_info", netdev="ldA",
                                       reason="none"), 1.0)
            changes = harness.value(samples, "rdma_link_carrier_changes_total", netdev="ldA")
            check.expect("carrier changes counted (IFLA_CARRIER_CHANGES >= 2)",
                         changes is not None and changes >= 2, True)
            # Up again: an up edge, nothing more counted.
            netns.ip("-n", ns[0], "link", "set", "dev", "ldB", "up")
            body = wait_for(exporter, "/debug/links?format=json",
                            lambda b: carrier_of(b, "ldA") == "up")
            check.expect("the up edge", body is not None, True)
            # The page a browser gets.
            out = harness.run(["ip", "netns", "exec", ns[0], "curl", "-s", "-H",
                               "Accept: text/html", f"http://127.0.0.1:{exporter.port}/debug/links"])
            html = out.stdout
            check.expect("HTML page names ldA", "<h2>ldA" in html, True)
            check.expect("HTML page shows the down row", "<td>down</td><td>none</td>" in html,
                         True)
            status, landing = exporter.get("/")
            check.expect("landing page links /debug/links", 'href="/debug/links"' in landing,
                         True)
    return check.result()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
