#!/usr/bin/env python3
"""Benchmark (reported, never asserted) of `rdmascope doctor --prometheus` on a 1,000-host fleet
(issue 29, item 4: "the report completes in under 10 s with bounded queries, and says which
queries it ran").

1. A host's series: one `serve` on the sysfs fixture rdma_hosts.tree (collectors rdma, ethtool,
   host), scraped once, plus what the fixture cannot give without hardware, from the golden
   expositions of the unit tests: four netdevs' rdma_netdev_* series and a subset of their
   rdma_ethtool_stat (packets, bytes, errors, drops, pause), the host tuning series (PCIe, ECN,
   IRQ/XPS, modules, huge pages), per-process MR, verbs and resource series; the collectors'
   outcomes for all of them, and Prometheus' own `up`/`scrape_*` series.
2. N hosts (--hosts, default 1,000), instance="host-NNNN:9879", job="rdmascope", 4 clusters;
   four hosts differ: a port DOWN (lost link: netdev up, no carrier), another firmware on
   mlx5_0, symbol errors over the threshold and rising, CRC errors rising. Samples every 15 s
   from 15 min before generation to --ahead seconds after it (counters rise), as OpenMetrics;
   `promtool tsdb create-blocks-from openmetrics`; Prometheus on those blocks (no scrape target)
   in a network namespace. Samples after the wall clock are invisible to a query at the wall
   clock: at every run the newest visible sample is under 15 s old, as under a live scrape,
   however long the backfill took (if it leaves the runs enough of --ahead; the bench fails
   saying so otherwise).
3. `doctor --prometheus URL --prometheus.job=rdmascope --format=json`: one cold run with
   --log.level=debug, then --runs timed runs with the default window (5m) and --runs with
   --window=0s, each under /usr/bin/time -v (max RSS, CPU); Prometheus' CPU per run. The
   queries the report lists (with the series, bytes and seconds doctor saw) are replayed by
   curl, plain and gzipped (doctor asks for gzip).
4. Table on stdout and OUTPUT_DIR/fleet.md, figures in OUTPUT_DIR/fleet.json.

Usage: fleet_bench.py RDMASCOPE FIXTURES OUTPUT_DIR [--hosts N] [--runs N] [--ahead S]
                      [--baseline OTHER_RDMASCOPE]"""

import argparse
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
import harness  # noqa: E402
from prometheus_run import (Prometheus, cpu_seconds, memory_kib, scrape_text,  # noqa: E402
                            wait_listening)

NS = "rdmascope-fleet-bench"
PROMETHEUS_PORT = 9771
SERVE_PORT = 9772
JOB = "rdmascope"
CLUSTERS = ("cluster-a", "cluster-b", "cluster-c", "cluster-d")
INTERVAL = 15          # s between samples, as a common scrape interval
HISTORY = 900          # s of samples before generation
SYMBOL_ERROR_THRESHOLD = 10  # infiniband-diags' error_thresholds default for SymbolErrorCounter

# What the fixture cannot give without hardware, from the unit tests' golden expositions.
NETDEVS = ("ens1f0np0", "ens801f0", "ens785f0", "enp65s0f0np0")
ETHTOOL_STATS = re.compile(
    r"(rx|tx)_(packets|bytes)(_phy)?|.*(err|drop|discard|pause|cnp|ecn|out_of).*")
# Port and NIC counters that move with traffic (the others, errors and congestion included, and
# the process and MR counters, hold still on a healthy host).
TRAFFIC = re.compile(r"packets|pkts|bytes|_data|requests|sends|recvs|Rcvs|UDP|Writes")
NOT_TRAFFIC = re.compile(r"err|drop|discard|pause|crc|symbol|fail|lost|ecn|cnp")
SERIES = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\S+)?$")


def parse_exposition(text):
    """[(name, labels as written between the braces, value)] of a text exposition."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SERIES.match(line)
        if m:
            out.append((m.group(1), m.group(2) or "", m.group(3)))
    return out


def label(labels, name):
    m = re.search(r'(?:^|,)' + name + r'="([^"\\]*)"', labels)
    return m.group(1) if m else None


def host_template(live, golden):
    """A host's series: [(name, labels, value)], the live scrape first, deduplicated."""
    series = []
    for name, labels, value in parse_exposition(live):
        if name.startswith("rdma_host_"):
            continue  # this VM's; the golden host tuning is a real RDMA host's
        if name == "rdma_port_info":  # RDMA netlink of a real host names the RoCE ports' netdevs
            for device, netdev in (("mlx5_0", "ens1f0np0"), ("irdma0", "ens801f0")):
                if label(labels, "device") == device:
                    labels = labels.replace('netdev=""', f'netdev="{netdev}"')
        if name == "rdmascope_collector_no_data" and label(labels, "collector") == "ethtool":
            value = "0"  # it has netdevs now
        if name == "rdma_port_symbol_errors_total" and label(labels, "device") == "mlx5_1":
            value = "0"  # the fixture's 31 is the one host over the threshold
        series.append((name, labels, value))

    def read(name):
        with open(os.path.join(golden, name), encoding="utf-8") as f:
            return parse_exposition(f.read())
    for name, labels, value in read("ethtool_label.prom"):
        if label(labels, "device") not in NETDEVS:
            continue
        if name.startswith("rdma_netdev_") or (
                name == "rdma_ethtool_stat" and ETHTOOL_STATS.fullmatch(label(labels, "stat"))):
            series.append((name, labels, value))
    for file in ("host_tuning.prom", "mr.prom", "verbs.prom", "resources.prom", "pinned.prom",
                 "private_flags.prom"):
        series += [s for s in read(file) if not s[0].endswith("_bucket")]
    for collector in ("mr", "verbs", "resources"):
        series += [("rdmascope_collector_success", f'collector="{collector}"', "1"),
                   ("rdmascope_collector_no_data", f'collector="{collector}"', "0"),
                   ("rdmascope_collector_duration_seconds", f'collector="{collector}"', "0.002"),
                   ("rdmascope_collector_duplicate_series_dropped_total",
                    f'collector="{collector}"', "0")]
    # RDMA netlink of a real host knows the RoCE ports' netdevs: their flags and carrier.
    for device in ("mlx5_0", "irdma0"):
        series += [("rdma_port_netdev_admin_up", f'device="{device}",port="1"', "1"),
                   ("rdma_port_netdev_carrier", f'device="{device}",port="1"', "1")]
    series += [("rdmascope_probe_attached", 'probe="mr"', "1"),
               ("rdmascope_probe_attached", 'probe="verbs"', "1")]
    seen, unique = set(), []
    for s in series:
        if (s[0], s[1]) not in seen:
            seen.add((s[0], s[1]))
            unique.append(s)
    # Prometheus' own series of each target.
    unique += [("up", "", "1"), ("scrape_duration_seconds", "", "0.004"),
               ("scrape_samples_scraped", "", str(len(unique)))]
    return unique


def is_counter(name, labels):
    if not (name.endswith("_total") or name == "rdma_ethtool_stat") or not name.startswith(
            ("rdma_port_", "rdma_netdev_", "rdma_ethtool_")):
        return False
    text = name + " " + (label(labels, "counter") or "") + " " + (label(labels, "stat") or "")
    return bool(TRAFFIC.search(text)) and not NOT_TRAFFIC.search(text)


def variants(hosts):
    """The hosts that differ, by index: {index: kind}."""
    picks = {hosts // 8 + 1: "port_down", hosts // 4 + 1: "firmware",
             hosts // 2 + 1: "symbol_errors", 3 * hosts // 4 + 1: "crc_errors"}
    return {i: kind for i, kind in picks.items() if 1 <= i <= hosts}


def instance(i):
    return f"host-{i:04d}:9879"


def generate(path, template, hosts, start, end):
    """The fleet's samples in OpenMetrics text, series after series; returns (series, samples)."""
    stamps = [str(t) for t in range(start, end + 1, INTERVAL)]
    steps = len(stamps)
    cache = {}

    def tails(value, rate):
        key = (value, rate)
        if key not in cache:
            if rate:
                base = int(float(value))
                cache[key] = [f" {base + rate * INTERVAL * k} {t}" for k, t in enumerate(stamps)]
            else:
                cache[key] = [f" {value} {t}" for t in stamps]
        return cache[key]

    kinds = variants(hosts)
    counters = [is_counter(n, l) and float(v) < 4294967295 for n, l, v in template]
    series = 0
    with open(path, "w", encoding="utf-8") as out:
        for i in range(1, hosts + 1):
            extra = (f'cluster="{CLUSTERS[(i - 1) * len(CLUSTERS) // hosts]}",'
                     f'instance="{instance(i)}",job="{JOB}"')
            multiplier = 1 + (i % 8)  # traffic differs between hosts, a little
            kind = kinds.get(i)
            parts = []
            for (name, labels, value), counter in zip(template, counters):
                rate = 0
                if counter:
                    rate = multiplier * (1000000 if "bytes" in name + labels or "_data" in name
                                         + labels else 1000)
                device = label(labels, "device")
                if kind == "port_down" and device == "mlx5_0":  # a lost link: no carrier
                    if name == "rdma_port_state":
                        value = "1"
                    elif name in ("rdma_port_physical_state", "rdma_port_netdev_carrier"):
                        value = "3" if name == "rdma_port_physical_state" else "0"
                    elif name == "rdma_port_info":
                        labels = labels.replace('state="ACTIVE"', 'state="DOWN"').replace(
                            'phys_state="LinkUp"', 'phys_state="Disabled"')
                    elif counter:
                        rate = 0  # no traffic on a port that is down
                elif kind == "firmware" and name in ("rdma_device_info", "rdma_netdev_info") and (
                        device in ("mlx5_0", "ens1f0np0")):
                    labels = labels.replace("22.36.1010", "22.35.1012")
                elif kind == "symbol_errors" and device == "mlx5_1" and (
                        name == "rdma_port_symbol_errors_total"):
                    value, rate = str(SYMBOL_ERROR_THRESHOLD + 21), 1  # 1 a second, from 31
                elif kind == "crc_errors" and device == "ens1f0np0" and (
                        name == "rdma_netdev_crc_errors_total" or
                        label(labels, "stat") == "rx_crc_errors_phy"):
                    rate = 2
                prefix = f"{name}{{{labels}{',' if labels else ''}{extra}}}"
                parts.append(prefix)
                parts.append(("\n" + prefix).join(tails(value, rate)))
                parts.append("\n")
                series += 1
            out.write("".join(parts))
        out.write("# EOF\n")
    return series, series * steps


def netns_run(args, **kw):
    return subprocess.run(["ip", "netns", "exec", NS, *args], **kw)


class Api:
    """Prometheus' HTTP API from inside the namespace, by curl."""

    def __init__(self, port):
        self.base = f"http://127.0.0.1:{port}"

    def get(self, query, at=None, gzip=False, start=None, step=None):
        """(answer as JSON, bytes, seconds of curl's time_total); a range query with start."""
        if start is not None:
            url = (f"{self.base}/api/v1/query_range?query={urllib.parse.quote(query)}"
                   f"&start={start:.3f}&end={at:.3f}&step={step}")
        else:
            url = f"{self.base}/api/v1/query?query={urllib.parse.quote(query)}"
            if at is not None:
                url += f"&time={at:.3f}"
        run = netns_run(["curl", "-s", "-o", "-", "-w", "\n%{size_download} %{time_total}"] +
                        (["--compressed"] if gzip else []) + [url],
                        capture_output=True, check=True)
        body, _, tail = run.stdout.rpartition(b"\n")
        size, seconds = tail.split()
        answer = json.loads(body) if not gzip else None
        return answer, int(size), float(seconds)

    def scalar(self, query, at=None):
        answer, _, _ = self.get(query, at)
        result = answer.get("data", {}).get("result", [])
        return float(result[0]["value"][1]) if result else None


def seconds_of(rfc3339):
    return datetime.datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()


def time_v(stderr):
    """/usr/bin/time -v's figures: max RSS (KiB), user and system seconds."""
    figures = {}
    for key, pattern in (("max_rss_kib", r"Maximum resident set size \(kbytes\): (\d+)"),
                         ("user_s", r"User time \(seconds\): ([\d.]+)"),
                         ("system_s", r"System time \(seconds\): ([\d.]+)")):
        m = re.search(pattern, stderr)
        figures[key] = float(m.group(1)) if m else None
    return figures


def doctor(binary, url, prometheus_pid, *args):
    """One doctor run: its figures and its report (None if not JSON)."""
    time_prefix = ["/usr/bin/time", "-v"] if os.path.exists("/usr/bin/time") else []
    cpu_before = cpu_seconds(prometheus_pid)
    started = time.monotonic()
    wall_clock = time.time()
    run = netns_run(time_prefix + [binary, "doctor", f"--prometheus={url}",
                                   f"--prometheus.job={JOB}", "--format=json", *args],
                    capture_output=True, text=True, timeout=600)
    seconds = time.monotonic() - started
    figures = {"args": list(args), "at": wall_clock, "seconds": seconds, "exit": run.returncode,
               "prometheus_cpu_s": cpu_seconds(prometheus_pid) - cpu_before,
               "report_bytes": len(run.stdout.encode())}
    figures.update(time_v(run.stderr))
    m = re.search(r'msg="doctor: fleet report from Prometheus".* instances=(\d+) queries=(\d+)',
                  run.stderr)
    figures["logged_instances"], figures["logged_queries"] = (
        (int(m.group(1)), int(m.group(2))) if m else (None, None))
    try:
        report = json.loads(run.stdout)
    except json.JSONDecodeError:
        report = None
        figures["error"] = run.stderr[-2000:]
    return figures, report, run.stderr


def summarise(report):
    """What a report found; ok findings are counted per check (ok_by_check), not listed."""
    findings = report["findings"]
    by_check = {}
    for f in findings:
        if f["severity"] in ("warn", "crit"):
            key = f"{f['id']} ({f['severity']})"
            by_check.setdefault(key, set()).add(f["scope"].get("instance"))
    return {"instances": report.get("instances"),
            "findings": len(findings) + sum(report.get("ok_by_check", {}).values()),
            "findings_listed": len(findings), "summary": report.get("summary", {}),
            "warn_crit_by_check": {k: len(v) for k, v in sorted(by_check.items())},
            "hosts_by_check": {k: sorted(v) for k, v in by_check.items()}}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("fixtures")
    parser.add_argument("outdir")
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--ahead", type=int, default=600,
                        help="seconds of samples after generation starts (backfill + runs)")
    parser.add_argument("--keep", help="keep the work directory (OpenMetrics file, TSDB) here")
    parser.add_argument("--baseline", help="another rdmascope binary, run against the same "
                        "Prometheus, its runs alternating with BINARY's (an A/B in one run)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("SKIP: network namespaces need root")
        return harness.SKIP
    prometheus, promtool = shutil.which("prometheus"), shutil.which("promtool")
    if not prometheus or not promtool:
        print(f"SKIP: prometheus {prometheus}, promtool {promtool}")
        return harness.SKIP
    os.makedirs(args.outdir, exist_ok=True)
    work = args.keep or tempfile.mkdtemp(prefix="rdmascope-fleet-bench-")
    os.makedirs(work, exist_ok=True)
    figures = {"hosts": args.hosts, "interval_s": INTERVAL, "history_s": HISTORY,
               "ahead_s": args.ahead, "variants": {instance(i): k for i, k in
                                                   variants(args.hosts).items()}}
    subprocess.run(["ip", "netns", "add", NS], check=True)
    try:
        netns_run(["ip", "link", "set", "lo", "up"], check=True)
        # 1. One real host's series.
        sysfs = os.path.join(work, "sysfs")
        harness.materialise_tree(os.path.join(args.fixtures, "sysfs", "rdma_hosts.tree"), sysfs)
        serve = subprocess.Popen(
            ["ip", "netns", "exec", NS, args.binary, "serve",
             f"--web.listen-address=127.0.0.1:{SERVE_PORT}", "--collector.disable-defaults",
             "--collector.rdma", "--collector.ethtool", "--collector.host",
             f"--path.sysfs={sysfs}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_listening(NS, SERVE_PORT, serve, timeout=60)
            live = scrape_text(NS, SERVE_PORT)
        finally:
            serve.terminate()
            serve.wait()
        template = host_template(live, os.path.join(args.fixtures, "golden"))
        names = {s[0] for s in template}
        figures["host_series"] = len(template)
        figures["host_series_live"] = len(parse_exposition(live))
        figures["host_metric_names"] = len(names)
        print(f"a host: {len(template)} series of {len(names)} metric names "
              f"({figures['host_series_live']} from the live scrape of the fixture)", flush=True)

        # 2. The fleet, backfilled.
        started = time.time()
        t0 = int(started) // INTERVAL * INTERVAL
        openmetrics = os.path.join(work, "fleet.om")
        series, samples = generate(openmetrics, template, args.hosts, t0 - HISTORY, t0 + args.ahead)
        generated = time.time()
        figures.update(series=series, samples=samples, first_sample=t0 - HISTORY,
                       last_sample=t0 + args.ahead // INTERVAL * INTERVAL,
                       openmetrics_bytes=os.path.getsize(openmetrics),
                       generate_s=generated - started)
        print(f"{series} series, {samples} samples, {figures['openmetrics_bytes'] >> 20} MiB of "
              f"OpenMetrics in {generated - started:.1f} s", flush=True)
        tsdb = os.path.join(work, "tsdb")
        shutil.rmtree(tsdb, ignore_errors=True)
        backfill = subprocess.run(["/usr/bin/time", "-v", promtool, "tsdb",
                                   "create-blocks-from", "openmetrics", openmetrics, tsdb],
                                  capture_output=True, text=True)
        if backfill.returncode != 0:
            print(f"FAIL: promtool: {backfill.stdout[-2000:]}\n{backfill.stderr[-3000:]}")
            return 1
        loaded = time.time()
        figures["backfill_s"] = loaded - generated
        figures["backfill_max_rss_kib"] = time_v(backfill.stderr)["max_rss_kib"]
        blocks = [d for d in os.listdir(tsdb) if os.path.isfile(os.path.join(tsdb, d, "meta.json"))]
        figures["blocks"] = []
        for block in sorted(blocks):
            with open(os.path.join(tsdb, block, "meta.json")) as f:
                meta = json.load(f)
            size = sum(os.path.getsize(os.path.join(root, name))
                       for root, _, files in os.walk(os.path.join(tsdb, block)) for name in files)
            figures["blocks"].append({"mint": meta["minTime"] / 1000,
                                      "maxt": meta["maxTime"] / 1000,
                                      "series": meta["stats"]["numSeries"],
                                      "samples": meta["stats"]["numSamples"], "bytes": size})
        figures["tsdb_bytes"] = sum(b["bytes"] for b in figures["blocks"])
        print(f"promtool: {len(blocks)} blocks, {figures['tsdb_bytes'] >> 20} MiB in "
              f"{figures['backfill_s']:.1f} s (max RSS "
              f"{(figures['backfill_max_rss_kib'] or 0) / 1024:.0f} MiB)", flush=True)
        if not args.keep:
            os.remove(openmetrics)

        # 3. Prometheus on those blocks, and doctor.
        with Prometheus(NS, prometheus, work, {}, port=PROMETHEUS_PORT,
                        args=["--storage.tsdb.retention.time=3650d"]) as prom:
            api = Api(PROMETHEUS_PORT)
            url = f"http://127.0.0.1:{PROMETHEUS_PORT}"
            figures["ready_s"] = time.time() - loaded
            figures["ready_after_generation_s"] = time.time() - t0
            now = time.time()
            coverage = {
                "up_now": api.scalar(f'count(up{{job="{JOB}"}})', now),
                "up_5m_ago": api.scalar(f'count(up{{job="{JOB}"}})', now - 300),
                "newest_sample_age_s": now - (api.scalar(
                    f'max(timestamp(up{{job="{JOB}"}}))', now) or 0),
                "oldest_5m_ago_covered": (now - 300) >= t0 - HISTORY,
            }
            figures["coverage"] = coverage
            print(f"Prometheus ready {figures['ready_s']:.1f} s after the backfill "
                  f"({figures['ready_after_generation_s']:.0f} s after generation started): "
                  f"{coverage['up_now']} hosts now, {coverage['up_5m_ago']} 5 min ago, newest "
                  f"sample {coverage['newest_sample_age_s']:.0f} s old", flush=True)
            if t0 + args.ahead - time.time() < 200:  # the runs take about 3 min at 1,000 hosts
                print(f"FAIL: the samples end {t0 + args.ahead - time.time():.0f} s from now: "
                      f"raise --ahead (the backfill took {figures['backfill_s']:.0f} s)")
                return 1
            idle_before = cpu_seconds(prom.proc.pid)
            time.sleep(5)
            figures["prometheus_idle_cpu_per_s"] = (cpu_seconds(prom.proc.pid) - idle_before) / 5

            # The queries (and a first, cold run).
            cold, report, stderr = doctor(args.binary, url, prom.proc.pid, "--log.level=debug")
            figures["cold_run"] = cold
            if report is None:
                print(f"FAIL: doctor's report is not JSON: {cold.get('error')}")
                return 1
            queries = report.get("queries", [])  # as the report lists them, with its figures
            figures["queries"] = queries
            figures["report"] = summarise(report)
            print(f"cold run {cold['seconds']:.2f} s, {len(queries)} queries listed "
                  f"({cold['logged_queries']} run), {figures['report']['instances']} instances, "
                  f"{figures['report']['findings']} findings", flush=True)

            # With --baseline, each run of BINARY is followed by one of the baseline (and the
            # order flips every run), so that both face the same load.
            binaries = [("", args.binary)] + ([("baseline ", args.baseline)]
                                             if args.baseline else [])
            runs = {}
            for name, extra in (("window 5m", []), ("window 0s", ["--window=0s"])):
                for index in range(args.runs):
                    order = binaries if index % 2 == 0 else binaries[::-1]
                    for prefix, binary in order:
                        run, report, _ = doctor(binary, url, prom.proc.pid, *extra)
                        if report is not None:
                            run["instances"] = summarise(report)["instances"]
                            run["findings"] = summarise(report)["findings"]
                        runs.setdefault(prefix + name, []).append(run)
                        print(f"{prefix}{name}: {run['seconds']:.2f} s, exit {run['exit']}, "
                              f"Prometheus CPU {run['prometheus_cpu_s']:.2f} s, doctor max RSS "
                              f"{(run['max_rss_kib'] or 0) / 1024:.0f} MiB", flush=True)
            figures["runs"] = runs

            # The cold run's queries again by curl, at their times: gzip bytes, Prometheus' time.
            replay = []
            for query in queries:
                at = seconds_of(query["time"])
                start = seconds_of(query["start"]) if query.get("start") else None
                step = query.get("step_seconds")
                _, size, seconds = api.get(query["promql"], at, start=start, step=step)
                _, gzip_size, _ = api.get(query["promql"], at, gzip=True, start=start, step=step)
                replay.append({"promql": query["promql"], "series": query["series"],
                               "bytes": size, "gzip_bytes": gzip_size, "curl_s": seconds,
                               "doctor_s": query["seconds"], "range": start is not None})
            figures["replay"] = replay
            figures["tsdb_series_now"] = api.scalar('count({__name__=~".+"})', now)
            figures["prometheus_memory_kib"] = memory_kib(prom.proc.pid)
            figures["finished_after_generation_s"] = time.time() - t0
            figures["samples_lasted"] = time.time() < t0 + args.ahead
    finally:
        subprocess.run(["ip", "netns", "delete", NS])
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    # 4. The table.
    def stat(values, f):
        values = [v for v in values if v is not None]
        return f(values) if values else 0

    lines = [
        f"## doctor --prometheus on a {args.hosts:,}-host fleet (issue 29)",
        "",
        f"{args.hosts} synthetic hosts (job=\"{JOB}\", {len(CLUSTERS)} clusters) of "
        f"{figures['host_series']} series each ({figures['host_series_live']} from `serve` on "
        f"rdma_hosts.tree, the rest from the golden netdev, host-tuning, MR, verbs and "
        f"resources expositions): {figures['series']:,} series, {figures['samples']:,} samples "
        f"every {INTERVAL} s, backfilled by `promtool tsdb create-blocks-from openmetrics` "
        f"({figures['openmetrics_bytes'] / 2**20:,.0f} MiB of OpenMetrics generated in "
        f"{figures['generate_s']:.0f} s, {len(figures['blocks'])} "
        f"block{'s' if len(figures['blocks']) != 1 else ''} of "
        f"{figures['tsdb_bytes'] / 2**20:.0f} MiB in {figures['backfill_s']:.0f} s) into "
        f"one Prometheus. Differing hosts: " +
        ", ".join(f"{i} {k}" for i, k in figures["variants"].items()) + ".",
        "",
        f"{len(figures['queries'])} queries (the report lists them; the cold run's): "
        f"{sum(r['series'] for r in figures['replay']):,} series, "
        f"{sum(r['bytes'] for r in figures['replay']) / 2**20:.1f} MiB of JSON, "
        f"{sum(r['gzip_bytes'] for r in figures['replay']) / 2**20:.1f} MiB gzipped as doctor "
        f"asks for it; curl took {sum(r['curl_s'] for r in figures['replay']):.2f} s for them "
        f"one after another.",
        "",
        "| run | runs | median s | max s | doctor CPU s | doctor max RSS MiB | Prometheus CPU s "
        "| instances | findings | report bytes |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    cold = figures["cold_run"]
    rows = [("first (cold, debug log)", [cold])] + list(figures["runs"].items())
    median = statistics.median
    for name, values in rows:
        cpu = [(v["user_s"] or 0) + (v["system_s"] or 0) for v in values]
        lines.append(
            f"| {name} | {len(values)} | {stat([v['seconds'] for v in values], median):.2f} | "
            f"{stat([v['seconds'] for v in values], max):.2f} | {stat(cpu, median):.2f} | "
            f"{stat([v['max_rss_kib'] for v in values], max) / 1024:.0f} | "
            f"{stat([v['prometheus_cpu_s'] for v in values], median):.2f} | "
            f"{values[-1].get('instances', figures['report']['instances'])} | "
            f"{values[-1].get('findings', figures['report']['findings'])} | "
            f"{stat([v['report_bytes'] for v in values], max):,} |")
    lines += ["", "| query | range | series | bytes | gzip bytes | curl s | doctor s (cold) |",
              "|---|---|---|---|---|---|---|"]
    for r in figures["replay"]:
        short = r["promql"] if len(r["promql"]) < 70 else r["promql"][:67] + "..."
        short = short.replace("|", "\\|")
        lines.append(f"| `{short}` | {'yes' if r['range'] else ''} | {r['series']:,} | "
                     f"{r['bytes']:,} | {r['gzip_bytes']:,} | {r['curl_s']:.3f} | "
                     f"{r['doctor_s']:.3f} |")
    report = figures["report"]
    # What the differing hosts have that most hosts do not.
    figures["variant_findings"] = {
        host: [k for k, hosts in report["hosts_by_check"].items()
               if host in hosts and len(hosts) <= max(1, args.hosts // 10)]
        for host in figures["variants"]}
    lines += ["", f"Findings (cold run): {report['summary']}; warn/crit by check (hosts): " +
              ", ".join(f"{k} {v}" for k, v in report["warn_crit_by_check"].items()) + ".",
              "", "The differing hosts' own warn/crit findings (on at most a tenth of the hosts): "
              + "; ".join(f"{host} ({kind}): " + (", ".join(figures["variant_findings"][host])
                                                  or "none")
                          for host, kind in figures["variants"].items()) + ".",
              "", f"Prometheus: ready {figures['ready_s']:.1f} s after the backfill, "
                  f"{figures['prometheus_memory_kib'].get('VmRSS', 0) / 1024:.0f} MiB RSS after "
                  f"the runs ({figures['prometheus_memory_kib'].get('VmHWM', 0) / 1024:.0f} MiB "
                  f"peak), idle CPU {figures['prometheus_idle_cpu_per_s']:.3f} s/s; the newest "
                  f"sample was {figures['coverage']['newest_sample_age_s']:.0f} s old at the "
                  f"first run and the samples lasted to the end: {figures['samples_lasted']}."]
    text = "\n".join(lines) + "\n"
    print(text)
    with open(os.path.join(args.outdir, "fleet.md"), "w") as f:
        f.write(text)
    for r in figures["runs"].values():
        for run in r:
            run.pop("error", None)
    report.pop("hosts_by_check")
    with open(os.path.join(args.outdir, "fleet.json"), "w") as f:
        json.dump(figures, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
