"""Alerting end to end (and every dashboard query against the same live Prometheus): the shipped rules, with every duration divided by 60 for the test (30m
becomes 30s; the shipped file is untouched), loaded in Debian's Prometheus; Debian's
Alertmanager routes to a webhook this test serves. The MR leak in the guest must reach the
webhook as RdmaMrLeak, and the guest's MTU configuration as RdmaNetdevMtuTooSmallForRoce and
RdmaActiveMtuBelowMax."""

import glob
import http.server
import json
import os
import re
import socket
import subprocess
import tempfile
import threading
import time
import urllib.parse
import urllib.request

import yaml

REPO = os.path.join(os.path.dirname(__file__), "..", "..", "..")
RULES = os.path.join(REPO, "rules", "rdmascope.rules.yml")
EXPECTED = {"RdmaMrLeak": {"comm": "mr_leaker"},
            "RdmaNetdevMtuTooSmallForRoce": {"device": "eth0"},
            "RdmaActiveMtuBelowMax": {"device": "rxe0"}}
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def shorten(duration):
    """'30m' -> '30s': every duration divided by 60, at least one second."""
    match = re.fullmatch(r"(\d+)([smhdw])", duration)
    seconds = max(1, int(match.group(1)) * UNITS[match.group(2)] // 60)
    return f"{seconds}s"


def shortened_rules(path):
    with open(path) as f:
        rules = yaml.safe_load(f)
    for group in rules["groups"]:
        for rule in group["rules"]:
            rule["expr"] = re.sub(r"\[(\d+[smhdw])\]", lambda m: f"[{shorten(m.group(1))}]",
                                  rule["expr"])
            if "for" in rule:
                rule["for"] = shorten(rule["for"])
    return rules


class Hook(http.server.BaseHTTPRequestHandler):
    received = []

    def do_POST(self):  # noqa: N802 - http.server's naming
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        Hook.received.append(json.loads(body))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


def delivered():
    """alertname -> labels of the firing alerts Alertmanager delivered."""
    alerts = {}
    for payload in Hook.received:
        for alert in payload.get("alerts", []):
            if alert.get("status") == "firing":
                alerts.setdefault(alert["labels"]["alertname"], []).append(alert["labels"])
    return alerts


def query_dashboards(port):
    """Runs every dashboard query against the live Prometheus (query variables: all values;
    custom variables, which may stand for a label name such as $workload_label: their current
    value, as Grafana fills them). Returns (queries, errors, queries with data)."""
    queries, errors, with_data = 0, [], 0
    for path in sorted(glob.glob(os.path.join(REPO, "dashboards", "*.json"))):
        with open(path) as f:
            board = json.load(f)
        custom = {v["name"]: v["current"]["value"] for v in board["templating"]["list"]
                  if v["type"] == "custom"}
        for panel in board["panels"]:
            for target in panel.get("targets", []):
                expr = re.sub(r"\$\{?__rate_interval\}?", "1m", target["expr"])
                for name, value in custom.items():
                    expr = re.sub(r"\$\{?" + name + r"\b\}?", value, expr)
                expr = re.sub(r"\$\{?\w+\}?", ".*", expr)
                queries += 1
                url = (f"http://127.0.0.1:{port}/api/v1/query?" +
                       urllib.parse.urlencode({"query": expr}))
                try:
                    with urllib.request.urlopen(url, timeout=5) as resp:
                        if json.load(resp)["data"]["result"]:
                            with_data += 1
                except (OSError, ValueError) as err:
                    errors.append(f"{os.path.basename(path)} {panel['title']!r}: {err}")
    return queries, errors, with_data


def on_wait(tag, lab):
    if tag != "alerting":
        return
    lab.result = {}
    hook_server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=hook_server.serve_forever, daemon=True).start()
    am_port, prom_port = free_port(), free_port()
    with tempfile.TemporaryDirectory(prefix="rdmascope-alerting-") as work:
        rules = os.path.join(work, "rules.yml")
        with open(rules, "w") as f:
            yaml.safe_dump(shortened_rules(RULES), f)
        am_config = os.path.join(work, "alertmanager.yml")
        with open(am_config, "w") as f:
            yaml.safe_dump({"route": {"receiver": "hook", "group_by": ["alertname"],
                                      "group_wait": "1s", "group_interval": "1s",
                                      "repeat_interval": "1h"},
                            "receivers": [{"name": "hook", "webhook_configs": [
                                {"url": f"http://127.0.0.1:{hook_server.server_port}/"}]}]}, f)
        prom_config = os.path.join(work, "prometheus.yml")
        with open(prom_config, "w") as f:
            yaml.safe_dump({"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                            "rule_files": [rules],
                            "alerting": {"alertmanagers": [
                                {"static_configs": [{"targets": [f"127.0.0.1:{am_port}"]}]}]},
                            "scrape_configs": [{"job_name": "rdmascope-lab", "static_configs": [
                                {"targets": [f"127.0.0.1:{lab.host_port}"]}]}]}, f)
        subprocess.run(["promtool", "check", "config", prom_config], check=True,
                       capture_output=True)
        subprocess.run(["amtool", "check-config", am_config], check=True, capture_output=True)
        alertmanager = subprocess.Popen(
            ["prometheus-alertmanager", f"--config.file={am_config}",
             f"--storage.path={work}/am", f"--web.listen-address=127.0.0.1:{am_port}",
             "--cluster.listen-address="], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        prometheus = subprocess.Popen(
            ["prometheus", f"--config.file={prom_config}", f"--storage.tsdb.path={work}/data",
             f"--web.listen-address=127.0.0.1:{prom_port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        start = time.monotonic()
        try:
            while time.monotonic() - start < 110:
                got = delivered()
                if all(name in got for name in EXPECTED):
                    break
                time.sleep(1)
            lab.result["delivered"] = delivered()
            lab.result["dashboards"] = query_dashboards(prom_port)
            lab.result["seconds"] = time.monotonic() - start
            try:
                with urllib.request.urlopen(
                        f"http://127.0.0.1:{prom_port}/api/v1/alerts", timeout=5) as resp:
                    lab.result["firing_in_prometheus"] = sorted(
                        {a["labels"]["alertname"] for a in json.load(resp)["data"]["alerts"]
                         if a["state"] == "firing"})
            except OSError as err:
                lab.result["firing_in_prometheus"] = repr(err)
        finally:
            for proc in (prometheus, alertmanager):
                proc.terminate()
                proc.wait(timeout=20)
            hook_server.shutdown()


def check(lab):
    failures = []
    result = getattr(lab, "result", None)
    if not result:
        return ["the host hook did not run"]
    got = result["delivered"]
    for name, labels in EXPECTED.items():
        matching = [l for l in got.get(name, []) if labels.items() <= l.items()]
        if not matching:
            failures.append(f"{name} with {labels} not delivered by Alertmanager "
                            f"(delivered: {sorted(got)}; firing in Prometheus: "
                            f"{result.get('firing_in_prometheus')})")
    queries, errors, with_data = result["dashboards"]
    failures += [f"dashboard query failed: {e}" for e in errors]
    if queries == 0:
        failures.append("no dashboard query ran")
    lab.notes.append(f"host: {queries} dashboard queries ran against the live Prometheus, "
                     f"{with_data} returned data, {len(errors)} failed")
    lab.notes.append(f"host: Alertmanager delivered {sorted(got)} within "
                     f"{result['seconds']:.0f} s; firing in Prometheus: "
                     f"{result.get('firing_in_prometheus')}")
    return failures
