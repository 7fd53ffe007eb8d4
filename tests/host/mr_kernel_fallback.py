#!/usr/bin/env python3
"""Host tier: on a kernel without InfiniBand BTF (this host: no ib_core) the MR tracking falls
back to uprobes cleanly: MR metrics still come (from the libibverbs stand-in), the kernel
path reports 0, and one log line says why. With --collector.mr.tracking=kernel the collector reports no
probe and says why instead of silently using uprobes; with --collector.mr.tracking=uprobes nothing is
even tried."""

import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
import harness  # noqa: E402

value = harness.value


def main(binary, workload, library):
    if os.geteuid() != 0:
        print("SKIP: BPF needs root")
        return harness.SKIP
    if os.path.exists("/sys/kernel/btf/ib_core"):
        print("SKIP: this kernel has ib_core with BTF: the kernel path is the lab's to test")
        return harness.SKIP
    checks = harness.Checker()
    expect, failures = checks.expect, checks.failures

    base = ["--collector.disable-defaults", "--collector.mr", f"--probe.library={library}"]
    with harness.Exporter(binary, base) as exporter:
        env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(library))
        # THREADS REGIONS SIZE LEAKED FAILURES OLD_ABI EXTRAS: one thread, 3 regions, 1 leaked.
        proc = subprocess.Popen([workload, "1", "3", "4096", "1", "0", "0", "0"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)
        ready = proc.stdout.readline().split()
        samples = harness.parse(exporter.metrics())
        proc.stdin.close()
        proc.wait()
        log = exporter.read_log()
    expect("auto: probe=mr attached", value(samples, "rdmascope_probe_attached", probe="mr"), 1.0)
    expect("auto: probe=mr_kernel", value(samples, "rdmascope_probe_attached",
                                          probe="mr_kernel"), 0.0)
    expect("auto: uprobes feed the metrics",
           value(samples, "rdma_mr_registrations_total", pid=ready[1] if ready else None), 3.0)
    fallback = [line for line in log.splitlines() if "falls back to uprobes" in line]
    expect("auto: one log line saying why", len(fallback), 1)
    expect("auto: the reason names ib_core",
           bool(fallback) and "no BTF for ib_core" in fallback[0], True)

    with harness.Exporter(binary, [*base, "--collector.mr.tracking=kernel"]) as exporter:
        samples = harness.parse(exporter.metrics())
        log = exporter.read_log()
    expect("kernel only: probe=mr", value(samples, "rdmascope_probe_attached", probe="mr"), 0.0)
    expect("kernel only: reason logged", "--collector.mr.tracking=kernel: no BTF for ib_core" in log, True)

    with harness.Exporter(binary, [*base, "--collector.mr.tracking=uprobes"]) as exporter:
        samples = harness.parse(exporter.metrics())
        log = exporter.read_log()
    expect("uprobes: probe=mr", value(samples, "rdmascope_probe_attached", probe="mr"), 1.0)
    expect("uprobes: the kernel path not tried", "kernel path" in log, False)

    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
