#!/usr/bin/env python3
"""Every metric a rule or a dashboard query uses is one rdmascope really serves.

The reference is not a hand-kept list: it is the union of the metric families in real
expositions, the golden files (the real mapping code on fixture hosts) and the scrapes the host
and lab tiers kept ($RDMASCOPE_SCRAPE_DIR), plus the recording rules' own names. Every rule
expression and every dashboard target is also checked to parse (promtool).

Usage: check_metric_names.py RULES_DIR DASHBOARDS_DIR GOLDEN_DIR SCRAPE_DIR"""

import glob
import json
import os
import re
import subprocess
import sys
import tempfile

import yaml

KEYWORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left",
            "group_right", "bool", "offset", "inf", "nan", "atan2"}
# Metrics of other exporters or of Prometheus itself that rules may use on purpose.
EXTERNAL = {"up", "ALERTS"}


def exposition_names(path):
    names = set()
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("# TYPE "):
                parts = line.split()
                name, kind = parts[2], parts[3] if len(parts) > 3 else ""
                names.add(name)
                if kind == "histogram":
                    names.update({name + "_bucket", name + "_sum", name + "_count"})
                if kind == "summary":
                    names.update({name + "_sum", name + "_count"})
            elif line and not line.startswith("#"):
                match = re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line)
                if match:
                    names.add(match.group(0))
    return names


def metric_names(expr):
    """Metric names in a PromQL expression (strings, matchers, ranges, grouping clauses,
    functions, keywords and # comments removed). Strings and comments in one left-to-right pass:
    a quote inside a comment opens no string, a # inside a string starts no comment."""
    text = re.sub(r'"(\\\\.|[^"\\\\])*"|\'(\\\\.|[^\'\\\\])*\'|`[^`]*`|#[^\n]*',
                  lambda m: " " if m.group(0).startswith("#") else '""', expr)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    names = set()
    for match in re.finditer(r"(?<![0-9.a-zA-Z_:])([a-zA-Z_:][a-zA-Z0-9_:]*)", text):
        name = match.group(1)
        rest = text[match.end():].lstrip()
        if name in KEYWORDS or rest.startswith("("):
            continue
        names.add(name)
    return names


def grafana_to_promql(expr):
    """Grafana's variables are not PromQL: $__rate_interval becomes a duration, $instance a
    value."""
    expr = re.sub(r"\$\{?__\w+\}?", "5m", expr)
    return re.sub(r"\$\{?(\w+)(:\w+)?\}?", "x", expr)


def dashboard_exprs(path):
    """Panel target expressions, and the selectors of label_values() variables."""
    with open(path) as f:
        board = json.load(f)
    exprs = []

    def walk(node):
        if isinstance(node, dict):
            if isinstance(node.get("expr"), str) and node["expr"].strip():
                exprs.append(grafana_to_promql(node["expr"]))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(board.get("panels", []))
    for variable in board.get("templating", {}).get("list", []):
        query = variable.get("query")
        query = query.get("query") if isinstance(query, dict) else query
        match = re.fullmatch(r"\s*label_values\((.*),\s*\w+\s*\)\s*", query or "")
        if match:
            exprs.append(grafana_to_promql(match.group(1)))
    return exprs


def main(rules_dir, dashboards_dir, golden_dir, scrape_dir):
    served = set()
    sources = sorted(glob.glob(os.path.join(golden_dir, "*.prom")))
    scrapes = sorted(glob.glob(os.path.join(scrape_dir, "*.prom")))
    for path in sources + scrapes:
        served |= exposition_names(path)
    print(f"{len(served)} metric names served in {len(sources)} golden files and "
          f"{len(scrapes)} kept scrapes")

    uses = {}  # name -> where
    recorded = set()
    exprs = []
    for path in sorted(glob.glob(os.path.join(rules_dir, "*.yml"))):
        with open(path) as f:
            for group in yaml.safe_load(f)["groups"]:
                for rule in group["rules"]:
                    if "record" in rule:
                        recorded.add(rule["record"])
                    where = f"{os.path.basename(path)}: {rule.get('alert') or rule.get('record')}"
                    exprs.append((where, rule["expr"]))
    for path in sorted(glob.glob(os.path.join(dashboards_dir, "*.json"))):
        for expr in dashboard_exprs(path):
            exprs.append((os.path.basename(path), expr))
    for where, expr in exprs:
        for name in metric_names(expr):
            uses.setdefault(name, set()).add(where)

    failures = []
    for name, where in sorted(uses.items()):
        if name not in served and name not in recorded and name not in EXTERNAL:
            failures.append(f"{name} (used by {', '.join(sorted(where))}) is not served")
    # Every expression parses: promtool checks rule files, so wrap each one in a rule.
    with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
        yaml.safe_dump({"groups": [{"name": "exprs", "rules": [
            {"record": f"check:expr_{i}", "expr": expr} for i, (_, expr) in enumerate(exprs)]}]}, f)
    check = subprocess.run(["promtool", "check", "rules", f.name], capture_output=True, text=True)
    os.unlink(f.name)
    if check.returncode != 0:
        failures.append("an expression does not parse: " + (check.stdout + check.stderr).strip())
    print(f"{len(exprs)} expressions use {len(uses)} metric names")
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
