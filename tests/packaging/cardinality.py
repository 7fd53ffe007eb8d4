#!/usr/bin/env python3
"""Cardinality of one large RDMA host, measured (docs/deployment.md, "Cardinality budget").

Builds a sysfs fixture of a GPU-style node, 8 InfiniBand ConnectX ports (cloned from mlx5_1 of
tests/fixtures/sysfs/rdma_hosts.tree) and 2 RoCE ports (cloned from mlx5_0), each with every
hw_counters file mlx5 creates (drivers/infiniband/hw/mlx5/counters.c: basic_q_cnts,
out_of_seq_q_cnts, retrans_q_cnts, extended_err_cnts, roce_accl_cnts, cong_cnts,
ext_ppcnt_cnts, plus the core's lifespan) and every IBA PortCounters file
(drivers/infiniband/core/sysfs.c, pma counters), runs `rdmascope serve` on it with the sysfs
collectors and prints the series of one scrape per metric family.

Usage: cardinality.py RDMASCOPE_BINARY [FIXTURES_DIR]"""

import collections
import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
import harness  # noqa: E402

MLX5_HW_COUNTERS = [
    "rx_write_requests", "rx_read_requests", "rx_atomic_requests", "rx_dct_connect",
    "out_of_buffer", "out_of_sequence", "duplicate_request", "rnr_nak_retry_err",
    "packet_seq_err", "implied_nak_seq_err", "local_ack_timeout_err",
    "resp_local_length_error", "resp_cqe_error", "req_cqe_error", "req_remote_invalid_request",
    "req_remote_access_errors", "resp_remote_access_errors", "resp_cqe_flush_error",
    "req_cqe_flush_error", "roce_adp_retrans", "roce_adp_retrans_to", "roce_slow_restart",
    "roce_slow_restart_cnps", "roce_slow_restart_trans", "rp_cnp_ignored", "rp_cnp_handled",
    "np_ecn_marked_roce_packets", "np_cnp_sent", "rx_icrc_encapsulated", "lifespan"]
PORT_COUNTERS = [
    "symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors",
    "port_rcv_remote_physical_errors", "port_rcv_switch_relay_errors", "port_xmit_discards",
    "port_xmit_constraint_errors", "port_rcv_constraint_errors", "local_link_integrity_errors",
    "excessive_buffer_overrun_errors", "VL15_dropped", "port_xmit_data", "port_rcv_data",
    "port_xmit_packets", "port_rcv_packets", "port_xmit_wait", "unicast_xmit_packets",
    "unicast_rcv_packets", "multicast_xmit_packets", "multicast_rcv_packets"]


def device_lines(tree, device):
    prefix = f"class/infiniband/{device}/"
    return [line for line in tree if line.startswith(prefix)]


def clone(lines, src, dst, index):
    out = []
    for line in lines:
        line = line.replace(f"class/infiniband/{src}/", f"class/infiniband/{dst}/")
        if "/node_guid = " in line:
            line = re.sub(r"= .*", f"= 0c42:a103:0065:{index:04x}", line)
        if "/hw_counters/" in line or "/counters/" in line:
            continue  # replaced by the full lists below
        out.append(line)
    for name in MLX5_HW_COUNTERS:
        out.append(f"class/infiniband/{dst}/ports/1/hw_counters/{name} = {index}")
    for name in PORT_COUNTERS:
        out.append(f"class/infiniband/{dst}/ports/1/counters/{name} = {index}")
    return out


def main(binary, fixtures=os.path.join(HERE, "..", "fixtures")):
    with open(os.path.join(fixtures, "sysfs", "rdma_hosts.tree")) as f:
        tree = [line.rstrip("\n") for line in f if line.strip() and not line.startswith("#")]
    lines = []
    for i in range(8):
        lines += clone(device_lines(tree, "mlx5_1"), "mlx5_1", f"mlx5_{i}", i)
    for i in range(8, 10):
        lines += clone(device_lines(tree, "mlx5_0"), "mlx5_0", f"mlx5_{i}", i)
    with tempfile.TemporaryDirectory() as sysfs:
        tree_file = os.path.join(sysfs, "large.tree")
        with open(tree_file, "w") as f:
            f.write("\n".join(lines) + "\n")
        harness.materialise_tree(tree_file, sysfs)
        with harness.Exporter(binary, ["--collector.disable-defaults", "--collector.rdma",
                                       f"--path.sysfs={sysfs}"]) as exporter:
            body = exporter.metrics()
    families = collections.Counter()
    for line in body.splitlines():
        if line and not line.startswith("#"):
            name = re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line).group(0)
            families[name] += 1
    total = sum(families.values())
    print("| metric family | series |\n|---|---|")
    for name, count in families.most_common():
        print(f"| `{name}` | {count} |")
    print(f"| **total, 10 ports (8 IB, 2 RoCE)** | **{total}** |")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
