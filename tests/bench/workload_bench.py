#!/usr/bin/env python3
"""Benchmark (reported, never asserted) of workload attribution (issue 28): what
rdma_process_workload_info costs a scrape at 1,000 RDMA processes in 200 containers.

1,000 programs hold a memory region each (the libibverbs stand-in, tracked by the mr probes),
five per container, in real cgroup v2 directories of the kubelet's systemd-driver shape. Two
exporters serve them side by side, one with the workload collector and one without, scraped
by one real Prometheus (keep-alive, gzip) every second: scrape durations as Prometheus
measured them, the exporters' CPU per scrape and RSS, and the workload collector's own
duration (rdmascope_collector_duration_seconds).

Usage: workload_bench.py RDMASCOPE MR_WORKLOAD FAKEVERBS_LIB OUTPUT_DIR [--seconds N]"""

import argparse
import os
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
from prometheus_run import (Prometheus, cpu_seconds, memory_kib, scrape_text,  # noqa: E402
                            wait_listening)

PROCESSES, CONTAINERS = 1000, 200
NS = "rdmascope-workload-bench"
PORTS = {"with_workload": 9731, "without_workload": 9732}


def start_exporter(binary, library, port, workload):
    # In a cgroup namespace rooted at the bench's directory (this process is in it): the
    # exporter sees the bench's kubepods shapes at the top of the tree, where the anchored
    # cgroup rules match them (issue 37; tests/common/cgroups.py).
    args = [binary, "serve", f"--web.listen-address=127.0.0.1:{port}",
            "--collector.disable-defaults", "--collector.mr", f"--probe.library={library}"]
    if workload:
        args.append("--collector.workload")
    proc = subprocess.Popen(["ip", "netns", "exec", NS, *cgroups.in_namespace(args)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_listening(NS, port, proc, timeout=60)
    return proc


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("workload")
    parser.add_argument("library")
    parser.add_argument("outdir")
    parser.add_argument("--seconds", type=int, default=60)
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("SKIP: BPF, cgroups and network namespaces need root")
        return harness.SKIP
    prometheus = shutil.which("prometheus")
    mount = cgroups.cgroup2_mount()
    if not prometheus or not mount:
        print(f"SKIP: prometheus {prometheus}, cgroup2 mount {mount}")
        return harness.SKIP
    # Two pipes per program.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 8192)), hard))
    os.makedirs(args.outdir, exist_ok=True)
    root = cgroups.Root(mount, f"rdmascope-bench-{os.getpid()}", note=None)
    containers = []
    for _ in range(CONTAINERS):
        uid = str(uuid.uuid4())
        containers.append(root.make(os.path.join(
            "kubepods.slice", "kubepods-burstable.slice",
            f"kubepods-burstable-pod{uid.replace('-', '_')}.slice",
            f"cri-containerd-{uuid.uuid4().hex * 2}.scope")))
    # The exporters it starts are in the bench's directory too, their namespace's root.
    root.enter()
    subprocess.run(["ip", "netns", "add", NS], check=True)
    subprocess.run(["ip", "netns", "exec", NS, "ip", "link", "set", "lo", "up"], check=True)
    exporters, programs = {}, []
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(args.library))
    try:
        for name, port in PORTS.items():
            exporters[name] = start_exporter(args.binary, args.library, port,
                                             name == "with_workload")
        started = time.monotonic()
        for i in range(PROCESSES):
            programs.append(subprocess.Popen(
                [args.workload, "1", "2", "8192", "1", "0", "0"], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, env=env, text=True,
                preexec_fn=cgroups.joiner(containers[i % CONTAINERS])))
        for program in programs:
            program.stdout.readline()
        print(f"{PROCESSES} programs in {CONTAINERS} containers started in "
              f"{time.monotonic() - started:.1f} s")
        described = scrape_text(NS, PORTS["with_workload"]).count("rdma_process_workload_info{")
        exported = scrape_text(NS, PORTS["without_workload"]).count("rdma_mr_outstanding_regions{")
        print(f"workload series {described}, processes exported {exported}")
        workdir = tempfile.mkdtemp(prefix="rdmascope-workload-bench-")
        cpu_before = {name: cpu_seconds(proc.pid) for name, proc in exporters.items()}
        with Prometheus(NS, prometheus, workdir,
                        {name: f"127.0.0.1:{port}" for name, port in PORTS.items()},
                        port=9733) as prom:
            time.sleep(args.seconds)
            durations = prom.samples("scrape_duration_seconds")
            collector = prom.samples(
                'rdmascope_collector_duration_seconds{collector="workload"}')
            scrapes = {name: len(values) for name, values in durations.items()}
        cpu = {name: cpu_seconds(proc.pid) - cpu_before[name] for name, proc in exporters.items()}
        memory = {name: memory_kib(proc.pid) for name, proc in exporters.items()}
        shutil.rmtree(workdir, ignore_errors=True)
    finally:
        for program in programs:
            if program.poll() is None:
                program.stdin.write("\n")
                program.stdin.flush()
        for program in programs:
            try:
                program.wait(timeout=30)
            except subprocess.TimeoutExpired:
                program.kill()
        for proc in exporters.values():
            proc.terminate()
            proc.wait()
        subprocess.run(["ip", "netns", "del", NS])
        root.close()

    def ms(values, q):
        ordered = sorted(values)
        return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    lines = [
        "## Workload attribution at 1,000 processes in 200 containers (issue 28)",
        "",
        f"{PROCESSES} programs holding one region each, {PROCESSES // CONTAINERS} per container, "
        f"in {CONTAINERS} cgroup v2 directories of the kubelet's systemd-driver shape; two "
        f"exporters (`--collector.mr`, one with `--collector.workload`), scraped by one "
        f"Prometheus every 1 s for {args.seconds} s. {described} workload series for "
        f"{exported} exported processes.",
        "",
        "| exporter | scrapes | scrape median | p90 | CPU per scrape | VmRSS | VmHWM |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in PORTS:
        values = durations.get(name, [])
        if not values:
            lines.append(f"| {name} | 0 | - | - | - | - | - |")
            continue
        lines.append(
            f"| {name} | {scrapes[name]} | {ms(values, 0.5):.2f} ms | {ms(values, 0.9):.2f} ms | "
            f"{1000 * cpu[name] / max(1, scrapes[name]):.2f} ms | "
            f"{memory[name].get('VmRSS', 0) / 1024:.1f} MiB | "
            f"{memory[name].get('VmHWM', 0) / 1024:.1f} MiB |")
    own = collector.get("with_workload", [])
    if own:
        lines += ["", f"The workload collector itself (rdmascope_collector_duration_seconds): "
                      f"median {ms(own, 0.5):.2f} ms, p90 {ms(own, 0.9):.2f} ms per scrape."]
    report = "\n".join(lines) + "\n"
    print(report)
    with open(os.path.join(args.outdir, "workload.md"), "w") as f:
        f.write(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
