#!/usr/bin/env python3
"""Host tier: `rdmascope doctor --prometheus` (issue 29) against a real Prometheus scraping three
`serve` instances on sysfs fixtures (rdma_hosts.tree) that differ in one setting each, and a
fourth that Prometheus scraped once and then lost (its exporter stopped):
  - the first host runs mlx5_0 (board MT_0000000359) on firmware 22.35.1012, the others
    22.36.1010;
  - the second host's mlx5_0 port trained at 50 Gb/s, the others' at 100;
  - the third host's mlx5_1 SymbolErrorCounter is 31 and grows by about 100 a second, the
    others' stays 0.

- the IBA error finding is reported on the third instance and on no other, and every finding
  has its instance in its scope; the hosts' own findings are there for each instance;
- fleet drift: fleet.firmware on the first instance, fleet.link_rate on the second,
  fleet.symbol_errors on the third (with a window), fleet.host_down (crit) on the fourth, each
  on that instance and no other;
- by default the ok findings are counted per check (ok_by_check), not listed, and the report
  lists its queries (instant ones and the history's range query, each with the selector);
- the report as a page (--format html) renders in headless chromium: the host down a crit row,
  findings linked to their host's /runbook, the queries' table;
- a second Prometheus evaluating the fleet rules (rules/rdmascope.fleet.rules.yml): doctor reads
  their recorded rows and reports the same setting findings as from its own computation, judged
  against the rules' count of the cluster's hosts per value;
- a selector that matches no host, a Prometheus that is down, one that never answers (within
  --prometheus.timeout) and one that answers an error (a bad regex) each give a clear message on
  stderr and exit 3.

Usage: doctor_prometheus.py RDMASCOPE FIXTURES"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench"))
import harness  # noqa: E402
from prometheus_run import Prometheus, wait_listening  # noqa: E402
from profile_html_chromium import chromium, chromium_binary  # noqa: E402
from doctor_html_chromium import Links  # noqa: E402

NS = "rdmascope-doctor-fleet"
PORTS = (9761, 9762, 9763)
PROMETHEUS_PORT = 9764
STOPPED_PORT = 9765  # the fourth target's, free again for the silent socket at the end
RULED_PORT = 9766  # a second Prometheus, evaluating the fleet rules
RULES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "rules")
SETTINGS_NOT_COMPARED = {"fleet.host_down", "fleet.no_rdma_device", "fleet.crc_errors",
                         "fleet.symbol_errors", "fleet.out_of_sequence",
                         "fleet.congestion_notifications", "fleet.pause_frames"}
SYMBOL_ERROR = "class/infiniband/mlx5_1/ports/1/counters/symbol_error"
FIRMWARE = "class/infiniband/mlx5_0/fw_ver"
RATE = "class/infiniband/mlx5_0/ports/1/rate"
WINDOW = 10  # seconds, for the symbol error rate


def write(root, path, text):
    with open(os.path.join(root, path), "w") as f:
        f.write(text + "\n")


def count_symbol_errors(path, stop):
    """The third host's bad link: about 100 symbol errors a second until `stop` is set."""
    count = 31
    while not stop.wait(0.2):
        count += 20
        write(path, SYMBOL_ERROR, str(count))


def flagged(findings, check_id):
    """(instance, device) of the drift findings of `check_id` (warn, crit)."""
    return sorted((f["scope"]["instance"], f["scope"].get("device")) for f in findings
                  if f["id"] == check_id and f["severity"] in ("warn", "crit"))


def setting_findings(findings):
    """The verdicts of the fleet setting checks (not the rates, not the hosts down or missing):
    check, severity, scope, and a host's observed value. The words of `expected` and of a
    group's finding name the reference, which differs by design: the group's hosts when doctor
    computes, the cluster's count (cluster_board_id_setting_value:rdma_fleet_hosts:count) when
    the rules record it."""
    return sorted(json.dumps([f["id"], f["severity"], f["scope"],
                              f["observed"] if f["scope"].get("instance") != "*" else ""],
                             sort_keys=True)
                  for f in findings
                  if f["area"] == "fleet" and f["id"] not in SETTINGS_NOT_COMPARED)


def doctor(binary, url, *args, timeout=120):
    started = time.monotonic()
    run = subprocess.run(["ip", "netns", "exec", NS, binary, "doctor", f"--prometheus={url}",
                          *args], capture_output=True, text=True, timeout=timeout)
    return run, time.monotonic() - started


def html_report(binary, url, selector, instances, expect):
    """The fleet report as a page (--format html), rendered by headless chromium."""
    browser = chromium_binary()
    if browser is None:
        print("note: no chromium, the HTML report is not rendered")
        return
    page, _ = doctor(binary, url, selector, "--format=html", "--window=0s")
    with tempfile.NamedTemporaryFile("w", suffix=".html", prefix="rdmascope-fleet-") as f:
        f.write(page.stdout)
        f.flush()
        dom_text, console = chromium(browser, "file://" + f.name, "--dump-dom")
    dom = Links()
    dom.feed(dom_text)
    expect("html: the heading", dom.text["h1"].strip(), "rdmascope doctor")
    expect("html: the host down is a crit row", dom.classes.get("tr.crit", 0) >= 1, True)
    expect("html: findings link their host's runbook",
           any(h.startswith(f"http://{instances[2]}/runbook#") for h in dom.hrefs), True)
    expect("html: the queries' table", "query_range" not in dom_text and "unless" in dom_text,
           True)
    expect("html: no console message", console, [])


def main(binary, fixtures):
    if os.geteuid() != 0:
        print("SKIP: network namespaces need root")
        return harness.SKIP
    prometheus = shutil.which("prometheus")
    if not prometheus:
        print("SKIP: no prometheus")
        return harness.SKIP
    check = harness.Checker()
    expect = check.expect
    subprocess.run(["ip", "netns", "add", NS], check=True)
    exporters = []
    stop = threading.Event()
    try:
        subprocess.run(["ip", "netns", "exec", NS, "ip", "link", "set", "lo", "up"], check=True)
        with tempfile.TemporaryDirectory(prefix="rdmascope-fleet-") as work:
            instances = []
            for i, port in enumerate(PORTS + (STOPPED_PORT,)):
                sysfs = os.path.join(work, f"sysfs{i}")
                harness.materialise_tree(os.path.join(fixtures, "sysfs", "rdma_hosts.tree"), sysfs)
                write(sysfs, SYMBOL_ERROR, "31" if i == 2 else "0")
                if i == 0:
                    write(sysfs, FIRMWARE, "22.35.1012")
                if i == 1:
                    write(sysfs, RATE, "50 Gb/sec (1X HDR)")
                if i == 2:
                    threading.Thread(target=count_symbol_errors, args=(sysfs, stop),
                                     daemon=True).start()
                proc = subprocess.Popen(
                    ["ip", "netns", "exec", NS, binary, "serve", f"--web.listen-address=127.0.0.1:{port}",
                     "--collector.disable-defaults", "--collector.rdma", f"--path.sysfs={sysfs}"],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                exporters.append(proc)
                wait_listening(NS, port, proc, timeout=60)
                instances.append(f"127.0.0.1:{port}")
            jobs = {f"rdmascope-{i}": target for i, target in enumerate(instances)}
            with Prometheus(NS, prometheus, work, jobs, port=PROMETHEUS_PORT) as prom:
                url = f"http://127.0.0.1:{PROMETHEUS_PORT}"
                deadline = time.monotonic() + 60
                scraped = []
                while time.monotonic() < deadline:
                    scraped = prom._get('up{job=~"rdmascope-.*"} == 1')
                    if len(scraped) == 4:
                        break
                    time.sleep(0.5)
                expect("Prometheus scrapes the four", len(scraped), 4)
                first_scrape = time.monotonic()  # a few seconds after start: discovery's delay
                # The fourth exporter stops: Prometheus marks it down at its next scrape.
                exporters[3].terminate()
                exporters[3].wait()
                while time.monotonic() < deadline:
                    if prom._get(f'up{{instance="{instances[3]}"}} == 0'):
                        break
                    time.sleep(0.5)
                selector = '--prometheus.selector={job=~"rdmascope-.*"}'
                run, _ = doctor(binary, url, selector, "--format=json", "--window=0s",
                                "--show-ok")
                try:
                    report = json.loads(run.stdout)
                except json.JSONDecodeError:
                    print(f"FAIL: not JSON: {run.stdout[:500]}\n{run.stderr[-2000:]}")
                    return 1
                findings = report["findings"]
                expect("every finding names its instance (\"*\": a fleet group)",
                       sorted({f["scope"].get("instance") for f in findings}),
                       sorted(instances + ["*"]))
                expect("host findings only for the hosts that answer",
                       sorted({f["scope"]["instance"] for f in findings
                               if f["area"] != "fleet"}), sorted(instances[:3]))
                expect("fleet.firmware: mlx5_0 of the first host only",
                       flagged(findings, "fleet.firmware"), [(instances[0], "mlx5_0")])
                expect("fleet.link_rate: mlx5_0 of the second host only",
                       flagged(findings, "fleet.link_rate"), [(instances[1], "mlx5_0")])
                expect("fleet.host_down: the fourth only, crit",
                       [(f["scope"]["instance"], f["severity"]) for f in findings
                        if f["id"] == "fleet.host_down" and f["severity"] != "ok"],
                       [(instances[3], "crit")])
                firmware = [f for f in findings if f["id"] == "fleet.firmware" and
                            f["severity"] == "warn"]
                expect("fleet.firmware names the majority and its hosts",
                       bool(firmware) and "22.36.1010, as 2 of the 3 hosts" in
                       firmware[0]["expected"], True)
                expect("no other host drifts",
                       sorted({f["scope"]["instance"] for f in findings if f["area"] == "fleet"
                               and f["severity"] in ("warn", "crit")}), sorted(instances[:2] +
                                                                               instances[3:]))
                iba = sorted((f["scope"]["instance"], f["scope"].get("device"),
                              f["scope"].get("counter"))
                             for f in findings if f["id"] == "links.iba_errors" and
                             f["severity"] == "warn")
                expect("the IBA error finding, on the third host only", iba,
                       [(instances[2], "mlx5_1", "symbol_error")])
                per_instance = {i: sorted({f["id"] for f in findings if f["area"] != "fleet"
                                           and f["scope"]["instance"] == i}) for i in instances}
                expect("each host has the same checks run",
                       per_instance[instances[0]] == per_instance[instances[1]] ==
                       per_instance[instances[2]] and "links.port_state" in
                       per_instance[instances[0]], True)
                expect("exit code: the worst is crit (a host down)", run.returncode, 2)
                text, _ = doctor(binary, url, selector, "--window=0s")
                expect("text names the instance",
                       f"instance={instances[2]} device=mlx5_1 port=1 counter=symbol_error"
                       in text.stdout, True)
                expect("text: the fleet drift section",
                       "== Fleet drift ==" in text.stdout and
                       f"[CRIT] fleet.host_down  instance={instances[3]}" in text.stdout, True)

                # By default the ok findings are counted, not listed, and the queries listed.
                counted, _ = doctor(binary, url, selector, "--format=json", "--window=0s")
                summary = json.loads(counted.stdout) if counted.stdout else {}
                expect("ok findings counted, not listed",
                       [f["id"] for f in summary.get("findings", []) if f["severity"] == "ok"],
                       [])
                expect("ok_by_check counts them",
                       sum(summary.get("ok_by_check", {}).values()),
                       sum(1 for f in findings if f["severity"] == "ok"))
                ran = summary.get("queries", [])
                # All but the fleet rules' group figures, which carry no instance or job to
                # select by (docs/doctor.md, "The reference is the cluster's").
                selected = [q for q in ran if "rdma_fleet_hosts:count" not in q["promql"]]
                expect("the report lists its queries: instant ones and the history's range",
                       (any(q.get("start") for q in ran), any(not q.get("start") for q in ran),
                        all(selector.split("=", 1)[1][1:-1] in q["promql"] for q in selected),
                        len(ran) - len(selected)),
                       (True, True, True, 1))
                expect("instances", summary.get("instances"), 4)
                html_report(binary, url, selector, instances, expect)

                # Rates over a window: once Prometheus has scraped for longer than it.
                time.sleep(max(0.0, WINDOW + 2 - (time.monotonic() - first_scrape)))
                rated, _ = doctor(binary, url, selector, "--format=json", f"--window={WINDOW}s")
                rated_findings = json.loads(rated.stdout)["findings"] if rated.stdout else []
                expect("fleet.symbol_errors: mlx5_1 of the third host only",
                       flagged(rated_findings, "fleet.symbol_errors"),
                       [(instances[2], "mlx5_1")])
                symbol = [f for f in rated_findings if f["id"] == "fleet.symbol_errors" and
                          f["severity"] == "warn"]
                expect("fleet.symbol_errors says the median",
                       bool(symbol) and "the median of the 3 ports on 3 hosts" in
                       symbol[0]["observed"], True)

                # A Prometheus evaluating the fleet rules: doctor judges their recorded rows
                # (rdma:fleet_setting:value) and says what it said from its own computation.
                ruled_dir = os.path.join(work, "ruled")
                os.makedirs(ruled_dir)
                ruled_jobs = {job: target for job, target in jobs.items()
                              if target != instances[3]}
                with Prometheus(NS, prometheus, ruled_dir, ruled_jobs, port=RULED_PORT,
                                rules=[os.path.join(RULES, "rdmascope.rules.yml"),
                                       os.path.join(RULES, "rdmascope.fleet.rules.yml")]) as ruled:
                    recorded = []
                    until = time.monotonic() + 60
                    while time.monotonic() < until:
                        recorded = ruled._get("count by (instance) (rdma:fleet_setting:value)")
                        if len(recorded) == 3:
                            break
                        time.sleep(0.5)
                    expect("the fleet rules record the three hosts' settings", len(recorded), 3)
                    from_rules, _ = doctor(binary, f"http://127.0.0.1:{RULED_PORT}", selector,
                                           "--format=json", "--window=0s", "--show-ok")
                    ruled_report = json.loads(from_rules.stdout) if from_rules.stdout else {}
                    read = [q for q in ruled_report.get("queries", [])
                            if "rdma:fleet_setting:value" in q["promql"]]
                    expect("doctor read the recorded rows",
                           bool(read) and read[0].get("series", 0) > 0, True)
                    expect("the same setting findings from the rules' rows as computed",
                           setting_findings(ruled_report.get("findings", [])),
                           setting_findings(findings))
                    firmware = [f for f in ruled_report.get("findings", [])
                                if f["id"] == "fleet.firmware" and f["severity"] == "warn"]
                    expect("judged against the rules' count of the cluster's hosts",
                           bool(firmware) and "(the fleet rules' count)" in
                           firmware[0]["expected"], True)

                # Nothing to report on: a selector matching no host.
                empty, _ = doctor(binary, url, '--prometheus.selector={job="nobody"}')
                expect("no series: exit 3", empty.returncode, 3)
                expect("no series: says so", "has no rdmascope series" in empty.stderr, True)
                # An error answer: Prometheus refuses a bad regex (bad_data).
                bad, _ = doctor(binary, url, '--prometheus.selector={job=~"("}')
                expect("error answer: exit 3", bad.returncode, 3)
                expect("error answer: Prometheus' reason", "bad_data" in bad.stderr, True)
            # Down: nothing listens on the port any more.
            down, _ = doctor(binary, url)
            expect("down: exit 3", down.returncode, 3)
            expect("down: says so", "doctor could not read the fleet" in down.stderr, True)
            # Slow: a socket that accepts connections and never answers.
            silent = subprocess.Popen(
                ["ip", "netns", "exec", NS, sys.executable, "-c",
                 "import socket,time\ns=socket.socket()\n"
                 "s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\ns.bind(('127.0.0.1',9765))\n"
                 "s.listen(16)\nprint('READY',flush=True)\ntime.sleep(120)"],
                stdout=subprocess.PIPE, text=True)
            silent.stdout.readline()
            slow, seconds = doctor(binary, "http://127.0.0.1:9765", "--prometheus.timeout=1s")
            silent.kill()
            silent.wait()
            expect("slow: exit 3", slow.returncode, 3)
            expect("slow: within the timeout (a few seconds)", seconds < 10, True)
            expect("slow: says so", "doctor could not read the fleet" in slow.stderr, True)
    finally:
        stop.set()
        for proc in exporters:
            proc.terminate()
            proc.wait()
        subprocess.run(["ip", "netns", "delete", NS])
    return check.result()


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
