#!/usr/bin/env python3
"""Benchmark (reported, never asserted) of container names from the container runtime under
container churn (issue 28: "CRI answer cost and the refresh policy under container churn, 100
containers started and stopped per minute").

A fake CRI server (tests/host/fake_cri_server.py, Debian's python3-grpcio) answers
ListContainers from a JSON file this bench rewrites atomically (write, rename) as containers
start and stop, listing each one before its process runs and until after it exited, as a
runtime does. Each container is a cgroup v2 directory of the kubelet's systemd-driver shape
(one pod each) with one mr_workload program holding a region (the libibverbs stand-in, tracked
by the mr probes). One exporter (`--collector.mr --collector.workload`, the default refresh
interval, 30 s) in a network namespace, scraped every second by a real Prometheus:

1. quiet: CONTAINERS running containers, nothing starts or stops;
2. churn: the same population, one container started every 0.6 s and one, chosen at random
   among those running, stopped every 0.6 s (100 per minute each way);
   quiet and churn alternate in blocks (--block-seconds, 60), --minutes of each in all, so that
   the machine's other load (builds) falls on both alike;
3. answer size: a second exporter asking a second fake server every 250 ms, the listing padded
   with synthetic containers to 0, 200, 1,000 and 5,000 (--sweep-seconds each).

Reported: ListContainers calls per minute (from CONTAINERS_JSON.calls), split into periodic
(30 s after the last call) and after a miss (sooner); the exporter's CPU per minute in each
phase (and by thread name); the fake server's handler time and answer bytes; per container
started during the churn, seconds from its start to the first scrape whose
rdma_process_workload_info for its pid carries pod and namespace (Prometheus' sample
timestamps), and the share stopped before any scrape named them, by lifetime; Prometheus'
scrape_duration_seconds in each phase. Table on stdout and OUTPUT_DIR/cri_churn.md, figures in
OUTPUT_DIR/cri_churn.json.

Usage: cri_churn_bench.py RDMASCOPE MR_WORKLOAD FAKEVERBS_LIB OUTPUT_DIR [--minutes N]
       [--block-seconds N] [--containers N] [--sweep-seconds N] [--seed N]"""

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "common"))
import cgroups  # noqa: E402
import harness  # noqa: E402
from prometheus_run import (Prometheus, cpu_seconds, quantile, scrape_text,  # noqa: E402
                            wait_listening)

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE_CRI = os.path.join(HERE, "..", "host", "fake_cri_server.py")
DEBIAN_PYTHON = "/usr/bin/python3"  # Debian's python3-grpcio is installed for it
NS = "rdmascope-cri-churn-bench"
PORT, SWEEP_PORT, PROMETHEUS_PORT = 9741, 9742, 9743
CHURN_PERIOD = 0.6  # s: 100 per minute each way
REFRESH_SECONDS = 30  # the exporter's default --collector.workload.cri-refresh-interval
MISS_SECONDS = 5  # ContainerNames' miss interval (not a flag)
SWEEP_REFRESH = "250ms"
SWEEP_SIZES = (0, 200, 1000, 5000)
LIFETIMES = ((0, 5), (5, 10), (10, 30), (30, None))  # s, buckets of the churned containers


class Listing:
    """What the runtime lists: the JSON file a fake server answers from, rewritten whole and
    renamed into place (a call never reads half a file)."""

    def __init__(self, path):
        self.path = path
        self.entries = {}  # container id -> entry, in start order
        self.padding = []  # synthetic containers (answer size)

    def write(self):
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(list(self.entries.values()) + self.padding, f)
        os.replace(tmp, self.path)


def synthetic(count):
    return [{"id": uuid.uuid4().hex * 2, "pod": f"synthetic-{i}", "namespace": "synthetic",
             "uid": str(uuid.uuid4()), "container": "worker"} for i in range(count)]


class Container:
    """A pod of one container: its cgroup directory (kubelet systemd driver, containerd) and one
    mr_workload program in it holding one region."""

    def __init__(self, base, index):
        self.uid, self.id = str(uuid.uuid4()), uuid.uuid4().hex * 2
        self.entry = {"id": self.id, "pod": f"pod-{index}", "namespace": "bench",
                      "uid": self.uid, "container": "worker"}
        self.pod_dir = os.path.join(base, "kubepods.slice", "kubepods-burstable.slice",
                                    f"kubepods-burstable-pod{self.uid.replace('-', '_')}.slice")
        self.path = os.path.join(self.pod_dir, f"cri-containerd-{self.id}.scope")
        self.proc = self.pid = None
        self.started = self.stopped = None  # epoch seconds

    def start(self, workload, env):
        os.makedirs(self.path)
        self.started = time.time()
        self.proc = subprocess.Popen([workload, "1", "2", "8192", "1", "0", "0"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                                     text=True, preexec_fn=cgroups.joiner(self.path))

    def wait_ready(self):
        ready = self.proc.stdout.readline().split()
        if ready[:1] != ["READY"]:
            raise RuntimeError(f"mr_workload did not start: {ready}")
        self.pid = ready[1]

    def signal_stop(self):
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.stdin.write("\n")
                self.proc.stdin.flush()
            except OSError:
                pass

    def stop(self):
        self.signal_stop()
        if self.proc is not None:
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            for pipe in (self.proc.stdin, self.proc.stdout):
                try:
                    pipe.close()
                except OSError:
                    pass
        self.stopped = time.time()
        for path in (self.path, self.pod_dir):
            try:
                os.rmdir(path)
            except OSError:
                pass  # removed with the rest at the end


def start_server(socket_path, listing_path):
    server = subprocess.Popen([DEBIAN_PYTHON, FAKE_CRI, socket_path, listing_path],
                              stdout=subprocess.PIPE, text=True)
    if server.stdout.readline().strip() != "READY":
        raise RuntimeError("the fake CRI server did not start")
    return server


def start_exporter(binary, library, port, socket_path, refresh):
    # In a cgroup namespace rooted at the bench's directory (this process is in it): the
    # exporter sees the bench's kubepods shapes at the top of the tree, where the anchored
    # cgroup rules match them (issue 37; tests/common/cgroups.py).
    args = [binary, "serve", f"--web.listen-address=127.0.0.1:{port}",
            "--collector.disable-defaults", "--collector.mr", f"--probe.library={library}",
            "--collector.workload", f"--collector.workload.cri-endpoint=unix://{socket_path}",
            f"--collector.workload.cri-refresh-interval={refresh}"]
    proc = subprocess.Popen(["ip", "netns", "exec", NS, *cgroups.in_namespace(args)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_listening(NS, port, proc, timeout=60)
    return proc


def thread_cpu(pid):
    """{tid: (comm, CPU seconds)} of a process's threads (schedstat: nanoseconds, not ticks)."""
    threads = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                comm = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                threads[int(tid)] = (comm, int(f.read().split()[0]) / 1e9)
        except (OSError, ValueError, IndexError):
            continue
    return threads


def thread_kind(tid, comm, initial):
    """Threads there before the first lookup (INITIAL: {tid: comm}) by name; those started
    since: the refresher (unnamed, so called as the thread that started it: an HTTP worker
    serving the first scrape) and gRPC's own (named by gRPC)."""
    if tid in initial:
        return comm
    return "CRI refresher" if comm in initial.values() else f"gRPC {comm}"


def by_thread_kind(before, after, initial):
    """CPU seconds between two thread_cpu snapshots by thread_kind (threads that exited in
    between are not counted)."""
    kinds = {}
    for tid, (comm, cpu) in after.items():
        kind = thread_kind(tid, comm, initial)
        kinds[kind] = kinds.get(kind, 0.0) + cpu - before.get(tid, (comm, 0.0))[1]
    return {kind: round(cpu, 4) for kind, cpu in sorted(kinds.items(), key=lambda kv: -kv[1])}


def cri_cpu(kinds):
    """CPU seconds of the threads that ask the runtime (the refresher and gRPC's)."""
    return sum(cpu for kind, cpu in kinds.items() if kind == "CRI refresher" or
               kind.startswith("gRPC "))


def machine_busy():
    """(busy, all) jiffies of the whole machine, all CPUs (/proc/stat)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return fields[0] + fields[1] + fields[2] + fields[5] + fields[6] + fields[7], sum(fields[:8])


def read_lines(path):
    try:
        with open(path) as f:
            return [line.split() for line in f if line.strip()]
    except FileNotFoundError:
        return []


def summary(values, scale=1.0, digits=2):
    if not values:
        return None
    def r(x):
        return round(scale * x, digits) if digits else int(round(scale * x))
    return {"n": len(values), "median": r(quantile(values, 0.5)), "p90": r(quantile(values, 0.9)),
            "max": r(max(values))}


def classify_calls(calls, start, end):
    """Calls in [start, end): periodic (the refresh interval after the call before, give or
    take a second) or after a miss (sooner)."""
    periodic = after_miss = 0
    gaps = []
    for i, t in enumerate(calls):
        if not start <= t < end:
            continue
        if i == 0:
            after_miss += 1  # the first scrape's lookups start the refresher
            continue
        gap = t - calls[i - 1]
        gaps.append(gap)
        if gap >= REFRESH_SECONDS - 1:
            periodic += 1
        else:
            after_miss += 1
    return periodic, after_miss, gaps


def grpc_client_round_trip(socket_path, calls=10):
    """Wall seconds of ListContainers as a Python gRPC client sees them (the server's whole
    answer: encoding, gRPC framing, the unix socket; no protobuf decoding)."""
    code = (
        "import grpc, json, sys, time\n"
        f"channel = grpc.insecure_channel('unix://{socket_path}')\n"
        "call = channel.unary_unary('/runtime.v1.RuntimeService/ListContainers',\n"
        "    request_serializer=lambda r: r, response_deserializer=lambda r: r)\n"
        "times = []\n"
        f"for _ in range({calls}):\n"
        "    t = time.perf_counter()\n"
        "    call(b'', timeout=30)\n"
        "    times.append(time.perf_counter() - t)\n"
        "print(json.dumps(times))\n")
    out = subprocess.run([DEBIAN_PYTHON, "-c", code], capture_output=True, text=True,
                         timeout=300)
    return json.loads(out.stdout) if out.returncode == 0 else []


def staleness(churned, info, end):
    """Per container started during the churn: first scrape with any workload series for its
    pid, first with pod and namespace; never named ones by lifetime."""
    first_any, first_named, misnamed = {}, {}, 0
    expected = {(c.pid, c.uid): c.entry for c in churned}
    for result in info:
        labels = result["metric"]
        key = (labels.get("pid"), labels.get("pod_uid"))
        if key not in expected or not result["values"]:
            continue
        t = float(result["values"][0][0])
        first_any[key] = min(t, first_any.get(key, t))
        if labels.get("pod"):
            entry = expected[key]
            if labels.get("pod") != entry["pod"] or labels.get("namespace") != entry["namespace"]:
                misnamed += 1
                continue
            first_named[key] = min(t, first_named.get(key, t))
    named, seen, never, pending = [], [], [], []
    for c in churned:
        key = (c.pid, c.uid)
        lifetime = (c.stopped or end) - c.started
        if key in first_any:
            seen.append(first_any[key] - c.started)
        if key in first_named:
            named.append(first_named[key] - c.started)
        elif c.stopped is not None:
            never.append(lifetime)
        else:
            pending.append(lifetime)
    buckets = []
    for low, high in LIFETIMES:
        stopped = [c for c in churned if c.stopped is not None and
                   low <= c.stopped - c.started and (high is None or c.stopped - c.started < high)]
        unnamed = [c for c in stopped if (c.pid, c.uid) not in first_named]
        buckets.append({"lifetime": f"{low}-{high} s" if high else f">= {low} s",
                        "stopped": len(stopped), "never_named": len(unnamed)})
    return {"started": len(churned), "named": len(named), "misnamed_series": misnamed,
            "seconds_to_named": summary(named), "seconds_to_first_series": summary(seen),
            "stopped_never_named": len(never),
            "stopped_never_named_lifetimes": sorted(round(x, 1) for x in never),
            "unnamed_at_end": len(pending),
            "unnamed_at_end_ages": sorted(round(x, 1) for x in pending),
            "by_lifetime": buckets}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("workload")
    parser.add_argument("library")
    parser.add_argument("outdir")
    parser.add_argument("--minutes", type=float, default=3)
    parser.add_argument("--block-seconds", type=float, default=60,
                        help="quiet and churn alternate in blocks of about this long")
    parser.add_argument("--containers", type=int, default=200)
    parser.add_argument("--sweep-seconds", type=int, default=20)
    parser.add_argument("--seed", type=int, default=28)
    args = parser.parse_args()
    churn_seconds = 60 * args.minutes
    if os.geteuid() != 0:
        print("SKIP: BPF, cgroups and network namespaces need root")
        return harness.SKIP
    prometheus = shutil.which("prometheus")
    mount = cgroups.cgroup2_mount()
    if not prometheus or not mount:
        print(f"SKIP: prometheus {prometheus}, cgroup2 mount {mount}")
        return harness.SKIP
    if subprocess.run([DEBIAN_PYTHON, "-c", "import grpc"], capture_output=True).returncode:
        print(f"SKIP: {DEBIAN_PYTHON} cannot import grpc (python3-grpcio) for the fake CRI server")
        return harness.SKIP
    grpc_library = os.path.join(os.path.dirname(os.path.realpath(args.binary)),
                                "librdmascope_grpc.so")
    if not os.path.exists(grpc_library):
        print(f"FAIL: {grpc_library} missing: the exporter could not ask the runtime")
        return 1
    # Two pipes per program, churned ones closed when they stop.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 8192)), hard))
    os.makedirs(args.outdir, exist_ok=True)
    root = cgroups.Root(mount, f"rdmascope-cri-churn-{os.getpid()}")
    base = root.base
    workdir = tempfile.mkdtemp(prefix="rdmascope-cri-churn-")
    sweep_dir = os.path.join(workdir, "sweep")
    os.makedirs(sweep_dir)
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(args.library))
    rng = random.Random(args.seed)
    socket_path = os.path.join(workdir, "cri.sock")
    sweep_socket = os.path.join(sweep_dir, "cri.sock")
    listing = Listing(os.path.join(workdir, "containers.json"))
    sweep_listing = Listing(os.path.join(sweep_dir, "containers.json"))
    running, churned, everyone = [], [], []
    servers, exporters, prom = [], [], None
    result = {"containers": args.containers, "churn_period_s": CHURN_PERIOD,
              "refresh_interval_s": REFRESH_SECONDS, "miss_interval_s": MISS_SECONDS,
              "scrape_interval_s": 1, "scraper": "prometheus", "seed": args.seed}
    subprocess.run(["ip", "netns", "add", NS], check=True)
    subprocess.run(["ip", "netns", "exec", NS, "ip", "link", "set", "lo", "up"], check=True)
    root.enter()  # the exporters it starts too: their cgroup namespace's root
    try:
        steady = [Container(base, i) for i in range(args.containers)]
        for c in steady:
            listing.entries[c.id] = c.entry
        listing.write()
        servers.append(start_server(socket_path, listing.path))
        exporter = start_exporter(args.binary, args.library, PORT, socket_path,
                                  f"{REFRESH_SECONDS}s")
        exporters.append(exporter)
        initial = {tid: comm for tid, (comm, _) in thread_cpu(exporter.pid).items()}
        t = time.monotonic()
        for c in steady:
            c.start(args.workload, env)
            everyone.append(c)
        for c in steady:
            c.wait_ready()
        running = list(steady)
        print(f"{len(steady)} containers started in {time.monotonic() - t:.1f} s")
        # The first scrape's lookups start the refresher; its first answer names them all.
        deadline, named = time.monotonic() + 60, 0
        while time.monotonic() < deadline:
            named = sum(1 for line in scrape_text(NS, PORT).splitlines()
                        if line.startswith("rdma_process_workload_info{") and ' pod="' in
                        line.replace(",", " ").replace("{", " "))
            if named >= len(steady):
                break
            time.sleep(1)
        print(f"{named} of {len(steady)} named before the quiet period")
        result["named_before_quiet"] = named

        prom = Prometheus(NS, prometheus, workdir, {"exporter": f"127.0.0.1:{PORT}"},
                          port=PROMETHEUS_PORT)
        prom_started = time.time()
        time.sleep(5)
        result["exporter_threads"] = sorted(
            thread_kind(tid, comm, initial) for tid, (comm, _) in thread_cpu(exporter.pid).items())

        def mark():
            return {"t": time.time(), "cpu": cpu_seconds(exporter.pid),
                    "threads": thread_cpu(exporter.pid), "server_cpu": cpu_seconds(servers[0].pid),
                    "machine": machine_busy()}
        # Quiet and churn alternate in blocks (the machine's other load, e.g. builds, falls on
        # both alike).
        blocks = max(1, round(churn_seconds / args.block_seconds))
        block = churn_seconds / blocks
        print(f"{blocks} x (quiet {block:.0f} s, churn {block:.0f} s: one container started "
              f"and one stopped every {CHURN_PERIOD} s)")
        windows = []  # (phase, mark before, mark after)
        index, late = len(steady), []
        for _ in range(blocks):
            before = mark()
            time.sleep(block)
            between = mark()
            windows.append(("quiet", before, between))
            begin = time.monotonic()
            end = begin + block
            next_start, next_stop = begin, begin + CHURN_PERIOD / 2
            while True:
                now = time.monotonic()
                if now >= end:
                    break
                if now >= next_start:
                    late.append(now - next_start)
                    c = Container(base, index)
                    index += 1
                    listing.entries[c.id] = c.entry
                    listing.write()  # listed before its process runs
                    c.start(args.workload, env)
                    everyone.append(c)
                    c.wait_ready()
                    running.append(c)
                    churned.append(c)
                    next_start += CHURN_PERIOD
                elif now >= next_stop:
                    victim = running.pop(rng.randrange(len(running)))
                    victim.stop()
                    del listing.entries[victim.id]  # unlisted once its process exited
                    listing.write()
                    next_stop += CHURN_PERIOD
                else:
                    time.sleep(min(next_start, next_stop) - now)
            windows.append(("churn", between, mark()))
        churn_end = windows[-1][2]["t"]
        stops = sum(1 for c in everyone if c.stopped is not None)
        print(f"{len(churned)} started, {stops} stopped; start lateness median "
              f"{1000 * quantile(late, 0.5):.0f} ms, max {1000 * max(late):.0f} ms")
        result["churn"] = {"started": len(churned), "stopped": stops, "blocks": blocks,
                           "block_seconds": round(block, 1),
                           "start_late_ms": summary(late, 1000, 1)}
        time.sleep(3)  # the scrapes after the last start
        window = int(time.time() - prom_started) + 30
        info = prom._get(f"rdma_process_workload_info[{window}s]")
        durations = prom._get(f"scrape_duration_seconds[{window}s]")
        collector = prom._get(
            f'rdmascope_collector_duration_seconds{{collector="workload"}}[{window}s]')
        prom.close()
        exporter.terminate()
        exporter.wait()

        # Phases: calls, CPU, server time, scrape durations, summed over their blocks.
        calls = sorted(float(line[0]) for line in read_lines(listing.path + ".calls"))
        timing = [(float(t), float(wall), float(cpu), int(n), int(size))
                  for t, wall, cpu, n, size in read_lines(listing.path + ".timing")]
        phases, result["blocks"] = {}, []
        for name in ("quiet", "churn"):
            seconds = cpu = server_cpu = 0.0
            periodic = after_miss = 0
            gaps, answered, scrape, own, kinds = [], [], [], [], {}
            for phase, before, after in windows:
                if phase != name:
                    continue
                t0, t1 = before["t"], after["t"]
                seconds += t1 - t0
                cpu += after["cpu"] - before["cpu"]
                server_cpu += after["server_cpu"] - before["server_cpu"]
                p, m, g = classify_calls(calls, t0, t1)
                periodic, after_miss, gaps = periodic + p, after_miss + m, gaps + g
                answered += [x for x in timing if t0 <= x[0] < t1]
                scrape += [float(v) for r in durations for ts, v in r["values"]
                           if t0 <= float(ts) < t1]
                own += [float(v) for r in collector for ts, v in r["values"]
                        if t0 <= float(ts) < t1]
                for kind, s in by_thread_kind(before["threads"], after["threads"],
                                              initial).items():
                    kinds[kind] = round(kinds.get(kind, 0.0) + s, 4)
                busy = [a - b for a, b in zip(after["machine"], before["machine"])]
                result["blocks"].append({
                    "t": t0, "phase": name, "seconds": round(t1 - t0, 1), "calls": p + m,
                    "exporter_cpu_s": round(after["cpu"] - before["cpu"], 3),
                    "machine_busy_cores": round(os.cpu_count() * busy[0] / max(1, busy[1]), 2)})
            minutes = seconds / 60
            phases[name] = {
                "seconds": round(seconds, 1),
                "calls": periodic + after_miss,
                "calls_per_minute": round((periodic + after_miss) / minutes, 1),
                "periodic": periodic, "after_miss": after_miss,
                "seconds_between_calls": summary(gaps),
                "exporter_cpu_s_per_minute": round(cpu / minutes, 3),
                "exporter_cpu_by_thread_s": dict(sorted(kinds.items(), key=lambda kv: -kv[1])),
                "cri_threads_cpu_ms_per_minute": round(1000 * cri_cpu(kinds) / minutes, 2),
                "cri_threads_cpu_ms_per_call": round(
                    1000 * cri_cpu(kinds) / max(1, periodic + after_miss), 3),
                "server_cpu_s_per_minute": round(server_cpu / minutes, 3),
                "server_handler_ms": summary([x[1] for x in answered], 1000),
                "server_handler_cpu_ms": summary([x[2] for x in answered], 1000),
                "listed": summary([x[3] for x in answered], 1, 0),
                "answer_bytes": summary([x[4] for x in answered], 1, 0),
                "scrapes": len(scrape),
                "scrape_ms": summary(scrape, 1000),
                "workload_collector_ms": summary(own, 1000),
            }
        result["phases"] = phases
        result["blocks"].sort(key=lambda b: b.pop("t"))
        result["staleness"] = staleness(churned, info, churn_end)

        # Answer size: a second exporter asking every 250 ms, listings padded to each size.
        print(f"answer size: {', '.join(map(str, SWEEP_SIZES))} containers, "
              f"{args.sweep_seconds} s each, refresh {SWEEP_REFRESH}")
        sweep_listing.write()
        servers.append(start_server(sweep_socket, sweep_listing.path))
        sweeper = start_exporter(args.binary, args.library, SWEEP_PORT, sweep_socket,
                                 SWEEP_REFRESH)
        exporters.append(sweeper)
        sweep_initial = {tid: comm for tid, (comm, _) in thread_cpu(sweeper.pid).items()}
        # Registered after its probes attached (exported), in a container it is listed: the
        # first scrape's lookup starts its refresher.
        trigger = Container(base, index)
        sweep_listing.entries[trigger.id] = trigger.entry
        sweep_listing.write()
        trigger.start(args.workload, env)
        everyone.append(trigger)
        trigger.wait_ready()
        scrape_text(NS, SWEEP_PORT)
        real = [c.entry for c in running]
        sweep = []
        for size in SWEEP_SIZES:
            sweep_listing.entries = {e["id"]: e for e in ([trigger.entry] + real)[:size]}
            sweep_listing.padding = synthetic(size - len(sweep_listing.entries))
            sweep_listing.write()
            time.sleep(2)
            t0, cpu0, server0 = time.time(), cpu_seconds(sweeper.pid), cpu_seconds(servers[1].pid)
            threads0 = thread_cpu(sweeper.pid)
            time.sleep(args.sweep_seconds)
            t1, cpu1, server1 = time.time(), cpu_seconds(sweeper.pid), cpu_seconds(servers[1].pid)
            kinds = by_thread_kind(threads0, thread_cpu(sweeper.pid), sweep_initial)
            answered = [(float(t), float(wall), float(cpu), int(n), int(b)) for t, wall, cpu, n, b
                        in read_lines(sweep_listing.path + ".timing") if t0 <= float(t) < t1]
            round_trip = grpc_client_round_trip(sweep_socket)
            n = len(answered)
            sweep.append({
                "listed": size, "calls": n,
                "answer_bytes": answered[-1][4] if answered else None,
                "exporter_cpu_ms_per_call": round(1000 * (cpu1 - cpu0) / n, 2) if n else None,
                "cri_threads_cpu_ms_per_call": round(1000 * cri_cpu(kinds) / n, 3) if n else None,
                "exporter_cpu_by_thread_s": kinds,
                "server_cpu_ms_per_call": round(1000 * (server1 - server0) / n, 2) if n else None,
                "server_handler_ms": summary([x[1] for x in answered], 1000),
                "server_handler_cpu_ms": summary([x[2] for x in answered], 1000),
                "client_round_trip_ms": summary(round_trip, 1000),
            })
            print(f"  {size}: {sweep[-1]}")
        result["answer_size"] = sweep
    finally:
        for c in everyone:
            c.signal_stop()
        for c in everyone:
            if c.stopped is None:
                c.stop()
        if prom is not None:
            prom.close()
        for proc in exporters:
            if proc.poll() is None:
                proc.terminate()
                proc.wait()
        for server in servers:
            if server.poll() is None:
                server.terminate()
                server.wait(timeout=30)
        subprocess.run(["ip", "netns", "del", NS])
        root.close()
        shutil.rmtree(workdir, ignore_errors=True)

    report = render(result, args)
    print(report)
    with open(os.path.join(args.outdir, "cri_churn.md"), "w") as f:
        f.write(report)
    with open(os.path.join(args.outdir, "cri_churn.json"), "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    return 0


def render(result, args):
    def q(s, key="median", unit=""):
        return "-" if not s else f"{s[key]}{unit}"

    quiet, churn = result["phases"]["quiet"], result["phases"]["churn"]
    lines = [
        "## CRI names under container churn (issue 28)",
        "",
        f"{result['containers']} running containers (cgroup v2, kubelet systemd driver, one "
        f"mr_workload holding a region each), one exporter (`--collector.mr "
        f"--collector.workload`, refresh {result['refresh_interval_s']} s, miss interval "
        f"{result['miss_interval_s']} s) scraped by Prometheus every 1 s; a fake CRI server "
        f"(Python) answering from the listing. Quiet and churn alternating in "
        f"{result['churn']['blocks']} blocks of {result['churn']['block_seconds']:.0f} s each "
        f"({quiet['seconds']:.0f} s and {churn['seconds']:.0f} s in all); churn: one container "
        f"started and one stopped every {result['churn_period_s']} s "
        f"({result['churn']['started']} started, {result['churn']['stopped']} stopped).",
        "",
        "| phase | calls/min | periodic | after a miss | s between calls (median) | "
        "exporter CPU/min | of which CRI threads | server handler (median) | answer | "
        "scrape median | p90 | workload collector median |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, p in (("quiet", quiet), ("churn", churn)):
        lines.append(
            f"| {name} | {p['calls_per_minute']} | {p['periodic']} | {p['after_miss']} | "
            f"{q(p['seconds_between_calls'])} | {1000 * p['exporter_cpu_s_per_minute']:.0f} ms | "
            f"{p['cri_threads_cpu_ms_per_minute']} ms ({p['cri_threads_cpu_ms_per_call']} ms "
            f"per call) | "
            f"{q(p['server_handler_ms'], unit=' ms')} | "
            f"{q(p['answer_bytes'], unit=' B')} | {q(p['scrape_ms'], unit=' ms')} | "
            f"{q(p['scrape_ms'], 'p90', ' ms')} | {q(p['workload_collector_ms'], unit=' ms')} |")
    s = result["staleness"]
    lines += [
        "",
        f"Exporter CPU by thread (s), quiet: {quiet['exporter_cpu_by_thread_s']}; churn: "
        f"{churn['exporter_cpu_by_thread_s']}.",
        "",
        "Blocks (exporter CPU s, machine busy cores): " + ", ".join(
            f"{b['phase']} {b['exporter_cpu_s']} s, {b['machine_busy_cores']}"
            for b in result["blocks"]) + ".",
        "",
        f"Containers started during the churn: {s['started']}; named by a scrape "
        f"{s['named']}; seconds from start to the first scrape naming the pod: median "
        f"{q(s['seconds_to_named'])}, p90 {q(s['seconds_to_named'], 'p90')}, max "
        f"{q(s['seconds_to_named'], 'max')} (to its first workload series at all: median "
        f"{q(s['seconds_to_first_series'])}, max {q(s['seconds_to_first_series'], 'max')}). "
        f"Stopped before any scrape named them: {s['stopped_never_named']} (lifetimes "
        f"{s['stopped_never_named_lifetimes']} s); unnamed at the end: {s['unnamed_at_end']} "
        f"(ages {s['unnamed_at_end_ages']} s); series with wrong names: {s['misnamed_series']}.",
        "",
        "| lifetime (stopped ones) | stopped | never named |",
        "|---|---|---|",
    ]
    for b in s["by_lifetime"]:
        lines.append(f"| {b['lifetime']} | {b['stopped']} | {b['never_named']} |")
    lines += [
        "",
        f"Answer size (a second exporter asking every {SWEEP_REFRESH}, {args.sweep_seconds} s "
        f"per size):",
        "",
        "| listed | answer | calls | exporter CPU per call | of which CRI threads | "
        "server handler median | Python client round trip median |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in result["answer_size"]:
        lines.append(
            f"| {r['listed']} | {r['answer_bytes']} B | {r['calls']} | "
            f"{r['exporter_cpu_ms_per_call']} ms | {r['cri_threads_cpu_ms_per_call']} ms | "
            f"{q(r['server_handler_ms'], unit=' ms')} | "
            f"{q(r['client_round_trip_ms'], unit=' ms')} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
