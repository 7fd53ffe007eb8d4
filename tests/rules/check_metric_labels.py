#!/usr/bin/env python3
"""The labels rdmascope serves are the labels docs/metrics.md lists.

Served: every series of the golden files (the real mapping code on fixture hosts). For each
series, its labels must be among those its metric's row lists (an undocumented label, or a
metric with no row, fails); an info metric (`_info`, gauge (1)) must serve exactly the labels
listed, since each is always present, empty when unreadable. So a renamed label served under
its old name too (docs/metrics.md "Label names") stays listed until it is removed.

Usage: check_metric_labels.py METRICS_MD GOLDEN_DIR"""

import glob
import os
import re
import sys

SUFFIXES = ("_bucket", "_sum", "_count")
NOT_LABELS = {"le", "quantile"}


def documented(metrics_md):
    """Metric name -> list of (label set, is info) rows; a parenthesis in the labels cell
    explains a label and is not one."""
    rows = {}
    in_metrics_table = False
    with open(metrics_md) as f:
        for line in f:
            # Metric tables are those whose header is "| name | type | labels | ...".
            if line.startswith("| name | type | labels |"):
                in_metrics_table = True
            elif not line.startswith("|"):
                in_metrics_table = False
            if not in_metrics_table or not line.startswith("| `"):
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) < 3:
                continue
            labels = {label.strip() for label in re.sub(r"\([^)]*\)", "", cells[2]).split(",")
                      if label.strip()}
            for name in re.findall(r"`([a-zA-Z_:][a-zA-Z0-9_:]*)`", cells[0]):
                info = name.endswith("_info") and cells[1] == "gauge (1)"
                rows.setdefault(name, []).append((labels, info))
    return rows


def served(golden_dir):
    """Metric name -> {label set: first file serving it}."""
    series = {}
    for path in sorted(glob.glob(os.path.join(golden_dir, "*.prom"))):
        with open(path) as f:
            for line in f:
                if line.startswith("#") or not line.strip():
                    continue
                match = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s", line)
                if not match:
                    continue
                labels = frozenset(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="', match.group(2) or ""))
                series.setdefault(match.group(1), {}).setdefault(labels - NOT_LABELS,
                                                                 os.path.basename(path))
    return series


def main(metrics_md, golden_dir):
    rows = documented(metrics_md)
    failures = []
    families = served(golden_dir)
    for name, label_sets in sorted(families.items()):
        base = next((name[:-len(s)] for s in SUFFIXES if name.endswith(s) and
                     name[:-len(s)] in rows), name)
        if base not in rows:
            failures.append(f"{name} ({next(iter(label_sets.values()))}) has no row in "
                            f"{metrics_md}")
            continue
        for labels, where in sorted(label_sets.items(), key=lambda i: sorted(i[0])):
            if any(labels == listed if info else labels <= listed
                   for listed, info in rows[base]):
                continue
            listed = " | ".join(", ".join(sorted(ls)) for ls, _ in rows[base])
            failures.append(f"{name} in {where} has labels {', '.join(sorted(labels))}; "
                            f"{metrics_md} lists {listed}")
    print(f"{len(families)} metrics served in the golden files, {len(rows)} documented")
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
