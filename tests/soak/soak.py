#!/usr/bin/env python3
"""Soak (issue 18 item 8): the exporter under a long, bounded churn of everything it follows.

At scale 1 (x SCALE with --scale N or RDMASCOPE_SOAK_SCALE=N), all at the same time:
- one process making 1,000,000 memory registrations through the MR uprobes (a ring of 1,000
  regions: each registration past the ring deregisters the oldest; one failing registration
  per 1,024), on the libibverbs stand-in;
- 1,000 short processes registering 20 regions each, half of them exiting with 5 still
  registered (the exporter must reap them, counted as released at exit);
- 200 veth pairs created and deleted in a network namespace, 20 at a time;
while a scraper reads /metrics every 0.5 s.

Asserted: every scrape 200 and every collector successful; no counter (nor histogram bucket,
count or sum) ever decreases (a series with a pid or device label that was absent from the
previous scrape starts afresh: a reused pid or interface name is another object); the exact
registration and release counts by comm; no lost events; after the churn no series of a dead
soak process nor of a deleted interface; the exporter's BPF hash maps (regions, procs, calls)
back to their entry counts after the warm-up, and its stack-trace map (stacks) back to at most
its warm-up count within STACKS_SETTLE seconds (the exporter deletes the stacks no region uses,
two cleanup walks at least 5 s apart after the last exit); RSS below 3x the warm-up's. Reported (never
asserted as timing): RSS each round, scrape times, series counts, map entries, the cost of a
registration under the probes.

The stand-in library is copied to a private directory first, so the uprobes (attached to its
inode) see this test's processes only, whatever other host tests run meanwhile.

usage: soak.py RDMASCOPE SOAK_MR FAKEVERBS_LIB [--scale N] [--report FILE]"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "host"))
import netns  # noqa: E402
from netns import harness  # noqa: E402

INTERVAL = 0.5
RING = 1000
SHORT_REGIONS, SHORT_LEAK, SHORT_PARALLEL = 20, 5, 4
VETH_BATCH = 20
VETH_NAME = re.compile(r"^sk\d+p?$")
COMMS = ("soak_churn", "soak_short")
# The MR maps that must come back to their warm-up entry counts (the others are bounded by
# design: an LRU of released ranges, a stack-trace table, arrays, a ring buffer).
RETURNING_MAPS = ("regions", "procs", "calls")
# The stack-trace map: every process image adds its registration stacks, which the exporter
# deletes once no region refers to them (exporter/bpf/stack_gc.h): two walks at least 5 s
# apart after the last exit. Waited for up to this long, then compared with the warm-up's count
# (every soak process has exited by then: nothing may stay but STACKS_SLACK entries).
STACKS_SETTLE = 60
STACKS_SLACK = 2


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def map_entries(pid):
    """{map name: entries} for the BPF maps the exporter holds open (from its fdinfo), hash,
    LRU and stack-trace maps only; None for a map bpftool cannot dump."""
    counts = {}
    fd_dir = f"/proc/{pid}/fdinfo"
    ids = set()
    for fd in os.listdir(fd_dir):
        try:
            with open(os.path.join(fd_dir, fd)) as f:
                match = re.search(r"^map_id:\s*(\d+)", f.read(), re.M)
        except OSError:
            continue
        if match:
            ids.add(match.group(1))
    for map_id in sorted(ids, key=int):
        shown = subprocess.run(["bpftool", "-j", "map", "show", "id", map_id],
                               capture_output=True, text=True)
        if shown.returncode != 0:
            continue
        info = json.loads(shown.stdout)
        if info.get("type") not in ("hash", "lru_hash", "stack_trace"):
            continue
        dumped = subprocess.run(["bpftool", "-j", "map", "dump", "id", map_id],
                                capture_output=True, text=True)
        name = info.get("name", map_id)
        counts[name] = len(json.loads(dumped.stdout)) if dumped.returncode == 0 else None
    return counts


class Scraper(threading.Thread):
    """Scrapes every INTERVAL seconds; checks counters and collectors on every scrape."""

    def __init__(self, exporter):
        super().__init__(daemon=True)
        self.exporter = exporter
        self.stop = threading.Event()
        self.cond = threading.Condition()
        self.rounds = 0
        self.failures = []
        self.last = {}          # counter series -> value
        self.previous = set()   # series keys of the previous scrape
        self.rss = []           # (round, KiB)
        self.times = []
        self.series_counts = []
        self.veths_seen = set()
        self.samples = {}

    @staticmethod
    def monotonic_names(body):
        names = set()
        for match in re.finditer(r"^# TYPE (\S+) (counter|histogram)$", body, re.M):
            name, kind = match.groups()
            if kind == "counter":
                names.update((name, name + "_total"))
            else:
                names.update((name + "_bucket", name + "_count", name + "_sum"))
        return names

    def fail(self, message):
        if len(self.failures) < 50:
            self.failures.append(f"scrape {self.rounds}: {message}")

    def scrape(self):
        start = time.monotonic()
        try:
            status, body = self.exporter.get(timeout=20)
        except Exception as err:  # noqa: BLE001 (any failure to scrape is a test failure)
            self.fail(f"scrape failed: {err}")
            return
        self.times.append(time.monotonic() - start)
        if status != 200:
            self.fail(f"HTTP {status}")
            return
        if self.rounds % 50 == 0:
            harness.keep_scrape(body)
        samples = harness.parse(body)
        monotonic = self.monotonic_names(body)
        for key, val in samples.items():
            name, labels = key
            if name == "rdmascope_collector_success" and val != 1.0:
                self.fail(f"collector {dict(labels)} failed")
            for label, text in labels:
                if label == "device" and VETH_NAME.match(text):
                    self.veths_seen.add(text)
            if name not in monotonic:
                continue
            fresh = key not in self.previous and any(k in ("pid", "device") for k, _ in labels)
            before = self.last.get(key)
            if before is not None and not fresh and val < before:
                self.fail(f"counter decreased: {name}{dict(labels)} {before} -> {val}")
            self.last[key] = val
        self.previous = set(samples)
        self.samples = samples
        self.series_counts.append(len(samples))
        kib = rss_kib(self.exporter.proc.pid)
        if kib is not None:
            self.rss.append((self.rounds, kib))

    def run(self):
        while not self.stop.is_set():
            started = time.monotonic()
            self.scrape()
            with self.cond:
                self.rounds += 1
                self.cond.notify_all()
            self.stop.wait(max(0.0, INTERVAL - (time.monotonic() - started)))

    def wait_rounds(self, count, timeout=120):
        """Returns once `count` more scrapes have completed (False on timeout)."""
        with self.cond:
            target = self.rounds + count
            return self.cond.wait_for(lambda: self.rounds >= target, timeout=timeout)


def churn_veths(ns, first, pairs, scraper, failures):
    """Creates VETH_BATCH pairs, waits for them to be scraped, deletes them; `pairs` in all."""
    for base in range(first, first + pairs, VETH_BATCH):
        names = [f"sk{i}" for i in range(base, min(base + VETH_BATCH, first + pairs))]
        add = "".join(f"link add {n} type veth peer name {n}p\nlink set {n} up\n"
                      f"link set {n}p up\n" for n in names)
        result = subprocess.run(["ip", "-n", ns, "-batch", "-"], input=add, text=True,
                                capture_output=True)
        if result.returncode != 0:
            failures.append(f"ip -batch add failed: {result.stderr.strip()}")
            return
        scraper.wait_rounds(2)
        delete = "".join(f"link del {n}\n" for n in names)
        result = subprocess.run(["ip", "-n", ns, "-batch", "-"], input=delete, text=True,
                                capture_output=True)
        if result.returncode != 0:
            failures.append(f"ip -batch del failed: {result.stderr.strip()}")
            return


def run_phase(name, soak_mr, env, ns, scraper, churn_total, procs, veth_first, veth_pairs):
    """Runs the three churns at once; returns (figures, failures)."""
    failures = []
    figures = {}
    start = time.monotonic()
    churn = subprocess.Popen([soak_mr, "churn", str(churn_total), str(RING)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    short = subprocess.Popen([soak_mr, "procs", str(procs), str(SHORT_REGIONS), str(SHORT_LEAK),
                              str(SHORT_PARALLEL)], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    veths = threading.Thread(target=churn_veths,
                             args=(ns, veth_first, veth_pairs, scraper, failures))
    veths.start()
    for label, proc in (("churn", churn), ("procs", short)):
        out, err = proc.communicate()
        if proc.returncode != 0 or not out.startswith("DONE"):
            failures.append(f"{name}: soak_mr {label} exited {proc.returncode}: {out} {err}")
            continue
        figures[label] = out.split()[1:]
        figures[f"{label}_seconds"] = time.monotonic() - start
    veths.join()
    figures["seconds"] = time.monotonic() - start
    print(f"{name}: {figures}", flush=True)
    return figures, failures


def soak_series(samples):
    """Series of soak processes that carry a pid label (there must be none once they exit)."""
    return [key for key in samples
            if any(k == "pid" for k, _ in key[1]) and dict(key[1]).get("comm") in COMMS]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("soak_mr")
    parser.add_argument("library")
    parser.add_argument("--scale", type=float,
                        default=float(os.environ.get("RDMASCOPE_SOAK_SCALE", "1")))
    parser.add_argument("--report", help="also write the figures here (Markdown)")
    args = parser.parse_args()
    harness.require_root_and_netns()
    if shutil.which("bpftool") is None:
        print("SKIP: bpftool not found")
        return harness.SKIP
    churn_total = int(1_000_000 * args.scale)
    procs = int(1000 * args.scale)
    procs += procs % 2  # half of them leak
    veth_pairs = int(200 * args.scale)
    warm = {"churn": 20000, "procs": 20, "veths": VETH_BATCH}

    failures = []
    with netns.tempdir() as private, netns.Namespaces("soak") as ns:
        # A private copy of the stand-in: its own inode, so its own uprobes.
        library = os.path.join(private, os.path.basename(args.library))
        shutil.copy2(args.library, library)
        for alias in ("libfakeverbs.so.1", "libfakeverbs.so"):
            if alias != os.path.basename(library):
                os.symlink(library, os.path.join(private, alias))
        env = dict(os.environ, LD_LIBRARY_PATH=private)
        with harness.Exporter(args.binary, ["--collector.disable-defaults", "--collector.mr",
                                            "--collector.ethtool", f"--probe.library={library}",
                                            "--collector.mr.leak-age=1s"],
                              netns=ns[0]) as exporter:
            pid = exporter.proc.pid
            scraper = Scraper(exporter)
            scraper.start()
            try:
                scraper.wait_rounds(2)
                if harness.value(scraper.samples, "rdmascope_probe_attached", probe="mr") != 1.0:
                    print(exporter.read_log())
                    print("FAIL: MR probes not attached")
                    return 1
                maps_start = map_entries(pid)
                warm_figures, warm_failures = run_phase(
                    "warm-up", args.soak_mr, env, ns[0], scraper, warm["churn"], warm["procs"],
                    10_000_000, warm["veths"])
                failures += warm_failures
                scraper.wait_rounds(3)
                rss_warm = scraper.rss[-1][1]
                maps_warm = map_entries(pid)
                rounds_warm = scraper.rounds
                figures, main_failures = run_phase("soak", args.soak_mr, env, ns[0], scraper,
                                                   churn_total, procs, 0, veth_pairs)
                failures += main_failures
                scraper.wait_rounds(3)
                maps_end = map_entries(pid)
                stacks_after_churn = maps_end.get("stacks")
                stacks_limit = (maps_warm.get("stacks") or 0) + STACKS_SLACK
                settle_end = time.monotonic() + STACKS_SETTLE
                while (maps_end.get("stacks") is None or maps_end["stacks"] > stacks_limit) \
                        and time.monotonic() < settle_end:
                    scraper.wait_rounds(2)  # the cleanup runs at collections
                    maps_end = map_entries(pid)
                final = scraper.samples
            finally:
                scraper.stop.set()
                scraper.join()
            alive = exporter.proc.poll() is None
            log = exporter.read_log()
    failures += scraper.failures
    if not alive:
        failures.append("the exporter exited")

    value = harness.value
    registered = {"soak_churn": warm["churn"] + churn_total,
                  "soak_short": (warm["procs"] + procs) * SHORT_REGIONS}
    released = (warm["procs"] + procs) // 2 * SHORT_LEAK
    checks = [
        (f"registrations of {comm} (histogram count)",
         value(final, "rdma_mr_registration_size_bytes_count", comm=comm), float(want))
        for comm, want in registered.items()]
    checks += [
        ("regions released at exit, soak_short",
         value(final, "rdma_mr_exit_released_regions_total", comm="soak_short"),
         float(released)),
        ("regions released at exit, soak_churn (deregisters all)",
         value(final, "rdma_mr_exit_released_regions_total", comm="soak_churn") or 0.0, 0.0),
        ("lost events (every reason)",
         sum(harness.series(final, "rdma_mr_lost_total").values()), 0.0),
        ("series of exited soak processes", len(soak_series(final)), 0),
        ("series of deleted veths",
         sorted({v for key in final for k, v in key[1] if k == "device" and VETH_NAME.match(v)}),
         []),
    ]
    for map_name in RETURNING_MAPS:
        # None (not found, or bpftool could not dump it) never passes.
        warm_count = maps_warm.get(map_name)
        checks.append((f"BPF map {map_name} entries back to the warm-up's",
                       maps_end.get(map_name), "a count" if warm_count is None else warm_count))
    for what, got, want in checks:
        print(("ok" if got == want else "FAIL") + f": {what}: {got} (want {want})")
        if got != want:
            failures.append(f"{what}: {got} != {want}")
    # None (bpftool could not dump it) never passes.
    stacks_warm, stacks_end = maps_warm.get("stacks"), maps_end.get("stacks")
    stacks_ok = stacks_warm is not None and stacks_end is not None and \
        stacks_end <= stacks_warm + STACKS_SLACK
    print(("ok" if stacks_ok else "FAIL") + f": BPF map stacks entries back to the warm-up's "
          f"within {STACKS_SETTLE} s: {stacks_end} (warm-up {stacks_warm}, at most "
          f"+{STACKS_SLACK}; {stacks_after_churn} right after the churn)")
    if not stacks_ok:
        failures.append(f"stacks map entries {stacks_end} not back to the warm-up's "
                        f"{stacks_warm} (+{STACKS_SLACK}) within {STACKS_SETTLE} s")
    expected_veths = veth_pairs * 2 + warm["veths"] * 2
    print(f"veth names seen in scrapes: {len(scraper.veths_seen)} of {expected_veths}")
    if len(scraper.veths_seen) < expected_veths // 2:
        failures.append(f"only {len(scraper.veths_seen)} veths ever scraped: vacuous")

    soak_rss = [kib for r, kib in scraper.rss if r >= rounds_warm]
    rss_max, rss_end = max(soak_rss), soak_rss[-1]
    print(f"RSS: warm-up {rss_warm} KiB, soak max {rss_max} KiB, end {rss_end} KiB "
          f"({rss_end / rss_warm:.2f}x warm-up)")
    if rss_max >= 3 * rss_warm:
        failures.append(f"RSS {rss_max} KiB reached 3x the warm-up's {rss_warm} KiB")
    times = sorted(scraper.times)
    lines = [
        f"soak at scale {args.scale:g}: {churn_total} registrations (ring {RING}), {procs} "
        f"short processes ({SHORT_REGIONS} regions, {SHORT_LEAK} leaked by half), "
        f"{veth_pairs} veth pairs; {figures.get('seconds', 0):.0f} s",
        f"- registration + deregistration under the probes: "
        f"{figures.get('churn', ['?', '?', '?'])[2]} ns per registration "
        f"({figures.get('churn_seconds', 0):.0f} s for the churn process)",
        f"- scrapes: {scraper.rounds}, median {statistics.median(times) * 1e3:.1f} ms, "
        f"max {times[-1] * 1e3:.1f} ms; series per scrape {min(scraper.series_counts)} to "
        f"{max(scraper.series_counts)}",
        f"- RSS (KiB): warm-up {rss_warm}, soak max {rss_max}, end {rss_end}; every round: "
        + " ".join(str(kib) for _, kib in scraper.rss[::max(1, len(scraper.rss) // 40)]),
        f"- BPF map entries: start {maps_start}; after warm-up {maps_warm}; end {maps_end}",
        f"- stack-trace map: warm-up {maps_warm.get('stacks')}, {stacks_after_churn} right "
        f"after the churn of {procs + 1} new process images (each registers from one stack), "
        f"{maps_end.get('stacks')} once the exporter's cleanup ran",
    ]
    report = "\n".join(lines)
    print(report)
    if args.report:
        with open(args.report, "w") as f:
            f.write(report + "\n")
    for failure in failures:
        print("FAIL:", failure)
    if failures:
        print(log[-4000:])
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
