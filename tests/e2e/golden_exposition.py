#!/usr/bin/env python3
"""The binary against the fixture sysfs tree: /metrics (minus values that change every run)
equals tests/fixtures/golden/e2e.prom, the whole output passes `promtool check metrics`,
the landing page lists the collectors, unknown paths are 404.
RDMASCOPE_UPDATE_GOLDEN=1 rewrites the golden file."""

import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402

# Lines whose values differ from run to run (timings, our own process) are left out, and the
# HTTP server's own metrics (exposer_*, rdmascope_http_*): they count requests, not the fixture.
VOLATILE = re.compile(r'^(process_|exposer_|rdmascope_http_|rdmascope_collector_duration_seconds|'
                      r'# (HELP|TYPE) (process_|exposer_|rdmascope_http_))|^rdmascope_build_info')


# The one lint promtool raises is on a name the metrics contract fixes
# (rdma_port_hw_counter_total, see docs/metrics.md "Known lint exception"): accepted by name,
# so that any other lint still fails the test.
ACCEPTED_LINT = {"rdma_port_hw_counter_total metric name should not include type 'counter'"}


def main(binary, fixtures):
    golden = os.path.join(fixtures, "golden", "e2e.prom")
    with tempfile.TemporaryDirectory() as sysfs:
        harness.materialise_tree(os.path.join(fixtures, "sysfs", "rdma_hosts.tree"), sysfs)
        # The sysfs-driven collectors only: the mr collector depends on this host (BPF, root).
        with harness.Exporter(binary, ["--collector.disable-defaults", "--collector.ethtool",
                                       "--collector.rdma", f"--path.sysfs={sysfs}"]) as exporter:
            text = exporter.metrics()
            status, landing = exporter.get("/")
            missing, _ = exporter.get("/nope")
            log = exporter.read_log()

    lint = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                          text=True)
    problems = [line for line in (lint.stdout + lint.stderr).splitlines()
                if line.strip() and line.strip() not in ACCEPTED_LINT]
    if problems:
        print("promtool check metrics failed:\n" + "\n".join(problems))
        return 1
    assert status == 200 and "<td>rdma</td><td>ok</td>" in landing, landing
    assert "<td>ethtool</td><td>no data</td>" in landing, landing
    assert missing == 404, missing
    assert "no network interface matched" in log, log

    stable = "\n".join(line for line in text.splitlines() if not VOLATILE.match(line)) + "\n"
    if os.environ.get("RDMASCOPE_UPDATE_GOLDEN") == "1":
        with open(golden, "w", encoding="utf-8") as f:
            f.write(stable)
        print("updated", golden)
        return 0
    with open(golden, encoding="utf-8") as f:
        expected = f.read()
    if stable != expected:
        import difflib
        sys.stdout.writelines(difflib.unified_diff(expected.splitlines(True),
                                                   stable.splitlines(True), "golden", "actual"))
        return 1
    print(f"golden exposition matches ({len(stable.splitlines())} lines); promtool clean")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
