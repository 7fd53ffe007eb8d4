#!/usr/bin/env python3
"""The vendor matrix's counter scenarios (docs/vendor-matrix.md, issue 26): CRC burst and
receive starvation (RNR) per driver, and which hw_counters are gauges and where the PMA
counters saturate. The tables are read from the doc, so the doc and the code cannot drift.

On the captures under tests/captures/ (tests/captures/make_capture.py; issue 39), each row's
device in exactly one, for every row of "Counter scenarios, tested":
0. the row's file (a sysfs path) holds the row's "before" in the capture's first sample and its
   "after" in the second;
1. `rdmascope serve --replay CAPTURE` scraped once per sample: the series has each value;
2. the two scrapes of every capture as one `promtool test rules` case (each capture its own
   instance): every series at its first value for 30 minutes, then growing by (after - before)
   a minute; at 45m the alerts firing for each device are exactly the row's, among every alert
   the table names, and the recording rule the row names has the row's rate (per second);
3. `rdmascope doctor --exporter` on that serve: its counter checks compare the collection at the
   request (the last sample, repeating) with serve's first one (the first sample), so the row's
   checks have its severities; and `doctor --replay CAPTURE`, its rates between the first and
   the last sample (matrix_captures.doctor_replay), the same.
And for every row of "hw_counters that are gauges, and PMA widths, tested", from the first
scrape: the file is exported in the family the row names, and not in the other one.

The CRC rows' interfaces answer the ethtool collector's ioctls (SIOCGIFINDEX, SIOCETHTOOL)
from the capture, which has no `ethtool -S` CRC name for them: the collector reads their sysfs
statistics/rx_crc_errors, as it does on a NIC outside its driver table.

Usage: vendor_matrix_counters.py RDMASCOPE SOURCE_DIR"""

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import matrix_captures  # noqa: E402



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


def instance(shape):
    return f"{shape}:9879"


def promtool_case(scrapes, rows, rules_file):
    """Every rdma_* series of each capture's second scrape (`scrapes`: {shape: (first,
    second)}; the capture is the series' instance): its first value for 30m, then growing by
    (second - first) a minute for 30m. Tests at 45m: the watched alerts firing per device, and
    each row's recorded rate."""
    series = []
    for shape, (first, second) in sorted(scrapes.items()):
        for (name, frozen), value in sorted(second.items(),
                                            key=lambda kv: (kv[0][0], sorted(kv[0][1]))):
            if not name.startswith("rdma_"):
                continue
            labels = {**dict(frozen), "instance": instance(shape)}
            start = first.get((name, frozen), value)
            step = value - start
            grow = (f"{num(value)}+{num(step)}x29" if step >= 0
                    else f"{num(value)}-{num(-step)}x29")
            series.append({"series": selector(name, labels),
                           "values": f"{num(start)}x29 {grow}"})
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
                                                         "instance": instance(row["shape"])}),
                                 "value": rate}],
            })
    return {"rule_files": [rules_file], "evaluation_interval": "1m",
            "tests": [{"interval": "1m", "input_series": series, "promql_expr_test": tests}]}


def row_shape(capture_dirs, row):
    """The capture that holds the row's device (an RDMA device, or a netdev for the CRC rows)."""
    kind = "net" if row["file"].startswith("class/net/") else "infiniband"
    return matrix_captures.holder(capture_dirs, f"class/{kind}/{row['device']}")


def main(binary, source):
    doc = os.path.join(source, "docs", "vendor-matrix.md")
    rows, gauges = scenario_rows(doc), gauge_rows(doc)
    if len(rows) < 8 or len(gauges) < 6:
        print(f"FAIL: only {len(rows)} scenario and {len(gauges)} gauge rows read from {doc}")
        return 1
    checks = harness.Checker()
    expect, failures = checks.expect, checks.failures
    capture_dirs = matrix_captures.captures(source)

    # 0. Each row in one capture, its file holding "before" then "after" (the gauges: value).
    for row in rows + gauges:
        row["shape"] = row_shape(capture_dirs, row)
        expect(f"{row['device']} ({row['what']}): in exactly one capture",
               row["shape"] is not None, True)
    rows = [row for row in rows if row["shape"]]
    gauges = [row for row in gauges if row["shape"]]
    for row in rows:
        capture = capture_dirs[row["shape"]]
        for n, want in ((1, row["before"]), (2, row["after"])):
            text = matrix_captures.sample_file(capture, n, row["file"])
            expect(f"{row['shape']} sample {n}: {row['file']} holds the row's value",
                   None if text is None else float(text), want)
    for row in gauges:
        path = f"class/infiniband/{row['device']}/ports/1/{row['file']}"
        text = matrix_captures.sample_file(capture_dirs[row["shape"]], 1, path)
        expect(f"{row['shape']}: {path} holds the row's value",
               None if text is None else float(text), row["value"])

    scrapes, findings, replayed = {}, {}, {}
    for shape in sorted({row["shape"] for row in rows + gauges}):
        with matrix_captures.Replay(binary, capture_dirs[shape]) as replay:
            taken = replay.scrapes()
            scrapes[shape] = (taken[0], taken[-1])
            findings[shape] = replay.doctor()
        replayed[shape] = matrix_captures.doctor_replay(binary, capture_dirs[shape])

    # 1. The series, before and after.
    for row in rows:
        first, second = scrapes[row["shape"]]
        what = f"{row['device']} ({row['what']}, {row['shape']}): {row['series']}"
        labels = series_labels(row)
        expect(what + " before", harness.value(first, row["series"], **labels), row["before"])
        expect(what + " after", harness.value(second, row["series"], **labels), row["after"])

    # 2. The alerts and recorded rates, from the two scrapes of every capture.
    case = promtool_case(scrapes, rows, os.path.join(source, "rules", "rdmascope.rules.yml"))
    returncode, _ = matrix_captures.promtool_test(case, "matrix-counters")
    expect("alerts firing and recorded rates are the table's (promtool)", returncode, 0)

    # 3. Doctor: the row's checks, on its device (or netdev), and file where they name one; from
    # serve's /doctor and from doctor --replay.
    for row in rows:
        for source_name, report in (("doctor", findings[row["shape"]]),
                                    ("doctor --replay", replayed[row["shape"]])):
            for check, severity in row["doctor"]:
                got = sorted({f["severity"] for f in report if f["id"] == check
                              and row["device"] in (f["scope"].get("device"),
                                                    f["scope"].get("netdev"))
                              and f["scope"].get("counter", os.path.basename(row["file"]))
                              == os.path.basename(row["file"])})
                expect(f"{row['device']} ({row['what']}): {source_name} {check}", got,
                       [severity] if severity else [])

    # 4. Gauges and saturation: in the row's family, absent from the other.
    other = {"rdma_port_hw_value": "rdma_port_hw_counter_total",
             "rdma_port_hw_counter_total": "rdma_port_hw_value"}
    for row in gauges:
        first = scrapes[row["shape"]][0]
        counter = os.path.basename(row["file"])
        what = f"{row['device']} {row['file']} ({row['what']})"
        if row["series"] is None:
            for family in other:
                expect(f"{what}: not in {family}",
                       harness.value(first, family, device=row["device"], counter=counter), None)
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
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
