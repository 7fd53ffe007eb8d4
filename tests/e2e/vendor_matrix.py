#!/usr/bin/env python3
"""The vendor matrix (docs/vendor-matrix.md, issue 26): for every row of its tested table, the
exporter's series, the RdmaPortDown alert and doctor's links.port_state finding are what the
row says, on the captures that write each driver's port as its query_port does
(tests/captures/<shape>/, made by tests/captures/make_capture.py; issue 39). The table is read
from the doc, so the doc and the code cannot drift apart.

For each capture (each row's device is in exactly one):
1. `rdmascope serve --replay CAPTURE` (netdevs from sysfs alone: the captures' RDMA netlink
   socket answers EOPNOTSUPP), one scrape per sample: state, physical state,
   rdma_port_netdev_admin_up and _carrier of each row's device, in every sample;
2. the last scrape turned into a `promtool test rules` case against rules/rdmascope.rules.yml:
   every port ACTIVE + LinkUp for 30 minutes, then what was scraped; RdmaPortDown firing at 45m
   for exactly the rows that say "fires" (read from the ALERTS series, so the case does not
   depend on annotation texts);
3. `rdmascope doctor --exporter` against that serve (its /doctor runs the checks on the replay):
   links.port_state's severity per device; and the same from `doctor --replay CAPTURE`
   (matrix_captures.doctor_replay).

Usage: vendor_matrix.py RDMASCOPE SOURCE_DIR"""

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import matrix_captures  # noqa: E402


def matrix_rows(doc):
    """{device: row} from the table under "## The matrix, tested"."""
    with open(doc, encoding="utf-8") as f:
        text = f.read()
    section = text.split("## The matrix, tested", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 7 or not cells[2].startswith("`"):
            continue
        state, phys = (c.strip() for c in cells[3].split("/"))
        admin, carrier = (c.strip() for c in cells[4].split("/"))
        rows[cells[2].strip("`")] = {
            "what": f"{cells[0]}, {cells[1]}",
            "state": float(state), "phys": float(phys),
            "admin_up": None if admin == "-" else float(admin),
            "carrier": None if carrier == "-" else float(carrier),
            "fires": {"fires": True, "quiet": False}[cells[5]],
            "doctor": cells[6],
        }
    return rows


def promtool_case(samples, devices, rules_file):
    """A promtool test: each device's port up for 30m, then its scraped series for 30m.
    `samples`: {device: (its capture's shape, that capture's last scrape)}."""
    series = []
    for device in devices:
        shape, scrape = samples[device]
        key = {"instance": f"{shape}:9879", "device": device, "port": "1"}
        labels = lambda extra=None: "{" + ",".join(
            f'{k}="{v}"' for k, v in {**key, **(extra or {})}.items()) + "}"
        state = harness.value(scrape, "rdma_port_state", device=device)
        phys = harness.value(scrape, "rdma_port_physical_state", device=device)
        series.append({"series": "rdma_port_state" + labels(),
                       "values": f"4x29 {state:g}x30"})
        series.append({"series": "rdma_port_physical_state" + labels(),
                       "values": f"5x29 {phys:g}x30"})
        for name in ("rdma_port_netdev_admin_up", "rdma_port_netdev_carrier"):
            value = harness.value(scrape, name, device=device)
            if value is not None:
                series.append({"series": name + labels(), "values": f"{value:g}x59"})
        for (name, frozen), _ in scrape.items():
            info = dict(frozen)
            if name == "rdma_port_info" and info.get("device") == device:
                series.append({"series": "rdma_port_info" + labels(
                    {k: v for k, v in info.items() if k not in key}), "values": "1x59"})
    return {
        "rule_files": [rules_file],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": series,
            "promql_expr_test": [{
                "expr": 'count by (device) (ALERTS{alertname="RdmaPortDown",'
                        'alertstate="firing"})',
                "eval_time": "45m",
                "exp_samples": None,  # filled by the caller
            }],
        }],
    }


def main(binary, source):
    rows = matrix_rows(os.path.join(source, "docs", "vendor-matrix.md"))
    if len(rows) < 8:
        print(f"FAIL: only {len(rows)} rows read from docs/vendor-matrix.md")
        return 1
    checks = harness.Checker()
    expect, failures = checks.expect, checks.failures
    capture_dirs = matrix_captures.captures(source)

    # Each row's device is in one capture: the one whose first sample has it.
    shapes = {}
    for device, row in sorted(rows.items()):
        shape = matrix_captures.holder(capture_dirs, f"class/infiniband/{device}")
        expect(f"{device} ({row['what']}): in exactly one capture", shape is not None, True)
        if shape:
            shapes.setdefault(shape, []).append(device)

    last, severity, replayed_severity = {}, {}, {}
    for shape, devices in sorted(shapes.items()):
        capture = capture_dirs[shape]
        # 1. The exporter's series, in every sample.
        with matrix_captures.Replay(binary, capture) as replay:
            scrapes = replay.scrapes()
            findings = replay.doctor()
        for device in devices:
            row, what = rows[device], f"{device} ({rows[device]['what']}, {shape})"
            for n, samples in enumerate(scrapes, 1):
                expect(f"{what}: state, sample {n}",
                       harness.value(samples, "rdma_port_state", device=device), row["state"])
                expect(f"{what}: physical state, sample {n}",
                       harness.value(samples, "rdma_port_physical_state", device=device),
                       row["phys"])
                expect(f"{what}: netdev admin_up, sample {n}",
                       harness.value(samples, "rdma_port_netdev_admin_up", device=device),
                       row["admin_up"])
                expect(f"{what}: netdev carrier, sample {n}",
                       harness.value(samples, "rdma_port_netdev_carrier", device=device),
                       row["carrier"])
            last[device] = (shape, scrapes[-1])
        for f in findings:
            if f["id"] == "links.port_state" and f["scope"].get("device") in devices:
                severity[f["scope"]["device"]] = f["severity"]
        for f in matrix_captures.doctor_replay(binary, capture):
            if f["id"] == "links.port_state" and f["scope"].get("device") in devices:
                replayed_severity[f["scope"]["device"]] = f["severity"]

    # 2. The alert, from the last scrape of each capture.
    case = promtool_case(last, sorted(last), os.path.join(source, "rules", "rdmascope.rules.yml"))
    case["tests"][0]["promql_expr_test"][0]["exp_samples"] = [
        {"labels": f'{{device="{device}"}}', "value": 1}
        for device, row in sorted(rows.items()) if row["fires"]]
    returncode, output = matrix_captures.promtool_test(case, "matrix")
    expect("RdmaPortDown fires for exactly the rows that say so (promtool)", returncode, 0)
    if returncode != 0:
        got = set(re.findall(r'device="([^"]+)"', output.split("got:", 1)[-1]))
        print("firing:", sorted(got), "want:", sorted(d for d, r in rows.items() if r["fires"]))

    # 3. Doctor on each replay, through serve's /doctor and by doctor --replay.
    for device, row in sorted(rows.items()):
        expect(f"{device} ({row['what']}): doctor links.port_state", severity.get(device),
               row["doctor"])
        expect(f"{device} ({row['what']}): doctor --replay links.port_state",
               replayed_severity.get(device), row["doctor"])
    if failures:
        print(f"{len(failures)} of the matrix's checks failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
