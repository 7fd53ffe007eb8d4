#!/usr/bin/env python3
"""Host tier: `rdmascope doctor --prometheus` (issue 29) against a real Prometheus scraping three
`serve` instances on sysfs fixtures (rdma_hosts.tree) that differ in one setting: mlx5_1's
SymbolErrorCounter is 31 on the third host, 0 on the other two.

- the IBA error finding is reported on the third instance and on no other, and every finding
  has its instance in its scope; the hosts' own findings are there for each instance;
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
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench"))
import harness  # noqa: E402
from prometheus_run import Prometheus, wait_listening  # noqa: E402

NS = "rdmascope-doctor-fleet"
PORTS = (9761, 9762, 9763)
PROMETHEUS_PORT = 9764
SYMBOL_ERROR = "class/infiniband/mlx5_1/ports/1/counters/symbol_error"


def doctor(binary, url, *args, timeout=120):
    started = time.monotonic()
    run = subprocess.run(["ip", "netns", "exec", NS, binary, "doctor", f"--prometheus={url}",
                          *args], capture_output=True, text=True, timeout=timeout)
    return run, time.monotonic() - started


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
    try:
        subprocess.run(["ip", "netns", "exec", NS, "ip", "link", "set", "lo", "up"], check=True)
        with tempfile.TemporaryDirectory(prefix="rdmascope-fleet-") as work:
            instances = []
            for i, port in enumerate(PORTS):
                sysfs = os.path.join(work, f"sysfs{i}")
                harness.materialise_tree(os.path.join(fixtures, "sysfs", "rdma_hosts.tree"), sysfs)
                with open(os.path.join(sysfs, SYMBOL_ERROR), "w") as f:
                    f.write("31\n" if i == 2 else "0\n")
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
                    if len(scraped) == 3:
                        break
                    time.sleep(0.5)
                expect("Prometheus scrapes the three", len(scraped), 3)
                selector = '--prometheus.selector={job=~"rdmascope-.*"}'
                run, _ = doctor(binary, url, selector, "--format=json", "--window=0s")
                try:
                    report = json.loads(run.stdout)
                except json.JSONDecodeError:
                    print(f"FAIL: not JSON: {run.stdout[:500]}\n{run.stderr[-2000:]}")
                    return 1
                findings = report["findings"]
                expect("every finding names its instance",
                       sorted({f["scope"].get("instance") for f in findings}), sorted(instances))
                iba = sorted((f["scope"]["instance"], f["scope"].get("device"),
                              f["scope"].get("counter"))
                             for f in findings if f["id"] == "links.iba_errors" and
                             f["severity"] == "warn")
                expect("the IBA error finding, on the third host only", iba,
                       [(instances[2], "mlx5_1", "symbol_error")])
                per_instance = {i: sorted({f["id"] for f in findings
                                           if f["scope"]["instance"] == i}) for i in instances}
                expect("each host has the same checks run",
                       per_instance[instances[0]] == per_instance[instances[1]] ==
                       per_instance[instances[2]] and "links.port_state" in
                       per_instance[instances[0]], True)
                expect("exit code: the worst is warn", run.returncode, 1)
                text, _ = doctor(binary, url, selector, "--window=0s")
                expect("text names the instance",
                       f"instance={instances[2]} device=mlx5_1 port=1 counter=symbol_error"
                       in text.stdout, True)

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
                 "import socket,time\ns=socket.socket()\ns.bind(('127.0.0.1',9765))\n"
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
        for proc in exporters:
            proc.terminate()
            proc.wait()
        subprocess.run(["ip", "netns", "delete", NS])
    return check.result()


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
