#!/usr/bin/env python3
"""Checks the shipped Prometheus rules:
1. `promtool check rules` (syntax, templates);
2. every alert has a severity, a summary, a description and a runbook_url whose anchor exists
   in docs/runbook.md;
3. every alert has a firing and a not-firing case in rules/tests/*.yml;
4. `promtool test rules` on every rules/tests/*.yml as users run it (the real rules, rendered
   annotations compared with exp_annotations, which each expected alert must give, so a
   template that renders a wrong value fails).

Usage: check_rules.py RULES_DIR RUNBOOK"""

import glob
import os
import re
import subprocess
import sys

import yaml


def anchors(runbook):
    # GitHub-style anchors of "## Heading" lines.
    with open(runbook) as f:
        return {re.sub(r"[^a-z0-9 -]", "", line[3:].strip().lower()).replace(" ", "-")
                for line in f if line.startswith("## ")}


def main(rules_dir, runbook):
    failures = []
    rules_file = os.path.join(rules_dir, "rdmascope.rules.yml")
    check = subprocess.run(["promtool", "check", "rules", rules_file], capture_output=True,
                           text=True)
    print(check.stdout.strip(), check.stderr.strip())
    if check.returncode != 0:
        failures.append("promtool check rules")

    with open(rules_file) as f:
        rules = yaml.safe_load(f)
    known_anchors = anchors(runbook)
    alerts = []
    for group in rules["groups"]:
        for rule in group["rules"]:
            if "alert" not in rule:
                continue
            name = rule["alert"]
            alerts.append(name)
            annotations = rule.get("annotations", {})
            if rule.get("labels", {}).get("severity") not in ("critical", "warning", "info"):
                failures.append(f"{name}: severity")
            for key in ("summary", "description", "runbook_url"):
                if not annotations.get(key):
                    failures.append(f"{name}: no {key}")
            anchor = annotations.get("runbook_url", "").partition("#")[2]
            if anchor not in known_anchors:
                failures.append(f"{name}: runbook anchor #{anchor} not in {runbook}")

    # Every file in rules/tests/ runs as users run it (plain `promtool test rules`, the real
    # rules with their annotations): each expected alert must list its exp_annotations.
    plain_files = sorted(glob.glob(os.path.join(rules_dir, "tests", "*.yml")))
    firing, quiet = set(), set()
    for path in plain_files:
        with open(path) as f:
            tests = yaml.safe_load(f)
        for case in tests["tests"]:
            for test in case.get("alert_rule_test", []):
                (firing if test.get("exp_alerts") else quiet).add(test["alertname"])
                for alert in test.get("exp_alerts") or []:
                    if not alert.get("exp_annotations"):
                        failures.append(f"{os.path.basename(path)}: {test['alertname']} at "
                                        f"{test['eval_time']} has no exp_annotations")
    for path in plain_files:
        plain = subprocess.run(["promtool", "test", "rules", os.path.basename(path)],
                               cwd=os.path.dirname(path), capture_output=True, text=True)
        print(plain.stdout.strip(), plain.stderr.strip())
        if plain.returncode != 0:
            failures.append(f"promtool test rules {os.path.basename(path)}")
    for name in alerts:
        if name not in firing:
            failures.append(f"{name}: no firing test case")
        if name not in quiet:
            failures.append(f"{name}: no not-firing test case")
    print(f"{len(alerts)} alerts, {len(firing)} with firing cases, {len(quiet)} with quiet cases")

    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
