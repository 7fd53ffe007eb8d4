#!/usr/bin/env python3
"""Every --help of the binary reads cleanly (issue #16 item 3): no CLI11 artefacts such as
`--collector.ethtool.pfc,--no-collector.ethtool.pfc{false}`, boolean pairs as node_exporter prints
them (`--[no-]collector.NAME`), lines wrapped at 100 columns, every collector option under its
`--collector.NAME.OPTION` name and none of the first release's spellings (they still parse, as
hidden deprecated aliases). help2man builds the man page from this text (packaging/debian).

Usage: help_text.py RDMASCOPE"""

import re
import subprocess
import sys

WIDTH = 100
COLLECTORS = ["ethtool", "rdma", "resources", "mr", "verbs", "perf", "occupancy", "host", "link"]
# Options every collector-running subcommand (serve, check, doctor, profile) takes.
COLLECTOR_OPTIONS = [
    "--collector.ethtool.device-include", "--collector.ethtool.stat-include",
    "--collector.ethtool.queue-stats", "--[no-]collector.ethtool.pfc",
    "--collector.rdma.device-include", "--collector.resources.device-include",
    "--collector.resources.max-processes", "--collector.resources.max-raw-cqs",
    "--collector.mr.tracking", "--collector.mr.max-regions", "--collector.mr.leak-age",
    "--collector.mr.pinned-rescan-seconds", "--collector.mr.aggregate-by-comm",
    "--collector.mr.max-processes", "--collector.verbs.max-queues",
    "--collector.verbs.max-processes", "--collector.verbs.max-queue-series",
    "--collector.occupancy.dir", "--collector.perf.event", "--collector.perf.per-cpu",
    "--collector.link.refresh-interval", "--collector.link.static-refresh-interval",
    "--collector.link.max-netdevs",
    "--probe.library", "--probe.binary", "--probe.strict",
] + [f"--[no-]collector.{name}" for name in COLLECTORS]
OLD_NAMES = ["--resources.", "--mr.", "--verbs.", "--perf.", "--occupancy."]


def check(binary, args, expected):
    failures = []
    run = subprocess.run([binary, *args, "--help"], capture_output=True, text=True, timeout=30)
    where = "rdmascope " + " ".join(args + ["--help"])
    if run.returncode != 0:
        return [f"{where}: exit {run.returncode}: {run.stderr.strip()}"]
    text = run.stdout
    for number, line in enumerate(text.splitlines(), 1):
        if len(line) > WIDTH:
            failures.append(f"{where}:{number}: {len(line)} columns: {line}")
        if re.search(r"\{(true|false)\}", line):
            failures.append(f"{where}:{number}: CLI11 flag default artefact: {line}")
        if re.search(r"^ {2}-[^\s=]+=(\s|$)", line):
            failures.append(f"{where}:{number}: '=' without a value: {line}")
        if re.search(r"--[\w.-]+,--", line):
            failures.append(f"{where}:{number}: comma-joined names: {line}")
        for old in OLD_NAMES:
            if re.search(r"(^|[\s(/])" + re.escape(old), line):
                failures.append(f"{where}:{number}: old spelling {old}*: {line}")
    listed = {m.group(1) for m in re.finditer(r"^ {2}(-[^\s=]+)", text, re.MULTILINE)}
    for option in expected:
        if option not in listed:
            failures.append(f"{where}: {option} not listed")
    print(f"{'FAIL' if failures else 'ok'}: {where}: {len(text.splitlines())} lines, "
          f"{len(listed)} options")
    return failures


def main(binary):
    failures = check(binary, [], [])
    for sub in ["serve", "check"]:
        failures += check(binary, [sub], COLLECTOR_OPTIONS + ["--web.listen-address"])
    for sub in ["doctor", "profile"]:
        failures += check(binary, [sub], COLLECTOR_OPTIONS)
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
