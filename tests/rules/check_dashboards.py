#!/usr/bin/env python3
"""The Grafana dashboards are what dashboards/generate.py produces (nobody edits the JSON by
hand and loses it at the next generation), and each one has what users need: the instance
variable, and on every panel a title, a description, a unit and a query.

Usage: check_dashboards.py DASHBOARDS_DIR"""

import importlib.util
import json
import os
import sys


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
        variables = {v["name"] for v in board["templating"]["list"]}
        if not {"datasource", "instance"} <= variables:
            failures.append(f"{name}: datasource and instance variables")
        for panel in board["panels"]:
            where = f"{name}: {panel.get('title')!r}"
            if not panel.get("title") or not panel.get("description"):
                failures.append(f"{where}: title and description")
            if not panel["fieldConfig"]["defaults"].get("unit"):
                failures.append(f"{where}: unit")
            if not panel.get("targets") or not all(t.get("expr") for t in panel["targets"]):
                failures.append(f"{where}: a query")
        print(f"ok: {name}: {len(board['panels'])} panels")
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
