#!/usr/bin/env python3
"""The vendor matrix's counter scenarios (docs/vendor-matrix.md, issue 26): CRC burst and
receive starvation (RNR) per driver, and which hw_counters are gauges and where the PMA
counters saturate. The tables are read from the doc, so the doc and the code cannot drift.

On tests/fixtures/sysfs/counter_cases.tree, for every row of "Counter scenarios, tested":
1. `rdmascope serve --path.sysfs=TREE` scraped once (the counter as the tree has it, the
   row's "before"), the row's file rewritten to "after", scraped again: the series has each value;
2. the two scrapes as a `promtool test rules` case: every series at its first value for 30
   minutes, then growing by (after - before) a minute; at 45m the alerts firing for each device
   are exactly the row's, among every alert the table names, and the recording rule the row
   names has the row's rate (per second);
3. `rdmascope doctor --exporter` on that serve: its counter checks compare the collection at the
   request with serve's first one (the tree before), so the row's checks have its severities.
And for every row of "hw_counters that are gauges, and PMA widths, tested", from the first
scrape: the file is exported in the family the row names, and not in the other one.

The CRC rows need the netdev itself: the ethtool collector asks the kernel (SIOCETHTOOL) for an
interface of that name before it reads its sysfs statistics. So the test runs in a network
namespace of its own (`unshare --user --map-root-user --net`: no root needed), where a veth pair
stands for each interface under class/net. Where no namespace can be made, those rows are
skipped (said on stdout, exit code 77 if nothing failed) and the others still run.

Usage: vendor_matrix_counters.py RDMASCOPE SOURCE_DIR"""

import json
import os
import re
import subprocess
import sys
import tempfile

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

INSTANCE = "matrix:9879"
IN_NAMESPACE = "RDMASCOPE_MATRIX_NETNS"  # set in the re-executed child


def table(doc, heading):
    """The rows (lists of stripped cells) of the last table under `## heading`: the tested one,
    after any the section shows for reference."""
    with open(doc, encoding="utf-8") as f:
        text = f.read()
    if f"## {heading}" not in text:
        raise SystemExit(f"FAIL: no section '## {heading}' in {doc}")
    section = text.split(f"## {heading}", 1)[1].split("\n## ", 1)[0]
    tables, previous = [], False
    for line in section.splitlines():
        is_row = line.startswith("|")
        if is_row and not previous:
            tables.append([])
        if is_row and not line.startswith("|---"):
            tables[-1].append([c.strip() for c in line.strip().strip("|").split("|")])
        previous = is_row
    return tables[-1][1:] if tables else []  # without the header


def code(cell):
    """The first `...` of a cell, or None."""
    match = re.search(r"`([^`]+)`", cell)
    return match.group(1) if match else None


def scenario_rows(doc):
    rows = []
    for cells in table(doc, "Counter scenarios, tested"):
        if len(cells) != 9:
            raise SystemExit(f"FAIL: counter scenario row has {len(cells)} cells: {cells}")
        before, after = (float(v) for v in cells[4].split("→"))
        recorded = None
        if cells[7] != "-":
            name, rate = cells[7].split("=")
            recorded = (code(name), float(rate))
        doctor = []
        for part in cells[8].split(";"):
            check, severity = code(part), part.split("`")[-1].strip()
            doctor.append((check, None if severity == "-" else severity))
        rows.append({
            "what": f"{cells[0]}, {cells[1]}", "device": code(cells[2]), "file": code(cells[3]),
            "before": before, "after": after, "series": code(cells[5]),
            "alerts": set() if cells[6] == "none" else set(re.findall(r"Rdma\w+", cells[6])),
            "recorded": recorded, "doctor": doctor,
        })
    return rows


def gauge_rows(doc):
    rows = []
    for cells in table(doc, "hw_counters that are gauges, and PMA widths, tested"):
        if len(cells) != 6:
            raise SystemExit(f"FAIL: gauge row has {len(cells)} cells: {cells}")
        rows.append({"what": cells[0], "device": code(cells[1]), "file": code(cells[2]),
                     "value": float(cells[3]), "series": code(cells[4]),
                     "series_value": None if cells[5] == "-" else float(cells[5])})
    return rows


def series_labels(row):
    labels = {"device": row["device"]}
    if row["series"] in ("rdma_port_hw_counter_total", "rdma_port_hw_value",
                         "rdma_port_stat_total", "rdma_port_stat_saturated"):
        labels["counter"] = os.path.basename(row["file"])
    return labels


def num(v):
    return str(int(v)) if v == int(v) else format(v, "f")


def selector(name, labels):
    escaped = {k: v.replace("\\", "\\\\").replace('"', '\\"') for k, v in labels.items()}
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(escaped.items())) + "}"


def promtool_case(first, second, rows, rules_file):
    """Every rdma_* series of the second scrape: its first value for 30m, then growing by
    (second - first) a minute for 30m. Tests at 45m: the watched alerts firing per device, and
    each row's recorded rate."""
    series = []
    for (name, frozen), value in sorted(second.items(), key=lambda kv: (kv[0][0], sorted(kv[0][1]))):
        if not name.startswith("rdma_"):
            continue
        labels = {**dict(frozen), "instance": INSTANCE}
        start = first.get((name, frozen), value)
        step = value - start
        grow = f"{num(value)}+{num(step)}x29" if step >= 0 else f"{num(value)}-{num(-step)}x29"
        series.append({"series": selector(name, labels), "values": f"{num(start)}x29 {grow}"})
    watched = sorted(set().union(*(row["alerts"] for row in rows)))
    firing = {(alert, row["device"]) for row in rows for alert in row["alerts"]}
    tests = [{
        "expr": 'count by (alertname, device) (ALERTS{alertstate="firing",alertname=~"'
                + "|".join(watched) + '"})',
        "eval_time": "45m",
        "exp_samples": [{"labels": f'{{alertname="{a}",device="{d}"}}', "value": 1}
                        for a, d in sorted(firing)],
    }]
    for row in rows:
        if row["recorded"]:
            name, rate = row["recorded"]
            tests.append({
                "expr": f'round({name}{{device="{row["device"]}"}}, 0.001)',
                "eval_time": "45m",
                # round() drops the metric name: the sample is its labels alone.
                "exp_samples": [{"labels": selector("", {"device": row["device"], "port": "1",
                                                         "instance": INSTANCE}),
                                 "value": rate}],
            })
    return {"rule_files": [rules_file], "evaluation_interval": "1m",
            "tests": [{"interval": "1m", "input_series": series, "promql_expr_test": tests}]}


def make_netdevs(tree):
    """A veth pair per interface under class/net (in this private namespace), and lo up."""
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    for index, name in enumerate(sorted(os.listdir(os.path.join(tree, "class", "net")))):
        subprocess.run(["ip", "link", "add", name, "type", "veth", "peer", "name", f"mpeer{index}"],
                       check=True)


def can_unshare():
    try:
        probe = subprocess.run(["unshare", "--user", "--map-root-user", "--net", "ip", "link",
                                "add", "probe0", "type", "veth", "peer", "name", "probe1"],
                               capture_output=True, text=True)
    except FileNotFoundError as e:  # no util-linux unshare
        print("no private network namespace:", e)
        return False
    if probe.returncode != 0:
        print("no private network namespace (unshare --user --net, ip link add veth):",
              (probe.stderr or probe.stdout).strip())
    return probe.returncode == 0


def run(binary, source, have_netdevs):
    doc = os.path.join(source, "docs", "vendor-matrix.md")
    rows, gauges = scenario_rows(doc), gauge_rows(doc)
    if len(rows) < 8 or len(gauges) < 6:
        print(f"FAIL: only {len(rows)} scenario and {len(gauges)} gauge rows read from {doc}")
        return 1
    failures, skipped = [], []

    def expect(what, got, want):
        ok = got == want
        print(("ok" if ok else "FAIL") + f": {what}: {got}" + ("" if ok else f" (want {want})"))
        if not ok:
            failures.append(what)

    if not have_netdevs:
        skipped = [row for row in rows if row["file"].startswith("class/net/")]
        for row in skipped:
            print(f"SKIP: {row['device']} ({row['what']}): needs the interface in a namespace")
        rows = [row for row in rows if row not in skipped]

    with tempfile.TemporaryDirectory(prefix="rdmascope-matrix-counters-") as work:
        tree = os.path.join(work, "sys")
        harness.materialise_tree(
            os.path.join(source, "tests", "fixtures", "sysfs", "counter_cases.tree"), tree)
        for row in rows:  # the tree holds each row's "before", the gauge rows' value
            with open(os.path.join(tree, row["file"])) as f:
                expect(f"{row['file']} holds the row's before", float(f.read()), row["before"])
        for row in gauges:
            path = os.path.join(tree, "class", "infiniband", row["device"], "ports", "1",
                                row["file"])
            with open(path) as f:
                expect(f"{path} holds the row's value", float(f.read()), row["value"])
        if have_netdevs:
            make_netdevs(tree)

        args = ["--collector.disable-defaults", "--collector.rdma", "--collector.ethtool",
                "--no-collector.ethtool.pfc", f"--path.sysfs={tree}"]
        with harness.Exporter(binary, args) as exporter:
            first = harness.parse(exporter.metrics())
            for row in rows:
                with open(os.path.join(tree, row["file"]), "w") as f:
                    f.write(num(row["after"]) + "\n")
            second = harness.parse(exporter.metrics())
            doctor = subprocess.run([binary, "doctor", f"--exporter=http://127.0.0.1:{exporter.port}",
                                     "--format", "json"], capture_output=True, text=True,
                                    timeout=60)
        try:
            findings = json.loads(doctor.stdout)["findings"]
        except (json.JSONDecodeError, KeyError) as e:
            print(f"FAIL: doctor's output is not its JSON report ({e}):\n{doctor.stdout}\n"
                  f"{doctor.stderr}")
            return 1

        # 1. The series, before and after.
        for row in rows:
            what = f"{row['device']} ({row['what']}): {row['series']}"
            labels = series_labels(row)
            expect(what + " before", harness.value(first, row["series"], **labels), row["before"])
            expect(what + " after", harness.value(second, row["series"], **labels), row["after"])

        # 2. The alerts and recorded rates, from the two scrapes.
        case = promtool_case(first, second, rows,
                             os.path.join(source, "rules", "rdmascope.rules.yml"))
        test_file = os.path.join(work, "matrix_counters.rules.test.yml")
        with open(test_file, "w") as f:
            yaml.safe_dump(case, f, sort_keys=False)
        promtool = subprocess.run(["promtool", "test", "rules", test_file], capture_output=True,
                                  text=True, timeout=120)
        print(promtool.stdout.strip(), promtool.stderr.strip())
        expect("alerts firing and recorded rates are the table's (promtool)", promtool.returncode,
               0)

        # 3. Doctor: the row's checks, on its device (or netdev), and file where they name one.
        for row in rows:
            for check, severity in row["doctor"]:
                got = sorted({f["severity"] for f in findings if f["id"] == check
                              and row["device"] in (f["scope"].get("device"),
                                                    f["scope"].get("netdev"))
                              and f["scope"].get("counter", os.path.basename(row["file"]))
                              == os.path.basename(row["file"])})
                expect(f"{row['device']} ({row['what']}): doctor {check}", got,
                       [severity] if severity else [])

        # 4. Gauges and saturation: in the row's family, absent from the other.
        other = {"rdma_port_hw_value": "rdma_port_hw_counter_total",
                 "rdma_port_hw_counter_total": "rdma_port_hw_value"}
        for row in gauges:
            counter = os.path.basename(row["file"])
            what = f"{row['device']} {row['file']} ({row['what']})"
            if row["series"] is None:
                for family in other:
                    expect(f"{what}: not in {family}",
                           harness.value(first, family, device=row["device"], counter=counter),
                           None)
                continue
            expect(f"{what}: {row['series']}",
                   harness.value(first, row["series"], device=row["device"], counter=counter),
                   row["series_value"])
            if row["series"] in other:
                expect(f"{what}: not in {other[row['series']]}",
                       harness.value(first, other[row["series"]], device=row["device"],
                                     counter=counter), None)
    if failures:
        print(f"{len(failures)} of the matrix's counter checks failed")
        return 1
    return harness.SKIP if skipped else 0


def main(binary, source):
    if os.environ.get(IN_NAMESPACE):
        return run(binary, source, have_netdevs=True)
    if can_unshare():
        child = subprocess.run(["unshare", "--user", "--map-root-user", "--net", sys.executable,
                                os.path.abspath(__file__), binary, source],
                               env={**os.environ, IN_NAMESPACE: "1"})
        return child.returncode
    return run(binary, source, have_netdevs=False)


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
