"""Shared by the scrape benchmarks (issue #17: "every scrape benchmark uses the client users
run"): a real Prometheus in a network namespace scraping exporters there, its HTTP API (instant
queries and raw samples), the keep-alive gzip load client (hey) and its output, and the
per-process figures every bench reports (CPU seconds, VmRSS, an smaps breakdown)."""

import json
import os
import re
import subprocess
import time
import urllib.parse


def cpu_seconds(pid):
    """utime + stime of a process, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def memory_kib(pid):
    values = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0])
    return values


def wait_listening(ns, port, proc, timeout=10, path="/metrics"):
    """Until http://127.0.0.1:PORT/PATH answers in namespace NS; raises if PROC exits first or
    nothing answers in TIMEOUT seconds (a bench fails when a server does not start)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server for port {port} exited early ({proc.returncode})")
        r = subprocess.run(["ip", "netns", "exec", ns, "curl", "-sf", "-o", "/dev/null",
                            f"http://127.0.0.1:{port}{path}"])
        if r.returncode == 0:
            return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listening on {port}")


def scrape_text(ns, port):
    """One plain scrape of an exporter listening on 127.0.0.1:PORT in network namespace NS."""
    return subprocess.run(["ip", "netns", "exec", ns, "curl", "-sf",
                           f"http://127.0.0.1:{port}/metrics"],
                          capture_output=True, text=True, check=True).stdout


def quantile(values, q):
    """Linear interpolation between closest ranks, as Prometheus' quantile_over_time."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no samples")
    rank = q * (len(ordered) - 1)
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


class Prometheus:
    """`prometheus` in namespace NS scraping JOBS ({job: "host:port"}) every INTERVAL (its
    defaults otherwise: keep-alive connections, Accept-Encoding: gzip). A context manager; the
    TSDB and config live in WORKDIR (WORKDIR/tsdb may hold blocks already, e.g. from promtool's
    backfill; JOBS may then be empty). ARGS: more command-line flags. RULES: rule files it
    evaluates, every INTERVAL too."""

    def __init__(self, ns, binary, workdir, jobs, port, interval="1s", timeout=None, args=(),
                 rules=()):
        self.ns, self.port = ns, port
        config = os.path.join(workdir, "prometheus.yml")
        with open(config, "w") as f:
            f.write(f"global: {{scrape_interval: {interval}, evaluation_interval: {interval}, "
                    f"scrape_timeout: {timeout or interval}}}\n")
            if rules:
                f.write("rule_files: [" + ", ".join(f"'{r}'" for r in rules) + "]\n")
            f.write("scrape_configs:\n")
            for job, target in jobs.items():
                f.write(f"  - {{job_name: {job}, static_configs: [{{targets: ['{target}']}}]}}\n")
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", ns, binary, f"--config.file={config}",
             f"--storage.tsdb.path={os.path.join(workdir, 'tsdb')}",
             f"--web.listen-address=127.0.0.1:{port}", *args],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_listening(ns, port, self.proc, timeout=30, path="/-/ready")
        except BaseException:
            self.close()
            raise
        self.started = time.monotonic()

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _get(self, query):
        url = (f"http://127.0.0.1:{self.port}/api/v1/query?query=" + urllib.parse.quote(query))
        out = subprocess.run(["ip", "netns", "exec", self.ns, "curl", "-sf", url],
                             capture_output=True, text=True).stdout
        return json.loads(out or '{"data":{"result":[]}}')["data"]["result"]

    def query(self, query):
        """An instant vector query: {job: value}."""
        return {r["metric"].get("job", ""): float(r["value"][1]) for r in self._get(query)}

    def samples(self, metric):
        """Every raw sample of METRIC since this Prometheus started: {job: [values]}."""
        window = int(time.monotonic() - self.started) + 30
        return {r["metric"].get("job", ""): [float(v) for _, v in r["values"]]
                for r in self._get(f"{metric}[{window}s]")}


def parse_hey(out):
    """hey's summary: total, rps, slowest, average (s), percentiles {50: s}, status codes,
    error count."""
    figures = {"raw": out}
    for key, pattern in (("total", r"Total:\s+([\d.]+) secs"), ("rps", r"Requests/sec:\s+([\d.]+)"),
                         ("slowest", r"Slowest:\s+([\d.]+)"), ("average", r"Average:\s+([\d.]+)")):
        m = re.search(pattern, out)
        figures[key] = float(m.group(1)) if m else None
    figures["percentiles"] = {int(p): float(v) for p, v in
                              re.findall(r"(\d+)%+ in ([\d.]+) secs", out)}
    figures["codes"] = {int(c): int(n) for c, n in re.findall(r"\[(\d+)\]\s+(\d+) responses", out)}
    errors = re.search(r"Error distribution:\n((?:\s+\[\d+\].*\n?)+)", out)
    figures["errors"] = sum(int(n) for n in re.findall(r"\[(\d+)\]", errors.group(1))) if errors else 0
    return figures


def hey_requests(ns, url, requests, concurrency=1):
    """REQUESTS scrapes of URL by hey (Go's client: keep-alive, Accept-Encoding: gzip) from
    namespace NS, CONCURRENCY at a time."""
    out = subprocess.run(["ip", "netns", "exec", ns, "hey", "-n", str(requests), "-c",
                          str(concurrency), "-t", "20", url],
                         capture_output=True, text=True, check=True).stdout
    return parse_hey(out)


SMAPS_FIELDS = ("Rss", "Pss", "Shared_Clean", "Private_Clean", "Shared_Dirty", "Private_Dirty")


def smaps_breakdown(pid):
    """/proc/PID/smaps summed by kind of mapping, in KiB: the program's own file ("binary"),
    other file mappings ("libraries": shared libraries and any other file), "[heap]" ("heap"),
    and the rest ("other anon": thread stacks, mmap'd arenas, [stack], [vdso]...). Each kind:
    Rss, Pss, clean (shared + private), dirty (shared + private), Private_Dirty."""
    exe = os.path.realpath(f"/proc/{pid}/exe")
    kinds = {k: dict.fromkeys(SMAPS_FIELDS, 0) for k in
             ("binary", "libraries", "heap", "other anon")}
    kind = None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            head = line.split(None, 5)
            if re.match(r"^[0-9a-f]+-[0-9a-f]+$", head[0]):
                path = head[5].strip() if len(head) > 5 else ""
                if path.endswith(" (deleted)"):
                    path = path[:-len(" (deleted)")]
                if path == exe:
                    kind = "binary"
                elif path.startswith("/"):
                    kind = "libraries"
                elif path == "[heap]":
                    kind = "heap"
                else:
                    kind = "other anon"
                continue
            key = line.split(":", 1)[0]
            if key in SMAPS_FIELDS and kind is not None:
                kinds[kind][key] += int(line.split()[1])
    result = {}
    for k, v in kinds.items():
        result[k] = {"rss": v["Rss"], "pss": v["Pss"],
                     "clean": v["Shared_Clean"] + v["Private_Clean"],
                     "dirty": v["Shared_Dirty"] + v["Private_Dirty"],
                     "private_dirty": v["Private_Dirty"]}
    result["total"] = {f: sum(result[k][f] for k in kinds) for f in result["binary"]}
    return result
