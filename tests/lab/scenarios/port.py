"""Checks for port.sh: port identity, rate, GID table, netdev mapping and the MTU pitfall."""

import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "e2e"))
import harness  # noqa: E402


# Every source the link collector says is there or not for an RDMA port on Ethernet (issue 40);
# link_ext_state comes with a port's first down edge.
LINK_SOURCES = ("module", "fec", "fec_hist", "linkmodes", "ib_counters")
# What soft-RoCE on virtio-net has: speed and link modes (virtio_net's get_link_ksettings), none
# of the link-health sources.
RXE_AVAILABLE = ["linkmodes"]


def one(samples, name, **labels):
    values = harness.series(samples, name, **labels)
    return next(iter(values.items())) if len(values) == 1 else (None, None)


def check(lab):
    failures = []
    samples = harness.parse("\n".join(lab.blocks["scrape"]))
    port = dict(line.split(" ", 1) for line in lab.blocks["port"] if " " in line)

    def expect(what, got, want):
        if got != want:
            failures.append(f"{what}: got {got!r}, want {want!r}")

    labels, _ = one(samples, "rdma_port_info", device="rxe0", port="1")
    labels = dict(labels or {})
    expect("port state label", labels.get("state"), "ACTIVE")
    expect("link layer", labels.get("link_layer"), port.get("link_layer"))
    expect("link layer is Ethernet", labels.get("link_layer"), "Ethernet")
    expect("netdev", labels.get("netdev"), "eth0")
    expect("rdma_port_state", one(samples, "rdma_port_state", device="rxe0")[1], 4.0)
    gbits = float(port["rate"].split()[0])
    expect("rate", one(samples, "rdma_port_rate_bytes_per_second", device="rxe0")[1],
           gbits * 1e9 / 8)

    # GID table: every populated sysfs entry, with its RoCE type and netdev.
    truth = {}
    for line in lab.blocks["gids"]:
        index, rest = line.split(" ", 1)
        gid, gid_type, ndev = (part.strip() for part in rest.split("|"))
        if set(gid) - {"0", ":"}:
            truth[index] = (gid, gid_type, ndev)
    exported = {}
    for key in harness.series(samples, "rdma_port_gid_info", device="rxe0", port="1"):
        d = dict(key)
        exported[d["index"]] = (d["gid"], d["type"], d["netdev"])
    expect("GID table", exported, truth)
    v2_ipv4 = [g for g in exported.values()
               if g[1] == "RoCE v2" and g[0].endswith("ffff:0a00:020f") and g[2] == "eth0"]
    expect("RoCE v2 GID of 10.0.2.15 on eth0", len(v2_ipv4), 1)

    # The MTU pitfall, as ibv_devinfo shows it.
    devinfo = "\n".join(lab.blocks["devinfo"])
    active = int(re.search(r"active_mtu:\s*(\d+)", devinfo).group(1))
    maximum = int(re.search(r"max_mtu:\s*(\d+)", devinfo).group(1))
    expect("rdma_port_active_mtu_bytes", one(samples, "rdma_port_active_mtu_bytes",
                                             device="rxe0")[1], float(active))
    expect("rdma_port_max_mtu_bytes", one(samples, "rdma_port_max_mtu_bytes", device="rxe0")[1],
           float(maximum))
    expect("active MTU below max (the pitfall)", (active, maximum), (1024, 4096))
    netdev_mtu = float(lab.blocks["netdev_mtu"][0])
    expect("rdma_netdev_mtu_bytes{eth0}", one(samples, "rdma_netdev_mtu_bytes", device="eth0")[1],
           netdev_mtu)
    expect("eth0 MTU", netdev_mtu, 1500.0)
    info, _ = one(samples, "rdma_netdev_info", device="eth0")
    expect("eth0 driver", dict(info or {}).get("driver"), "virtio_net")
    if not any("rxe0" in line and "eth0" in line for line in lab.blocks["rdma_link"]):
        failures.append("rdma link show does not map rxe0 to eth0: " + str(lab.blocks["rdma_link"]))
    # Link health (issue 40): soft-RoCE has no module, FEC or PMA counters. Each source must
    # say so (0), never be left out or read as healthy.
    sources = {dict(key).get("source"): value for key, value in harness.series(
        samples, "rdma_link_source_available", device="rxe0", port="1").items()}
    expect("rxe0 link sources listed", sorted(sources), sorted(LINK_SOURCES))
    expect("rxe0 link sources available", sorted(s for s, v in sources.items() if v != 0),
           RXE_AVAILABLE)
    for series in ("rdma_link_fec_corrected_codewords_total", "rdma_link_module_info",
                   "rdma_link_module_temperature_celsius"):
        expect(f"{series} of rxe0", harness.series(samples, series, device="rxe0"), {})
    lab.notes.append(f"rxe0: {len(exported)} GIDs, rate {port['rate']}, active/max MTU "
                     f"{active}/{maximum}, eth0 MTU {int(netdev_mtu)}")
    return failures
