#!/usr/bin/env python3
"""Benchmark (reported, never asserted), issue #17 item 3: a large host. A fake sysfs with 16
RDMA devices x 2 ports (mlx5-like, 100 hw_counters a port plus the IB port counters), its
class/net a link to the namespace's real one with 256 veth interfaces; `rdmascope serve
--path.sysfs` and `prometheus-node-exporter --collector.ethtool --collector.infiniband` on the
same tree, scraped side by side by a real Prometheus (2 s interval and timeout: node_exporter needs
more than 1 s here) in one run. Reports series
count, median and p90 `scrape_duration_seconds`, CPU per scrape and RSS of both, and
rdmascope's per-collector durations.

--replay (issue 39): instead, the same host live, then `rdmascope capture` of it replayed by
`serve --replay`, as a directory and as a .tar.gz; each one's rdmascope_collector_duration_seconds
medians over --scrapes scrapes (no Prometheus, no node_exporter). Reported, never asserted.

Usage: large_host_bench.py RDMASCOPE_BINARY OUTPUT_DIR [--seconds N] [--interfaces N]
       large_host_bench.py RDMASCOPE_BINARY OUTPUT_DIR --replay [--scrapes N] [--interfaces N]
Writes OUTPUT_DIR/large_host_bench.md (--replay: large_host_replay.md) and prints it."""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "host"))
import netns  # noqa: E402
from netns import harness  # noqa: E402
from prometheus_run import Prometheus, cpu_seconds, memory_kib, quantile, wait_listening  # noqa
from scrape_bench import collector_durations  # noqa: E402

DEVICES, PORTS, HW_COUNTERS = 16, 2, 100
# drivers/infiniband/hw/mlx5/counters.c names first; the rest numbered (a driver's own names:
# the exporter exports every hw_counter it finds, known or not).
KNOWN_HW = ["out_of_buffer", "out_of_sequence", "duplicate_request", "rnr_nak_retry_err",
            "packet_seq_err", "implied_nak_seq_err", "local_ack_timeout_err", "req_cqe_error",
            "resp_cqe_error", "req_remote_access_errors", "resp_remote_access_errors",
            "roce_adp_retrans", "roce_slow_restart", "rp_cnp_handled", "rp_cnp_ignored",
            "np_cnp_sent", "np_ecn_marked_roce_packets", "rx_icrc_encapsulated",
            "rx_write_requests", "rx_read_requests", "rx_atomic_requests", "lifespan"]
PORT_COUNTERS = ["port_rcv_data", "port_xmit_data", "port_rcv_packets", "port_xmit_packets",
                 "port_rcv_errors", "port_xmit_discards", "symbol_error", "link_downed",
                 "link_error_recovery", "port_xmit_wait", "unicast_rcv_packets",
                 "unicast_xmit_packets", "multicast_rcv_packets", "multicast_xmit_packets"]


def write(root, relative, text):
    path = os.path.join(root, relative)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text + "\n")


def make_sysfs(root):
    """The fake tree; class/net is the namespace's own (ip netns exec mounts its sysfs)."""
    for d in range(DEVICES):
        dev = f"class/infiniband/mlx5_{d}"
        for name, value in [("node_type", "1: CA"), ("fw_ver", "22.36.1010"),
                            ("board_id", "MT_0000000359"), ("hca_type", "MT4125"),
                            ("node_guid", f"b8ce:f603:00e4:{d:04x}"),
                            ("device/numa_node", str(d % 2))]:
            write(root, f"{dev}/{name}", value)
        for p in range(1, PORTS + 1):
            port = f"{dev}/ports/{p}"
            for name, value in [("state", "4: ACTIVE"), ("phys_state", "5: LinkUp"),
                                ("rate", "200 Gb/sec (4X HDR)"), ("link_layer", "Ethernet")]:
                write(root, f"{port}/{name}", value)
            for i, name in enumerate(PORT_COUNTERS):
                write(root, f"{port}/counters/{name}", str(1000 * (i + 1) + d))
            names = KNOWN_HW + [f"vendor_counter_{i}" for i in range(HW_COUNTERS - len(KNOWN_HW))]
            for i, name in enumerate(names):
                write(root, f"{port}/hw_counters/{name}", str(i * 7 + d))
            write(root, f"{port}/gids/0", "fe80:0000:0000:0000:bace:f6ff:fee4:1a2c")
            write(root, f"{port}/gid_attrs/types/0", "RoCE v2")
    os.makedirs(os.path.join(root, "class"), exist_ok=True)
    os.symlink("/sys/class/net", os.path.join(root, "class/net"))
    os.symlink("/sys/devices", os.path.join(root, "devices"))


def scrape_durations(ns, port):
    """One scrape: rdmascope_collector_duration_seconds per collector (ms), and the series."""
    body = subprocess.run(["ip", "netns", "exec", ns, "curl", "-sf",
                           f"http://127.0.0.1:{port}/metrics"],
                          capture_output=True, text=True, check=True).stdout
    found = harness.series(harness.parse(body), "rdmascope_collector_duration_seconds")
    series = sum(1 for line in body.splitlines() if line and not line.startswith("#"))
    return {dict(name)["collector"]: value * 1e3 for name, value in found.items()}, series


def replay_bench(args, ns, tmp, sysfs):
    """Live, and a capture of the same host replayed from its directory and its .tar.gz: the
    three served at once, scraped in turn (round after round), so that the load of this shared
    machine falls on all three alike."""
    captured = os.path.join(tmp, "cap")
    for output in (captured, captured + ".tar.gz"):
        subprocess.run(["ip", "netns", "exec", ns, args.binary, "capture", "--log.level=warn",
                        f"--path.sysfs={sysfs}", "--samples=2", "--interval=1s",
                        f"--output={output}"], check=True, stdout=subprocess.DEVNULL)
    runs = [("live", 19881, [f"--path.sysfs={sysfs}"]),
            ("replay, directory", 19882, [f"--replay={captured}"]),
            ("replay, .tar.gz", 19883, [f"--replay={captured}.tar.gz"])]
    procs = {}
    try:
        for name, port, flags in runs:
            procs[name] = subprocess.Popen(
                ["ip", "netns", "exec", ns, args.binary, "serve", "--log.level=warn",
                 f"--web.listen-address=127.0.0.1:{port}", *flags],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for name, port, _ in runs:
            wait_listening(ns, port, procs[name], timeout=120)
            scrape_durations(ns, port)  # sample 1 (the collectors' start-up), then sample 2 on
        seen = {name: {} for name, _, _ in runs}
        series = {}
        for _ in range(args.scrapes):
            for name, port, _ in runs:
                durations, series[name] = scrape_durations(ns, port)
                for collector, ms in durations.items():
                    seen[name].setdefault(collector, []).append(ms)
    finally:
        for proc in procs.values():
            proc.terminate()
            proc.wait()
    medians = {name: {c: statistics.median(v) for c, v in sorted(by.items())}
               for name, by in seen.items()}
    lines = [f"# Large host replayed: {DEVICES} RDMA devices x {PORTS} ports ({HW_COUNTERS} "
             f"hw_counters and {len(PORT_COUNTERS)} port counters each), {args.interfaces} veths; "
             f"median rdmascope_collector_duration_seconds over {args.scrapes} scrapes of each, "
             "the three served at once and scraped in turn", "",
             "| serve | series | rdma ms | all collectors ms |", "|---|---|---|---|"]
    for name, durations in medians.items():
        lines.append(f"| {name} | {series[name]} | {durations.get('rdma', 0):.2f} | "
                     f"{sum(durations.values()):.2f} |")
    lines += ["", "Per collector (ms):"]
    for name, durations in medians.items():
        lines.append(f"- {name}: " + ", ".join(f"{c} {ms:.3f}" for c, ms in durations.items()))
    report = "\n".join(lines) + "\n"
    with open(os.path.join(args.outdir, "large_host_replay.md"), "w") as f:
        f.write(report)
    print(report)
    return 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("outdir")
    parser.add_argument("--seconds", type=int, default=120)
    parser.add_argument("--interfaces", type=int, default=256)
    parser.add_argument("--replay", action="store_true",
                        help="live against the replay of its capture (directory, .tar.gz)")
    parser.add_argument("--scrapes", type=int, default=100)
    args = parser.parse_args()
    harness.require_root_and_netns()
    if args.replay:
        os.makedirs(args.outdir, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="rdmascope-large-") as tmp, \
                netns.Namespaces("large") as ns:
            for i in range(args.interfaces // 2):
                netns.veth_pair(ns[0], f"lv{i}a", ns[0], f"lv{i}b")
            sysfs = os.path.join(tmp, "sys")
            make_sysfs(sysfs)
            return replay_bench(args, ns[0], tmp, sysfs)
    node_exporter = shutil.which("prometheus-node-exporter")
    prometheus = shutil.which("prometheus")
    if node_exporter is None or prometheus is None:
        print("SKIP: prometheus and prometheus-node-exporter are needed")
        return harness.SKIP
    os.makedirs(args.outdir, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rdmascope-large-") as tmp, \
            netns.Namespaces("large") as ns:
        for i in range(args.interfaces // 2):
            netns.veth_pair(ns[0], f"lv{i}a", ns[0], f"lv{i}b")
        sysfs = os.path.join(tmp, "sys")
        make_sysfs(sysfs)
        servers = {
            "rdmascope": [args.binary, "serve", "--web.listen-address=127.0.0.1:19881",
                          "--log.level=warn", f"--path.sysfs={sysfs}"],
            "node": [node_exporter, "--collector.disable-defaults", "--collector.ethtool",
                     "--collector.infiniband", f"--path.sysfs={sysfs}",
                     "--web.listen-address=127.0.0.1:19101"],
        }
        procs = {job: subprocess.Popen(["ip", "netns", "exec", ns[0], *cmd],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                 for job, cmd in servers.items()}
        try:
            wait_listening(ns[0], 19881, procs["rdmascope"], timeout=120)
            wait_listening(ns[0], 19101, procs["node"])
            cpu_before = {job: cpu_seconds(p.pid) for job, p in procs.items()}
            with Prometheus(ns[0], prometheus, tmp, port=19091, interval="2s",
                            jobs={"rdmascope": "127.0.0.1:19881", "node": "127.0.0.1:19101"}
                            ) as prom:
                time.sleep(args.seconds)  # the measurement window: Prometheus scrapes every 2 s
                durations_s = prom.samples("scrape_duration_seconds")
                scrapes = {job: len(v) for job, v in prom.samples("up").items()}
                series = prom.query("scrape_samples_scraped")
            cpu = {job: (cpu_seconds(p.pid) - cpu_before[job]) / max(scrapes.get(job, 1), 1)
                   for job, p in procs.items()}
            mem = {job: memory_kib(p.pid) for job, p in procs.items()}
            durations = collector_durations(ns[0], 19881)
        finally:
            for p in procs.values():
                p.terminate()
                p.wait()
    for job in procs:
        if not durations_s.get(job):
            raise RuntimeError(f"Prometheus has no scrape_duration_seconds for job {job}")
    median = {job: quantile(v, 0.5) for job, v in durations_s.items()}
    p90 = {job: quantile(v, 0.9) for job, v in durations_s.items()}
    lines = [
        f"# Large host: {DEVICES} RDMA devices x {PORTS} ports ({HW_COUNTERS} hw_counters and "
        f"{len(PORT_COUNTERS)} port counters each), {args.interfaces} veths; real Prometheus "
        f"at 2 s for {args.seconds} s, one run",
        "",
        "| exporter | samples/scrape | median ms | p90 ms | CPU ms/scrape | RSS MiB | peak MiB |",
        "|---|---|---|---|---|---|---|",
    ]
    for job, name in [("rdmascope", "rdmascope serve"),
                      ("node", "node_exporter ethtool+infiniband")]:
        lines.append(f"| {name} | {series.get(job, 0):.0f} | {median.get(job, 0) * 1e3:.2f} | "
                     f"{p90.get(job, 0) * 1e3:.2f} | {cpu[job] * 1e3:.2f} | "
                     f"{mem[job]['VmRSS'] / 1024:.1f} | {mem[job]['VmHWM'] / 1024:.1f} |")
    ours, theirs = median.get("rdmascope", 0), median.get("node", 0)
    lines += ["", f"Median ratio (node_exporter / rdmascope): {theirs / ours:.1f}x; rdmascope "
              f"{ours * 1e6 / max(series.get('rdmascope', 1), 1):.2f} us per sample.", "",
              "rdmascope per collector (ms): " +
              ", ".join(f"{c} {ms:.3f}" for c, ms in durations.items()), ""]
    report = "\n".join(lines)
    with open(os.path.join(args.outdir, "large_host_bench.md"), "w") as f:
        f.write(report)
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
