#!/usr/bin/env python3
"""The Grafana dashboards are what dashboards/generate.py produces (nobody edits the JSON by
hand and loses it at the next generation), and each one has what users need: the cluster and
instance variables (cluster first, so that one data source can hold many clusters), and on every
panel a title, a description, a unit and a query whose every series selector filters by
both cluster and instance; rendered for a site (a job selector, another cluster label name),
every selector carries those too.

Usage: check_dashboards.py DASHBOARDS_DIR"""

import importlib.util
import json
import os
import re
import sys

SELECTORS = ('cluster=~"$cluster"', 'instance=~"$instance"')
# Words of PromQL that are not metric names: aggregation and function names are followed by
# "(", so only these keywords and the label lists of by/without/on/ignoring need skipping.
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
            "unless", "offset"}


def unfiltered_selectors(expr, selectors=SELECTORS):
    """The series selectors of a PromQL expression that lack one of SELECTORS: every {...}
    matcher list, and every bare metric name (which would select all clusters and hosts)."""
    missing = [m.group(0) for m in re.finditer(r"[A-Za-z_:][\w:]*\{[^}]*\}", expr)
               if not all(s in m.group(0) for s in selectors)]
    rest = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # string literals
    rest = re.sub(r"\{[^}]*\}", "{}", rest)  # matcher lists (checked above)
    rest = re.sub(r"\[[^]]*\]", "", rest)  # range durations
    rest = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", rest)
    for m in re.finditer(r"[A-Za-z_:][\w:]*", rest):
        after = rest[m.end():].lstrip()
        if m.group(0) not in KEYWORDS and not after.startswith(("(", "{")):
            missing.append(m.group(0))
    return missing


def site_failures(generate):
    """A site's rendering (generate.py --selector 'job="rdmascope"' --cluster-label site): every
    query, panels and variables, carries the site's matchers and cluster label."""
    site = ('site=~"$cluster"', 'instance=~"$instance"', 'job="rdmascope"')
    failures = []
    generate.configure('job="rdmascope"', "site")
    try:
        for name, text in generate.render().items():
            board = json.loads(text)
            cluster = board["templating"]["list"][1]["definition"]
            if cluster != 'label_values(rdmascope_build_info{job="rdmascope"}, site)':
                failures.append(f"{name}: site rendering's cluster variable: {cluster}")
            exprs = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
            exprs += [re.sub(r"^label_values\((.*),\s*\$?\w+\)$", r"\1", v["definition"])
                      for v in board["templating"]["list"][3:] if v["type"] != "custom"]
            instance = board["templating"]["list"][2]["definition"]
            if not all(matcher in instance for matcher in (site[0], site[2])):
                failures.append(f"{name}: site rendering's instance variable: {instance}")
            for expr in exprs:
                if bad := unfiltered_selectors(expr, site):
                    failures.append(f"{name}: site rendering: selectors without "
                                    f"{' and '.join(site)}: {bad}")
    finally:
        generate.configure()
    return failures


def main(directory):
    spec = importlib.util.spec_from_file_location("generate", os.path.join(directory, "generate.py"))
    generate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate)
    failures = []
    for name, text in generate.render().items():
        path = os.path.join(directory, name)
        if not os.path.exists(path):
            failures.append(f"{name}: missing; run dashboards/generate.py")
            continue
        with open(path) as f:
            if f.read() != text:
                failures.append(f"{name}: differs from dashboards/generate.py's output; run it")
        board = json.loads(text)
        variables = [v["name"] for v in board["templating"]["list"]]
        if variables[:3] != ["datasource", "cluster", "instance"]:
            failures.append(f"{name}: variables datasource, cluster, instance first: {variables}")
        for variable in board["templating"]["list"][1:]:
            if variable["type"] == "custom":
                continue  # a fixed list of values: nothing to filter
            # label_values(SELECTOR, LABEL): the selector must be chained on the variables above
            # (LABEL may itself be a variable: $workload_label).
            selector = re.sub(r"^label_values\((.*),\s*\$?\w+\)$", r"\1", variable["definition"])
            if variable["name"] == "cluster":
                chained = True
            elif variable["name"] == "instance":
                chained = SELECTORS[0] in selector
            else:
                chained = not unfiltered_selectors(selector)
            if not chained:
                failures.append(f"{name}: variable {variable['name']} not chained on the "
                                f"variables before it: {variable['definition']}")
        for panel in board["panels"]:
            where = f"{name}: {panel.get('title')!r}"
            if not panel.get("title") or not panel.get("description"):
                failures.append(f"{where}: title and description")
            if panel.get("type") == "row":
                continue  # a heading: no unit, no query (its panels follow it)
            if not panel["fieldConfig"]["defaults"].get("unit"):
                failures.append(f"{where}: unit")
            if not panel.get("targets") or not all(t.get("expr") for t in panel["targets"]):
                failures.append(f"{where}: a query")
            for target in panel.get("targets", []):
                if bad := unfiltered_selectors(target.get("expr", "")):
                    failures.append(f"{where}: selectors without {' and '.join(SELECTORS)}: "
                                    f"{bad}")
        print(f"ok: {name}: {len(board['panels'])} panels")
    failures += site_failures(generate)
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
