"""Checks for counters.sh: exported hw_counters equal sysfs, and move with the traffic."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "e2e"))
import harness  # noqa: E402

ITERATIONS = 1000


def exported(lab, block):
    samples = harness.parse("\n".join(lab.blocks[block]))
    return {dict(labels)["counter"]: value for labels, value in
            harness.series(samples, "rdma_port_hw_counter_total", device="rxe0",
                           port="1").items()}


def sysfs(lab, block):
    values = {}
    for line in lab.blocks[block]:
        name, _, value = line.partition(" ")
        if name != "lifespan" and value:
            values[name] = float(value)
    return values


def check(lab):
    failures = []
    for when in ("before", "after"):
        got, truth = exported(lab, f"scrape_{when}"), sysfs(lab, f"sysfs_{when}")
        if set(got) != set(truth):
            failures.append(f"{when}: counters differ: exported {sorted(got)}, sysfs "
                            f"{sorted(truth)}")
        for name, value in truth.items():
            if got.get(name) != value:
                failures.append(f"{when}: {name} exported {got.get(name)}, sysfs {value}")
    before, after = exported(lab, "scrape_before"), exported(lab, "scrape_after")
    delta = {name: after.get(name, 0) - before.get(name, 0) for name in after}
    # Each side posts ITERATIONS sends and receives ITERATIONS messages (server and client run
    # on the same rxe device, so the device counts both sides).
    expect = {"rdma_sends": 2 * ITERATIONS, "rdma_recvs": 2 * ITERATIONS}
    for name, want in expect.items():
        if delta.get(name) != want:
            failures.append(f"delta {name}: {delta.get(name)}, want {want}")
    # Every packet rxe sends on loopback it also receives; requests and ACKs both count.
    if delta.get("sent_pkts") != delta.get("rcvd_pkts"):
        failures.append(f"sent_pkts delta {delta.get('sent_pkts')} != rcvd_pkts delta "
                        f"{delta.get('rcvd_pkts')}")
    # At least one packet per message (512-byte messages fit the 1024-byte MTU), at most one
    # ACK per request on top; plus, when the slow TCG guest makes the requester time out, each
    # retransmitted request (the responder counts it in duplicate_request) and its new ACK.
    retransmitted = delta.get("duplicate_request", 0)
    upper = 4 * ITERATIONS + 2 * retransmitted
    if not 2 * ITERATIONS <= delta.get("sent_pkts", 0) <= upper:
        failures.append(f"sent_pkts delta {delta.get('sent_pkts')} outside "
                        f"[{2 * ITERATIONS}, {upper}] ({int(retransmitted)} retransmitted)")
    if not any(f"{ITERATIONS} iters" in line for line in lab.blocks.get("client", [])):
        failures.append("ibv_rc_pingpong client did not report its iterations")
    # virtio_net has no CRC name in `ethtool -S`: the kernel's standard statistics (the
    # guest's sysfs, block stats_eth0) feed rdma_netdev_crc_errors_total and the CRC alert.
    after = harness.parse("\n".join(lab.blocks["scrape_after"]))
    standard = {}
    for line in lab.blocks.get("stats_eth0", []):
        name, _, value = line.partition(" ")
        if value:
            standard[name] = float(value)
    for error in ("crc", "frame", "fifo", "missed"):
        got = harness.value(after, "rdma_netdev_receive_errors_total", device="eth0", error=error)
        if got is None or got != standard.get(f"rx_{error}_errors"):
            failures.append(f"eth0 rx_{error}_errors: exported {got}, sysfs "
                            f"{standard.get(f'rx_{error}_errors')}")
    crc = harness.value(after, "rdma_netdev_crc_errors_total", device="eth0")
    if crc is None or crc != standard.get("rx_crc_errors"):
        failures.append(f"eth0 CRC errors from the standard statistics: {crc}")
    lab.notes.append("counter deltas over the ping-pong: " + ", ".join(
        f"{k}={int(v)}" for k, v in sorted(delta.items()) if v))
    return failures
