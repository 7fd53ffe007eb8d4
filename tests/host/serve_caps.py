#!/usr/bin/env python3
"""Host tier: least privilege (issue 15). `rdmascope serve` started as root, and as `nobody`
with the documented start-up capabilities as ambient capabilities (setpriv), keeps exactly the
documented serving set on EVERY thread (capabilities are per thread: the HTTP threads must not
hold more than the main one), nothing inheritable or ambient, no_new_privs set, and every
collector still works after the drop: probes attached and counting a workload of another user,
/debug/mr/stacks symbolised, perf events counting. Without CAP_SYS_ADMIN at start-up the probes
say so once and the rest is served; --capabilities.keep=none leaves no capability at all.
Both lists are read from docs/security.md ("Final list"), so the test holds the document."""

import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
import harness  # noqa: E402

# <linux/capability.h>
CAP_NUMBERS = {"CAP_DAC_READ_SEARCH": 2, "CAP_NET_BIND_SERVICE": 10, "CAP_NET_ADMIN": 12,
               "CAP_SYS_PTRACE": 19, "CAP_SYS_ADMIN": 21, "CAP_PERFMON": 38, "CAP_BPF": 39}
NOBODY = "65534"


def documented_lists(security_md):
    """(start-up list, default serving list, the capability broker's list) from the marked
    block of docs/security.md."""
    with open(security_md, encoding="utf-8") as f:
        text = f.read()
    block = text[text.index("<!-- capabilities:begin"):text.index("<!-- capabilities:end")]
    start = re.search(r"^    (CAP_[A-Z_ ]+)$", block, re.M).group(1).split()
    serving = re.search(r"by default \*\*`([A-Z_ ]+)`\*\*", block).group(1).split()
    broker = re.search(r"the capability broker holds\s+\*\*`([A-Z_ ]+)`\*\*", block).group(1).split()
    return start, serving, broker


def broker_pids(pid):
    """The exporter's capability broker processes (its children running __capability-broker)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if parent == pid and len(argv) > 1 and argv[1] == b"__capability-broker":
            found.append(int(entry))
    return found


def process_status(pid):
    with open(f"/proc/{pid}/status", encoding="utf-8") as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


def check_broker(checks, case, pid, broker_mask, bounding_mask=None):
    """One broker, holding exactly its capabilities, as nobody, confined."""
    pids = broker_pids(pid)
    checks.expect(f"{case}: one capability broker", len(pids), 1)
    if len(pids) != 1:
        return
    status = process_status(pids[0])
    got = {key: int(status[key], 16) for key in ("CapEff", "CapPrm", "CapInh", "CapAmb")}
    want = {"CapEff": broker_mask, "CapPrm": broker_mask, "CapInh": 0, "CapAmb": 0}
    if bounding_mask is not None:
        got["CapBnd"], want["CapBnd"] = int(status["CapBnd"], 16), bounding_mask
    checks.expect(f"{case}: broker capability sets", got, want)
    checks.expect(f"{case}: broker uid, no_new_privs, seccomp",
                  (status["Uid"].split()[0], status["NoNewPrivs"], status["Seccomp"]),
                  (NOBODY, "1", "2"))


def mask(names):
    return sum(1 << CAP_NUMBERS[name] for name in names)


def thread_status(pid):
    """{tid: {field: value}} for every thread of pid: the Cap* masks and NoNewPrivs."""
    threads = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        fields = {}
        with open(f"/proc/{pid}/task/{tid}/status", encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.startswith("Cap"):
                    fields[key] = int(value, 16)
                elif key == "NoNewPrivs":
                    fields[key] = int(value)
        threads[tid] = fields
    return threads


def check_threads(checks, case, pid, kept_mask, bounding_mask=None):
    threads = thread_status(pid)
    # Main thread, the /doctor thread and --web.threads=2 HTTP threads at least.
    checks.expect(f"{case}: more than 3 threads inspected", len(threads) > 3, True)
    for tid, fields in sorted(threads.items()):
        got = {k: fields[k] for k in ("CapEff", "CapPrm", "CapInh", "CapAmb", "NoNewPrivs")}
        want = {"CapEff": kept_mask, "CapPrm": kept_mask, "CapInh": 0, "CapAmb": 0,
                "NoNewPrivs": 1}
        if bounding_mask is not None:
            got["CapBnd"], want["CapBnd"] = fields["CapBnd"], bounding_mask
        checks.expect(f"{case}: thread {tid} capability sets", got, want)


def check_collectors(checks, case, exporter, workloads, library):
    """Every collector works after the drop: probes count a root workload (another user than
    a `nobody` exporter), stacks are symbolised, perf counts."""
    samples = harness.parse(exporter.metrics())
    for collector in ("ethtool", "rdma", "resources", "mr", "verbs", "perf", "occupancy", "host"):
        checks.expect(f"{case}: {collector} succeeded",
                      harness.value(samples, "rdmascope_collector_success", collector=collector),
                      1.0)
    for probe in ("mr", "verbs"):
        checks.expect(f"{case}: {probe} probes attached",
                      harness.value(samples, "rdmascope_probe_attached", probe=probe), 1.0)
    checks.expect(f"{case}: cpu-clock counted",
                  harness.value(samples, "rdma_perf_event_supported", event="cpu-clock"), 1.0)
    mr_workload, verbs_workload = workloads
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(library))
    # 2 threads x (5 registered - 3 deregistered) = 4 outstanding regions.
    mr = subprocess.Popen([mr_workload, "2", "5", "8192", "2", "0", "0"], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, env=env, text=True)
    verbs = subprocess.Popen([verbs_workload], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             env=env, text=True)
    try:
        mr_pid = mr.stdout.readline().split()[1]
        verbs_pid = verbs.stdout.readline().split()[1]
        samples = harness.parse(exporter.metrics())
        checks.expect(f"{case}: MR regions of a root process",
                      harness.value(samples, "rdma_mr_outstanding_regions", pid=mr_pid), 4.0)
        checks.expect(f"{case}: CQs of a root process", len(harness.series(
            samples, "rdma_cq_capacity_entries", pid=verbs_pid)), 3)
        # Leak age is 0s: every outstanding region is a suspect with a symbolised stack.
        status, body = exporter.get("/debug/mr/stacks")
        functions = {frame["function"].split("+")[0]
                     for process in json.loads(body)["processes"] if str(process["pid"]) == mr_pid
                     for stack in process["stacks"] for frame in stack["frames"]}
        checks.expect(f"{case}: /debug/mr/stacks names the registering function",
                      (status, "work" in functions), (200, True))
    finally:
        for proc in (mr, verbs):
            proc.communicate("x\nx\n", timeout=30)


def free_privileged_port():
    for port in range(990, 900, -1):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    raise RuntimeError("no free port in 901-990")


def wait_for_scrape(port, proc, timeout=60):
    """The /metrics body once the exporter answers (it binds before loading its probes, so the
    port accepts before it serves)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"exporter exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                return r.read().decode()
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"no answer on port {port} within {timeout} s")


def main(binary, mr_workload, verbs_workload, library, security_md):
    if os.geteuid() != 0:
        print("SKIP: needs root (setpriv, BPF)")
        return harness.SKIP
    # `nobody` execs it before its ambient capabilities take effect: a copy it can reach.
    with harness.reachable_copy(binary) as copy:
        return check_all(copy, mr_workload, verbs_workload, library, security_md)


def check_all(binary, mr_workload, verbs_workload, library, security_md):
    start, serving, broker = documented_lists(security_md)
    print(f"documented: start-up {start}, serving {serving}, broker {broker}")
    checks = harness.Checker()
    checks.expect("CAP_SYS_ADMIN and CAP_BPF never kept",
                  {"CAP_SYS_ADMIN", "CAP_BPF"} & set(serving + broker), set())
    checks.expect("the serving process holds neither CAP_SYS_PTRACE nor CAP_DAC_READ_SEARCH",
                  {"CAP_SYS_PTRACE", "CAP_DAC_READ_SEARCH"} & set(serving), set())
    ambient = ",".join("+" + name.lower()[4:] for name in start)
    as_nobody = ["--reuid=" + NOBODY, "--regid=" + NOBODY, "--clear-groups",
                 f"--inh-caps=-all,{ambient}", f"--ambient-caps=-all,{ambient}", "--", binary]
    with tempfile.TemporaryDirectory(prefix="rdmascope-caps-") as stats:
        os.chmod(stats, 0o755)
        args = ["--web.threads=2", "--collector.mr", "--collector.verbs", "--collector.perf",
                "--collector.perf.event=cpu-clock", "--collector.ethtool", "--collector.host",
                "--collector.occupancy", f"--collector.occupancy.dir={stats}", "--collector.rdma",
                "--collector.resources", f"--probe.library={library}", "--collector.mr.leak-age=0s"]
        cases = [("root", binary, (), mask(serving)),
                 ("nobody with ambient capabilities", "setpriv", as_nobody, None)]
        for case, program, prefix, bounding in cases:
            with harness.Exporter(program, args, prefix=prefix) as exporter:
                check_threads(checks, case, exporter.proc.pid, mask(serving), bounding)
                check_broker(checks, case, exporter.proc.pid, mask(broker),
                             mask(broker) if bounding is not None else None)
                checks.expect(f"{case}: broker up", harness.value(
                    harness.parse(exporter.metrics()), "rdmascope_capability_broker_up"), 1.0)
                checks.expect(f"{case}: log says what was kept",
                              "msg=\"capabilities dropped\" kept=" +
                              ",".join(sorted([n.lower() for n in serving],
                                              key=lambda n: CAP_NUMBERS[n.upper()]))
                              in exporter.read_log(), True)
                check_collectors(checks, case, exporter, (mr_workload, verbs_workload), library)
                samples = harness.parse(exporter.metrics())
                checks.expect(f"{case}: maps and files asked of the broker", all(
                    harness.value(samples, "rdmascope_capability_broker_requests_total",
                                  request=request) > 0
                    for request in ("maps", "open_mapping", "uverbs_holders", "namespaces")), True)

        # Without CAP_SYS_ADMIN at start-up: the probes say so once, the rest is served.
        without = ",".join("+" + n.lower()[4:] for n in start if n != "CAP_SYS_ADMIN")
        prefix = ["--reuid=" + NOBODY, "--regid=" + NOBODY, "--clear-groups",
                  f"--inh-caps=-all,{without}", f"--ambient-caps=-all,{without}", "--", binary]
        with harness.Exporter("setpriv", args, prefix=prefix) as exporter:
            for _ in range(3):
                samples = harness.parse(exporter.metrics())
            log = exporter.read_log()
            checks.expect("no CAP_SYS_ADMIN: mr probes not attached",
                          harness.value(samples, "rdmascope_probe_attached", probe="mr"), 0.0)
            checks.expect("no CAP_SYS_ADMIN: said once", log.count("mr probes not attached"), 1)
            checks.expect("no CAP_SYS_ADMIN: perf still counts", harness.value(
                samples, "rdma_perf_event_supported", event="cpu-clock"), 1.0)
            checks.expect("no CAP_SYS_ADMIN: ethtool still served", harness.value(
                samples, "rdmascope_collector_success", collector="ethtool"), 1.0)

        # A privileged port as `nobody`: CAP_NET_BIND_SERVICE at start-up binds the socket
        # before the drop, and is not kept while serving.
        port = free_privileged_port()
        bind = ",".join("+" + n.lower()[4:] for n in [*start, "CAP_NET_BIND_SERVICE"])
        command = ["setpriv", "--reuid=" + NOBODY, "--regid=" + NOBODY, "--clear-groups",
                   f"--inh-caps=-all,{bind}", f"--ambient-caps=-all,{bind}", "--", binary,
                   "serve", f"--web.listen-address=127.0.0.1:{port}", *args]
        with subprocess.Popen(command, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) as proc:
            try:
                body = wait_for_scrape(port, proc)
                checks.expect(f"privileged port {port}: served as nobody",
                              "rdmascope_build_info" in body, True)
                check_threads(checks, f"privileged port {port}", proc.pid, mask(serving))
            finally:
                proc.terminate()
                proc.wait(timeout=30)

        # --no-capabilities.broker: the serving process keeps the broker's two itself.
        with harness.Exporter(binary, [*args, "--no-capabilities.broker"]) as exporter:
            check_threads(checks, "no broker", exporter.proc.pid, mask(serving + broker),
                          mask(serving + broker))
            checks.expect("no broker: no broker process", broker_pids(exporter.proc.pid), [])
            check_collectors(checks, "no broker", exporter, (mr_workload, verbs_workload),
                             library)

        # --capabilities.keep=none: nothing at all, and perf events opened at start-up count.
        with harness.Exporter(binary, [*args, "--capabilities.keep=none"]) as exporter:
            check_threads(checks, "keep=none", exporter.proc.pid, 0, 0)
            checks.expect("keep=none: no broker process", broker_pids(exporter.proc.pid), [])
            samples = harness.parse(exporter.metrics())
            checks.expect("keep=none: cpu-clock still counted", harness.value(
                samples, "rdma_perf_event_supported", event="cpu-clock"), 1.0)
    for failure in checks.failures:
        print("FAIL:", failure)
    return 1 if checks.failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:6]))
