#!/usr/bin/env python3
"""The vendor matrix's link scenarios (docs/vendor-matrix.md "Link scenarios, tested", issue
40), replayed from the captures make_capture.py builds with each driver's FEC, link-mode and
link-state replies and module pages. The table is read from the doc, so doc and code cannot
drift. For every row:
1. `rdmascope serve --replay CAPTURE`, one scrape per sample: the row's series (labels: the
   row's netdev and those the series cell names) has the row's value in each sample (`-`:
   absent);
2. the scrapes of every link shape as one `promtool test rules` case, each capture its own
   instance: every rdma_* series at its first scrape's value for 30 minutes, then growing at
   its capture's rate (the two samples are 10 s apart: the difference x 6 a minute); a series
   absent from the first scrape is missing for those 30 minutes, then holds the second's value;
   one absent from the second is missing after them. The row's alert (on its netdev and
   instance, and the labels the cell names) is quiet and firing at the minutes the row says:
   a pre-FEC BER rising past the warn band only once the 12-minute window holds the rise;
3. doctor, through that serve (/doctor) and `doctor --replay CAPTURE` (rates between the two
   samples, 10 s apart): the row's finding on its netdev (and lane) has its severity.
And: the down edge's event on /debug/links, with its reason, at the capture's sample-2 time
(index.json), not the replay's clock; every shape whose spec has no link sources says each
source is unavailable (rdma_link_source_available 0 but for ib_counters) and has no FEC or
module series.

Usage: link_captures.py RDMASCOPE SOURCE_DIR"""

import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
import matrix_captures  # noqa: E402
from vendor_matrix_counters import code, instance, num, selector, table  # noqa: E402

HELD_MINUTES = 30  # the first scrape's values held this long before the capture's rate
SAMPLE_SECONDS = 10  # make_capture.py's two samples

ALERT = re.compile(r"^(Rdma\w+)(\{[^}]*\})?((?:\s*,?\s*(?:quiet|firing) at \d+m)+)$")
TIMES = re.compile(r"(quiet|firing) at (\d+)m")
SERIES = re.compile(r"^(\w+)(\{[^}]*\})?$")


def labels_of(text):
    return dict(re.findall(r'(\w+)="([^"]*)"', text or ""))


def number(cell):
    return None if cell == "-" else float(cell)


def rounded(value):
    """12 significant digits: 150 x 0.1 uW is 1.5e-05 in the table, 1.4999999999999999e-05 in
    a double."""
    return None if value is None else float(f"{value:.12g}")


def rows(doc):
    out = []
    for cells in table(doc, "Link scenarios, tested"):
        if len(cells) != 8:
            raise SystemExit(f"FAIL: link scenario row has {len(cells)} cells: {cells}")
        series = SERIES.match(code(cells[3]) or "")
        if not series:
            raise SystemExit(f"FAIL: no series in {cells[3]!r}")
        alert = None
        if cells[6] != "none":
            match = ALERT.match(cells[6].replace("`", "").strip())
            if not match:
                raise SystemExit(f"FAIL: alert cell not understood: {cells[6]!r}")
            alert = {"name": match.group(1), "labels": labels_of(match.group(2)),
                     "times": [(state, int(minute))
                               for state, minute in TIMES.findall(match.group(3))]}
        doctor = None
        if cells[7] != "-":
            check, severity = code(cells[7]), cells[7].split("`")[-1].strip()
            doctor = (check, severity)
        out.append({"shape": code(cells[0]), "netdev": code(cells[1]), "what": cells[2],
                    "series": series.group(1), "labels": labels_of(series.group(2)),
                    "first": number(cells[4]), "second": number(cells[5]),
                    "alert": alert, "doctor": doctor})
    return out


def grown(first, second):
    """A series' promtool values: held, then growing at the capture's rate (module 2 doc)."""
    held = HELD_MINUTES - 1
    if first is None:
        return " ".join(["_"] * HELD_MINUTES) + f" {num(second)}x{held}"
    if second is None:
        return f"{num(first)}x{held} " + " ".join(["_"] * HELD_MINUTES)
    step = (second - first) * 60 / SAMPLE_SECONDS
    sign = "+" if step >= 0 else "-"
    return f"{num(first)}x{held} {num(second)}{sign}{num(abs(step))}x{held}"


def promtool_case(scrapes, checks, rules_file):
    series = []
    for shape, (first, second) in sorted(scrapes.items()):
        keys = sorted(set(first) | set(second), key=lambda k: (k[0], sorted(k[1])))
        for key in keys:
            name, frozen = key
            if not name.startswith("rdma_"):
                continue
            labels = {**dict(frozen), "instance": instance(shape)}
            series.append({"series": selector(name, labels),
                           "values": grown(first.get(key), second.get(key))})
    tests = []
    for row in checks:
        alert = row["alert"]
        match = {"alertname": alert["name"], "alertstate": "firing", "netdev": row["netdev"],
                 "instance": instance(row["shape"]), **alert["labels"]}
        expr = "count by (alertname, netdev) (" + selector("ALERTS", match) + ")"
        for state, minute in alert["times"]:
            tests.append({"expr": expr, "eval_time": f"{minute}m",
                          "exp_samples": [] if state == "quiet" else [{
                              "labels": selector("", {"alertname": alert["name"],
                                                      "netdev": row["netdev"]}),
                              "value": 1}]})
    return {"rule_files": [rules_file], "evaluation_interval": "1m",
            "tests": [{"interval": "1m", "input_series": series, "promql_expr_test": tests}]}


def spec_has_link(source, shape):
    path = os.path.join(source, "tests", "captures", "specs", shape + ".json")
    if not os.path.isfile(path):
        return True  # a hardware capture: judged by its own rows
    with open(path, encoding="utf-8") as f:
        spec = json.load(f)
    return any("link" in about for about in spec.get("netdevs", {}).values())


def sample_time(capture, n):
    with open(os.path.join(capture, "index.json"), encoding="utf-8") as f:
        return json.load(f)["samples"][n - 1]["time"]


def main(binary, source):
    doc = os.path.join(source, "docs", "vendor-matrix.md")
    checks = rows(doc)
    if len(checks) < 6:
        print(f"FAIL: only {len(checks)} link scenario rows read from {doc}")
        return 1
    checker = harness.Checker()
    expect = checker.expect
    capture_dirs = matrix_captures.captures(source)
    for row in checks:
        expect(f"{row['shape']} ({row['what']}): a capture", row["shape"] in capture_dirs, True)
    checks = [row for row in checks if row["shape"] in capture_dirs]

    scrapes, findings, replayed, pages = {}, {}, {}, {}
    for shape, capture in capture_dirs.items():
        with matrix_captures.Replay(binary, capture) as replay:
            taken = replay.scrapes()
            scrapes[shape] = (taken[0], taken[-1])
            findings[shape] = replay.doctor()
            status, body = replay.exporter.get("/debug/links")
            pages[shape] = json.loads(body) if status == 200 else None
        replayed[shape] = matrix_captures.doctor_replay(binary, capture)

    # 1. Each row's series in each sample.
    for row in checks:
        first, second = scrapes[row["shape"]]
        labels = {"netdev": row["netdev"], **row["labels"]}
        what = f"{row['shape']} {row['netdev']} ({row['what']}): {row['series']}"
        for n, scrape, want in ((1, first, row["first"]), (2, second, row["second"])):
            if want is None:  # absent: no series of that name on the netdev at all
                expect(f"{what} sample {n}: absent",
                       sorted(harness.series(scrape, row["series"], **labels)), [])
            else:
                expect(f"{what} sample {n}",
                       rounded(harness.value(scrape, row["series"], **labels)), rounded(want))

    # The down edge on /debug/links: its reason, at the capture's sample-2 time.
    for row in checks:
        if row["series"] != "rdma_link_down_events_total":
            continue
        page = pages[row["shape"]] or {"ports": []}
        events = [event for port in page["ports"] if port["netdev"] == row["netdev"]
                  for event in port["events"] if event["direction"] == "down"]
        expect(f"{row['netdev']}: /debug/links down event (reason, time)",
               [(e.get("reason"), e["time"]) for e in events],
               [(row["labels"].get("reason"),
                 sample_time(capture_dirs[row["shape"]], 2))])

    # Shapes without link sources: every source unavailable, no FEC or module series.
    for shape in capture_dirs:
        if spec_has_link(source, shape):
            continue
        for n, scrape in enumerate(scrapes[shape], start=1):
            sources = {dict(labels).get("source"): value
                       for (name, labels), value in scrape.items()
                       if name == "rdma_link_source_available"}
            expect(f"{shape} sample {n}: rdma_link_source_available rows", bool(sources), True)
            expect(f"{shape} sample {n}: every source but ib_counters 0",
                   sorted({s for s, v in sources.items() if s != "ib_counters" and v != 0}), [])
            expect(f"{shape} sample {n}: no FEC or module series",
                   sorted({name for name, _ in scrape
                           if name.startswith(("rdma_link_fec", "rdma_link_module_lane"))}), [])

    # 2. The alerts, over the scrapes of every link shape.
    link_shapes = {row["shape"] for row in checks}
    case = promtool_case({s: scrapes[s] for s in link_shapes},
                         [row for row in checks if row["alert"]],
                         os.path.join(source, "rules", "rdmascope.rules.yml"))
    returncode, _ = matrix_captures.promtool_test(case, "link-captures")
    expect("the rows' alerts quiet and firing when they say (promtool)", returncode, 0)

    # 3. Doctor's finding on the row's netdev (and lane), from /doctor and doctor --replay.
    for row in checks:
        if not row["doctor"]:
            continue
        check, severity = row["doctor"]
        for name, report in (("doctor", findings[row["shape"]]),
                             ("doctor --replay", replayed[row["shape"]])):
            got = sorted({f["severity"] for f in report if f["id"] == check
                          and f["scope"].get("netdev") == row["netdev"]
                          and f["scope"].get("lane", row["labels"].get("lane"))
                          == row["labels"].get("lane")})
            expect(f"{row['netdev']} ({row['what']}): {name} {check}", got, [severity])
    return checker.result()


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
