#!/usr/bin/env python3
"""`rdmascope doctor` against the fixture sysfs tree (rdma_hosts.tree), as an operator runs it:
JSON on stdout only (logs on stderr), schema_version 1, the MTU findings of every port, the
IBA error counter over infiniband-diags' threshold, exit codes (Nagios) and --fail-on.

The tree has no libibverbs device and no RDMA netlink behind it, so doctor sees no active/max
MTU and no port netdev: the MTU checks must say so (skip, with the reason) rather than call the
ports healthy."""

import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402

ETHERNET_PORTS = {("irdma0", "1"), ("mlx5_0", "1"), ("rxe0", "1")}
ALL_PORTS = ETHERNET_PORTS | {("mlx5_1", "1")}


def doctor(binary, sysfs, *args):
    # --exporter=none: a serve another test runs on 9879 must not answer for the tree.
    return subprocess.run([binary, "doctor", "--exporter=none", "--collector.disable-defaults",
                           "--collector.rdma",
                           "--collector.ethtool", f"--path.sysfs={sysfs}", *args],
                          capture_output=True, text=True, timeout=60)


def by_id(report, check_id):
    return [f for f in report["findings"] if f["id"] == check_id]


def port(finding):
    return (finding["scope"].get("device"), finding["scope"].get("port"))


def main(binary, fixtures):
    failures = []

    def expect(condition, message):
        if not condition:
            failures.append(message)

    with tempfile.TemporaryDirectory(prefix="rdmascope-doctor-") as sysfs:
        harness.materialise_tree(os.path.join(fixtures, "sysfs", "rdma_hosts.tree"), sysfs)
        run = doctor(binary, sysfs, "--format", "json", "--window", "0s")
        try:
            report = json.loads(run.stdout)  # stdout holds the document and nothing else
        except json.JSONDecodeError as e:
            print(f"stdout is not JSON ({e}):\n{run.stdout}\nstderr:\n{run.stderr}")
            return 1
        expect("level=" in run.stderr and "level=" not in run.stdout, "logs belong on stderr")
        expect(report["schema_version"] == 1, report.get("schema_version"))
        expect(report["window_seconds"] == 0, report["window_seconds"])
        expect(sum(report["summary"].values()) == len(report["findings"]), report["summary"])

        netdev_mtu = by_id(report, "roce.netdev_mtu")
        expect({port(f) for f in netdev_mtu} == ETHERNET_PORTS, netdev_mtu)
        for f in netdev_mtu:
            expect(f["severity"] == "skip" and "no netdev" in f["observed"], f)
        active_mtu = by_id(report, "links.active_mtu")
        expect({port(f) for f in active_mtu} == ALL_PORTS, active_mtu)
        for f in active_mtu:
            expect(f["severity"] == "skip" and "ibv_query_port" in f["observed"], f)

        # mlx5_1's symbol_error file holds 31: over SymbolErrorCounter=10.
        iba = [f for f in by_id(report, "links.iba_errors") if f["severity"] == "warn"]
        expect([(port(f), f["scope"]["counter"]) for f in iba] == [(("mlx5_1", "1"), "symbol_error")],
               iba)
        expect(iba and iba[0]["advice"].startswith("SymbolErrorCounter is 31, 21 over"), iba)
        for f in by_id(report, "links.symbol_errors"):
            expect(f["severity"] == "skip" and "--window" in f["observed"], f)
        for f in by_id(report, "queues.cq_capacity"):
            expect(f["severity"] == "skip" and "verbs is disabled" in f["observed"], f)
        expect(report["summary"]["crit"] == 0 and report["summary"]["warn"] >= 1, report["summary"])
        expect(run.returncode == 1, f"worst is warn: exit 1, got {run.returncode}")

        # The same with --fail-on=crit: warnings do not fail.
        expect(doctor(binary, sysfs, "--format", "json", "--window", "0s",
                      "--fail-on=crit").returncode == 0, "--fail-on=crit with only warnings")
        # A raised threshold silences the finding.
        quiet = doctor(binary, sysfs, "--format", "json", "--window", "0s",
                       "--doctor.iba-threshold", "SymbolErrorCounter=100")
        # What remains is roce.gid_index on irdma0, whose GID table has only a link-local RoCE v2
        # entry (no address on ens801f0); mlx5_0 names its IPv4 RoCE v2 index.
        quiet_report = json.loads(quiet.stdout)
        left = [(f["id"], port(f)) for f in quiet_report["findings"]
                if f["severity"] in ("info", "warn", "crit")]
        expect(left == [("roce.gid_index", ("irdma0", "1"))], left)
        expect(quiet.returncode == 1, f"threshold 100, gid warning left: exit {quiet.returncode}")
        gid = {port(f): f for f in by_id(quiet_report, "roce.gid_index")}
        expect(gid.get(("mlx5_0", "1"), {}).get("observed") ==
               "GID index 3 (RoCE v2, IPv4 192.168.10.11)", gid)

        # Two collections: the counter checks run (the fixture's counters do not move).
        windowed = doctor(binary, sysfs, "--format", "json", "--window", "200ms")
        symbol = by_id(json.loads(windowed.stdout), "links.symbol_errors")
        expect(symbol and all(f["severity"] == "ok" for f in symbol), symbol)

        # Text for a person: no colour when stdout is not a terminal.
        text = doctor(binary, sysfs, "--window", "0s")
        expect("== Links and ports ==" in text.stdout and "\033" not in text.stdout, text.stdout)
        expect("[WARN] links.iba_errors  device=mlx5_1 port=1 counter=symbol_error"
               in text.stdout, text.stdout)

    # Doctor that cannot run is UNKNOWN (3), with the reason on stderr.
    for args, reason in ((["--window", "10x"], "not a duration"),
                         (["--path.sysfs=/nonexistent"], "not a directory"),
                         (["--doctor.iba-threshold", "Bogus=1"], "unknown IBA counter"),
                         (["--doctor.cq-ratio-crit", "2"], "cq-ratio"),
                         (["--bogus"], "not expected"),
                         (["--window", "0s", "--collector.disable-defaults", "--collector.mr",
                           "--probe.strict", "--probe.library=/etc/hostname"],
                          "doctor could not run")):
        bad = subprocess.run([binary, "doctor", *args], capture_output=True, text=True, timeout=60)
        expect(bad.returncode == 3 and reason in bad.stderr and bad.stdout == "",
               f"doctor {args}: rc={bad.returncode} stderr={bad.stderr!r}")

    for failure in failures:
        print("FAIL:", failure)
    if not failures:
        print("doctor on the fixture tree: JSON, MTU findings, exit codes as expected")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
