"""Host side of prometheus.sh: run Prometheus against the guest, expect a healthy target,
RDMA series queried through Prometheus, and every rule file of rules/ loaded."""

import glob
import json
import os
import socket
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
RULES = os.path.join(REPO, "rules")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def api(port, path, **params):
    url = f"http://127.0.0.1:{port}/api/v1/{path}"
    if params:
        url += "?" + urllib.parse.urlencode(params)
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.load(resp)["data"]


def on_wait(tag, lab):
    if tag != "prometheus":
        return
    port = free_port()
    rule_files = sorted(glob.glob(os.path.join(RULES, "*.yml")) +
                        glob.glob(os.path.join(RULES, "*.yaml")))
    lab.result = {"rule_files": len(rule_files)}
    with tempfile.TemporaryDirectory(prefix="rdmascope-prom-") as work:
        config = os.path.join(work, "prometheus.yml")
        with open(config, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                    "rule_files:\n" + "".join(f"  - {p}\n" for p in rule_files) +
                    ("" if rule_files else "  []\n") +
                    "scrape_configs:\n  - job_name: rdmascope-lab\n    static_configs:\n"
                    f"      - targets: ['127.0.0.1:{lab.host_port}']\n")
        subprocess.run(["promtool", "check", "config", config], check=True,
                       capture_output=True)
        proc = subprocess.Popen(["prometheus", f"--config.file={config}",
                                 f"--storage.tsdb.path={work}/data",
                                 f"--web.listen-address=127.0.0.1:{port}"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    targets = api(port, "targets")["activeTargets"]
                    state = api(port, "query", query='rdma_port_state{device="rxe0"}')["result"]
                    if targets and targets[0]["health"] == "up" and state:
                        lab.result.update(health="up", port_state=float(state[0]["value"][1]),
                                          series=len(api(port, "series",
                                                         **{"match[]": '{job="rdmascope-lab"}'})))
                        groups = api(port, "rules")["groups"]
                        lab.result["rule_groups_files"] = len({g["file"] for g in groups})
                        break
                except (OSError, ValueError, KeyError):
                    pass
                time.sleep(0.5)
        finally:
            proc.terminate()
            proc.wait(timeout=20)


def check(lab):
    result = getattr(lab, "result", None)
    if result is None:
        return ["the host hook never ran"]
    failures = []
    if result.get("health") != "up":
        failures.append(f"Prometheus never saw a healthy target with RDMA series: {result}")
        return failures
    if result["port_state"] != 4.0:
        failures.append(f"rdma_port_state via Prometheus: {result['port_state']}, want 4")
    if result["rule_groups_files"] != result["rule_files"]:
        failures.append(f"rule files loaded {result['rule_groups_files']} of "
                        f"{result['rule_files']}")
    lab.notes.append(f"Prometheus scraped the guest: target up, {result['series']} series, "
                     f"{result['rule_files']} rule files loaded")
    return failures
