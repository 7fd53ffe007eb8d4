#!/usr/bin/env python3
"""Checks the shipped Prometheus rules:
1. `promtool check rules` (syntax, templates) on every rules file;
2. every alert (of rdmascope.rules.yml and of the fleet rules) has a severity, a summary, a
   description and a runbook_url whose anchor exists in docs/runbook.md; its summary is static per target: the only template values it may use
   are $labels.instance, $labels.device and $labels.port (Alertmanager shows one summary per
   group of alerts; the process, queue, counter or value belong in the description);
3. no expression of rdmascope.rules.yml aggregates `by (...)` or matches `on (...)`: those
   name the labels to keep and drop every target label (cluster, job, external labels); the
   rules use `without (...)` and `ignoring (...)` with rdmascope's own labels instead;
4. every alert has a firing and a not-firing case in rules/tests/*.yml, and every recording
   rule a promql_expr_test (the fleet rules' too);
5. rules/tests/target_labels.rules.test.yml is what --write-target-labels makes of the other
   test files (every case run as two clusters whose hosts share names, every input series with
   cluster and job, every expected alert and sample once per cluster with them);
6. `promtool test rules` on every rules/tests/*.yml as users run it (the real rules, rendered
   annotations compared with exp_annotations, which each expected alert must give, so a
   template that renders a wrong value fails);
7. the rules files are what rules/generate.py renders with its defaults, and a site's
   rendering works: with a job selector, the two-cluster cases pass on series of that job and
   fail on another job's; with other cluster and rack label names, the fleet cases (every test
   file that loads the fleet rules) pass on series that carry those; runbook_url is the site's base with the same anchors;
8. the opt-in rdmascope.node-exporter-compat.rules.yml: no `by (...)`/`on (...)` either, every
   rule a recording rule with a promql_expr_test, and each name in docs/node-exporter.md (the
   map that says where its values differ from node_exporter's).

Usage: check_rules.py RULES_DIR RUNBOOK [--write-target-labels]"""

import copy
import glob
import os
import re
import subprocess
import sys
import tempfile

import yaml

TARGET_LABELS_FILE = "target_labels.rules.test.yml"
COMPAT_FILE = "rdmascope.node-exporter-compat.rules.yml"
FLEET_FILE = "rdmascope.fleet.rules.yml"
COMPAT_DOC = "node-exporter.md"  # beside the runbook, in docs/
CLUSTERS = ("a", "b")
JOB = "rdmascope"
SUMMARY_VALUE = re.compile(r"\{\{-?\s*\$labels\.(instance|device|port)\s*-?\}\}")
TARGET_DROPPING = re.compile(r"\b(by|on)\s*\(")


def anchors(runbook):
    # GitHub-style anchors of "## Heading" lines (the exporter's /runbook uses the same).
    with open(runbook) as f:
        return {re.sub(r"[^a-z0-9 _-]", "", line[3:].strip().lower()).replace(" ", "-")
                for line in f if line.startswith("## ")}


def promtool_test(directory, name):
    run = subprocess.run(["promtool", "test", "rules", name], cwd=directory,
                         capture_output=True, text=True)
    return run.returncode, (run.stdout + run.stderr).strip()


def render_site(rules_dir, out_dir, *args):
    generate = os.path.join(rules_dir, "generate.py")
    os.makedirs(os.path.join(out_dir, "tests"), exist_ok=True)
    subprocess.run([sys.executable, generate, *args, out_dir], check=True,
                   capture_output=True)


def site_rendering_failures(rules_dir):
    """Check 7: rules/generate.py's defaults are the files, and its parameters work."""
    failures = []
    check = subprocess.run([sys.executable, os.path.join(rules_dir, "generate.py"), "--check"],
                           capture_output=True, text=True)
    if check.returncode != 0:
        failures.append(check.stdout.strip() or check.stderr.strip())
    with open(os.path.join(rules_dir, "tests", TARGET_LABELS_FILE)) as f:
        two_clusters = f.read()
    site_url = "https://wiki.example.com/rdma/runbook"
    two_clusters = re.sub(r"http://[^/\s]+/runbook#", site_url + "#", two_clusters)
    # The fleet cases with the labels renamed (not the recorded series' names).
    fleet_cases = {}
    for name in fleet_test_files(rules_dir):
        with open(os.path.join(rules_dir, "tests", name)) as f:
            fleet = f.read()
        fleet = re.sub(r'\bcluster(?==")|\bcluster(?=: )', "site", fleet)
        fleet_cases[name] = re.sub(r'\brack(?==")|\brack(?=: )', "row", fleet)
    firing_alerts = {test["alertname"] for case in yaml.safe_load(two_clusters)["tests"]
                     for test in case.get("alert_rule_test", []) if test.get("exp_alerts")}
    with tempfile.TemporaryDirectory() as tmp:
        for job, should_pass in ((JOB, True), ("elsewhere", False)):
            out = os.path.join(tmp, job)
            render_site(rules_dir, out, f'--selector=job="{job}"', "--cluster-label=site",
                        "--rack-label=row", "--runbook-url=" + site_url)
            with open(os.path.join(out, "tests", TARGET_LABELS_FILE), "w") as f:
                f.write(two_clusters)
            code, output = promtool_test(os.path.join(out, "tests"), TARGET_LABELS_FILE)
            if should_pass and code != 0:
                failures.append(f"rules rendered with --selector job=\"{job}\": the two-cluster "
                                f"cases (every series of job \"{JOB}\") fail:\n" + output[-2000:])
            # Another job's series are not rdmascope's: every alert that fires in the cases
            # must now miss (promtool names each failing alert test).
            missed = set(re.findall(r"alertname: (\w+)", output))
            if not should_pass and (unfiltered := sorted(firing_alerts - missed)):
                failures.append(f"rules rendered with --selector job=\"{job}\" still fire on "
                                f"job \"{JOB}\"'s series: " + ", ".join(unfiltered))
        out = os.path.join(tmp, "labels")
        render_site(rules_dir, out, "--cluster-label=site", "--rack-label=row")
        for name, fleet in fleet_cases.items():
            with open(os.path.join(out, "tests", name), "w") as f:
                f.write(fleet)
            code, output = promtool_test(os.path.join(out, "tests"), name)
            if code != 0:
                failures.append(f"fleet rules rendered with --cluster-label site --rack-label row "
                                f"fail the cases of {name} with those labels:\n" + output[-2000:])
    return failures


def fleet_test_files(rules_dir):
    """The test files that load the fleet rules (their series carry cluster and rack)."""
    names = []
    for path in sorted(glob.glob(os.path.join(rules_dir, "tests", "*.yml"))):
        with open(path) as f:
            if FLEET_FILE in " ".join(yaml.safe_load(f).get("rule_files", [])):
                names.append(os.path.basename(path))
    return names


def with_target(series, cluster):
    """A series selector as written in input_series and exp_samples, with the target labels
    cluster and job (a job it already has is kept)."""
    match = re.fullmatch(r"\s*([^{\s]*)\s*(?:\{(.*)\})?\s*", series)
    name, labels = match.group(1), (match.group(2) or "").strip().rstrip(",")
    extra = [f'cluster="{cluster}"']
    if not re.search(r"(^|,)\s*job\s*=", labels):
        extra.append(f'job="{JOB}"')
    return name + "{" + ",".join(extra + ([labels] if labels else [])) + "}"


def target_label_sources(rules_dir):
    """The test files the two-cluster run is made of: those of rdmascope.rules.yml alone whose
    series carry no cluster yet (not the fleet's, not clusters.rules.test.yml, not itself)."""
    sources = []
    for path in sorted(glob.glob(os.path.join(rules_dir, "tests", "*.yml"))):
        if os.path.basename(path) == TARGET_LABELS_FILE:
            continue
        with open(path) as f:
            tests = yaml.safe_load(f)
        series = [s["series"] for case in tests["tests"] for s in case.get("input_series", [])]
        if tests.get("rule_files") == ["../rdmascope.rules.yml"] and \
                not any(re.search(r"[{,]\s*cluster\s*=", s) for s in series):
            sources.append(path)
    return sources


def target_labels_tests(rules_dir):
    """Every test case of the source files as two clusters whose hosts share names."""
    sources = target_label_sources(rules_dir)
    cases = []
    for path in sources:
        with open(path) as f:
            tests = yaml.safe_load(f)
        for case in tests["tests"]:
            case = copy.deepcopy(case)
            case["input_series"] = [dict(s, series=with_target(s["series"], c))
                                    for s in case.get("input_series", []) for c in CLUSTERS]
            for test in case.get("alert_rule_test", []):
                test["exp_alerts"] = [
                    dict(alert, exp_labels={**alert.get("exp_labels", {}), "cluster": c,
                                            "job": alert.get("exp_labels", {}).get("job", JOB)})
                    for alert in test.get("exp_alerts") or [] for c in CLUSTERS]
            for test in case.get("promql_expr_test", []):
                test["exp_samples"] = [dict(sample, labels=with_target(sample["labels"], c))
                                       for sample in test.get("exp_samples") or []
                                       for c in CLUSTERS]
            cases.append(case)
    header = (
        "# Generated by tests/rules/check_rules.py --write-target-labels: do not edit.\n"
        "# Every test case of " + ", ".join(os.path.basename(p) for p in sources) + "\n"
        "# run as two clusters whose hosts share names: each input series twice, with\n"
        '# cluster="a" and cluster="b" (and job="rdmascope"), each expected alert and sample once\n'
        "# per cluster with those labels and the same annotations. A rule that aggregates or\n"
        "# joins them away (by (instance), on (instance)) fails here. Runnable as users run it:\n"
        "#   cd rules/tests && promtool test rules " + TARGET_LABELS_FILE + "\n")
    body = {"rule_files": ["../rdmascope.rules.yml"], "evaluation_interval": "1m",
            "tests": cases}
    return header + yaml.safe_dump(body, sort_keys=False, width=1 << 20, allow_unicode=True)


def main(rules_dir, runbook, write_target_labels=False):
    failures = []
    target_labels_path = os.path.join(rules_dir, "tests", TARGET_LABELS_FILE)
    if write_target_labels:
        with open(target_labels_path, "w") as f:
            f.write(target_labels_tests(rules_dir))
        print(f"wrote {target_labels_path}")
    rules_file = os.path.join(rules_dir, "rdmascope.rules.yml")
    rules_files = sorted(glob.glob(os.path.join(rules_dir, "*.rules.yml")))
    check = subprocess.run(["promtool", "check", "rules", *rules_files], capture_output=True,
                           text=True)
    print(check.stdout.strip(), check.stderr.strip())
    if check.returncode != 0:
        failures.append("promtool check rules")

    with open(rules_file) as f:
        rules = yaml.safe_load(f)
    # The fleet rules aggregate by cluster on purpose: checks 3 and 5 are not theirs.
    with open(os.path.join(rules_dir, FLEET_FILE)) as f:
        fleet_rules = yaml.safe_load(f)
    known_anchors = anchors(runbook)
    alerts, records = [], []
    fleet_alerts, fleet_records = [], []
    for group in rules["groups"] + fleet_rules["groups"]:
        fleet = group in fleet_rules["groups"]
        for rule in group["rules"]:
            name = rule.get("alert") or rule.get("record")
            if fleet:
                (fleet_alerts if "alert" in rule else fleet_records).append(name)
                if "alert" not in rule:
                    continue
            elif bad := TARGET_DROPPING.findall(rule["expr"]):
                failures.append(f"{name}: {', '.join(sorted(set(bad)))} (...) in its expression "
                                "drops the target labels (cluster, job): use without (...) / "
                                "ignoring (...) with rdmascope's own labels")
            if "alert" not in rule:
                records.append(name)
                continue
            if not fleet:
                alerts.append(name)
            annotations = rule.get("annotations", {})
            if rule.get("labels", {}).get("severity") not in ("critical", "warning", "info"):
                failures.append(f"{name}: severity")
            for key in ("summary", "description", "runbook_url"):
                if not annotations.get(key):
                    failures.append(f"{name}: no {key}")
            for action in re.findall(r"\{\{.*?\}\}", annotations.get("summary", "")):
                if not SUMMARY_VALUE.fullmatch(action):
                    failures.append(f"{name}: summary uses {action}: only $labels.instance, "
                                    "$labels.device and $labels.port (details in description)")
            url, _, anchor = annotations.get("runbook_url", "").partition("#")
            if not re.match(r"https?://", url):
                failures.append(f"{name}: runbook_url {url!r} is not an absolute http(s) URL")
            if anchor not in known_anchors:
                failures.append(f"{name}: runbook anchor #{anchor} not in {runbook}")

    # node_exporter's names from rdmascope's series: renames that keep every target label.
    compat_records = []
    with open(os.path.join(rules_dir, COMPAT_FILE)) as f:
        compat = yaml.safe_load(f)
    with open(os.path.join(os.path.dirname(runbook), COMPAT_DOC)) as f:
        compat_doc = f.read()
    for group in compat["groups"]:
        for rule in group["rules"]:
            name = rule.get("record") or rule.get("alert")
            if "record" not in rule:
                failures.append(f"{COMPAT_FILE}: {name} is not a recording rule")
                continue
            compat_records.append(name)
            if bad := TARGET_DROPPING.findall(rule["expr"]):
                failures.append(f"{COMPAT_FILE}: {name}: {', '.join(sorted(set(bad)))} (...) "
                                "drops the target labels: use without (...)")
            if f"`{name}`" not in compat_doc:
                failures.append(f"{COMPAT_FILE}: {name} is not in docs/{COMPAT_DOC}")

    # The two-cluster run is generated from the other files and must be up to date.
    try:
        with open(target_labels_path) as f:
            if f.read() != target_labels_tests(rules_dir):
                failures.append(f"{TARGET_LABELS_FILE} is not what the other test files make: "
                                "run tests/rules/check_rules.py RULES_DIR RUNBOOK "
                                "--write-target-labels")
    except FileNotFoundError:
        failures.append(f"{TARGET_LABELS_FILE} missing: run with --write-target-labels")

    # Every file in rules/tests/ runs as users run it (plain `promtool test rules`, the real
    # rules with their annotations): each expected alert must list its exp_annotations.
    plain_files = sorted(glob.glob(os.path.join(rules_dir, "tests", "*.yml")))
    firing, quiet, recorded_tested = set(), set(), set()
    clustered_firing, clustered_records = set(), set()
    for path in plain_files:
        with open(path) as f:
            tests = yaml.safe_load(f)
        target_labels = os.path.basename(path) == TARGET_LABELS_FILE
        for case in tests["tests"]:
            for test in case.get("alert_rule_test", []):
                (firing if test.get("exp_alerts") else quiet).add(test["alertname"])
                for alert in test.get("exp_alerts") or []:
                    if not alert.get("exp_annotations"):
                        failures.append(f"{os.path.basename(path)}: {test['alertname']} at "
                                        f"{test['eval_time']} has no exp_annotations")
                    labels = alert.get("exp_labels", {})
                    if target_labels and labels.get("cluster") and labels.get("job"):
                        clustered_firing.add(test["alertname"])
            for test in case.get("promql_expr_test", []):
                name = re.match(r"\s*([\w:]+)", test["expr"]).group(1)
                recorded_tested.add(name)
                if target_labels and all('cluster="' in s["labels"] and 'job="' in s["labels"]
                                         for s in test.get("exp_samples") or []) \
                        and test.get("exp_samples"):
                    clustered_records.add(name)
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
        if name not in clustered_firing:
            failures.append(f"{name}: never fires with cluster and job in {TARGET_LABELS_FILE}")
    for name in records:
        if name not in recorded_tested:
            failures.append(f"{name}: no promql_expr_test")
        if name not in clustered_records:
            failures.append(f"{name}: not shown with cluster and job in {TARGET_LABELS_FILE}")
    for name in fleet_alerts:
        if name not in firing:
            failures.append(f"{FLEET_FILE}: {name}: no firing test case")
        if name not in quiet:
            failures.append(f"{FLEET_FILE}: {name}: no not-firing test case")
    for name in sorted(set(fleet_records)):
        if name not in recorded_tested:
            failures.append(f"{FLEET_FILE}: {name}: no promql_expr_test")
    for name in compat_records:
        if name not in recorded_tested:
            failures.append(f"{COMPAT_FILE}: {name}: no promql_expr_test")
    print(f"{FLEET_FILE}: {len(fleet_alerts)} alerts, "
          f"{len(set(fleet_alerts) & firing & quiet)} with firing and quiet cases; "
          f"{len(set(fleet_records))} recorded names, "
          f"{len(set(fleet_records) & recorded_tested)} tested")
    print(f"{COMPAT_FILE}: {len(compat_records)} recording rules, "
          f"{len(recorded_tested & set(compat_records))} tested")
    print(f"{len(alerts)} alerts, {len(firing)} with firing cases, {len(quiet)} with quiet cases; "
          f"{len(records)} recording rules, {len(recorded_tested & set(records))} tested; "
          f"{len(clustered_firing)} alerts and {len(clustered_records & set(records))} recording "
          "rules shown keeping cluster and job")

    failures += site_rendering_failures(rules_dir)

    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--write-target-labels"]
    sys.exit(main(*args[:2], write_target_labels="--write-target-labels" in sys.argv[1:]))
