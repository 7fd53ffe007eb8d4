"""Checks for mr.sh: real registrations over rxe0 are seen per process, a leaker shows exactly
its leak, and nothing is left of it after it exits."""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "e2e"))
import harness  # noqa: E402

LEAKED_REGIONS, LEAKED_SIZE = 12, 65536


def marker(lab, name):
    for line in lab.console:
        if line.startswith(f"@@@{name} "):
            return line.split()[1]
    return None


value = harness.value


def check(lab):
    failures = []

    def expect(what, got, want):
        if got != want:
            failures.append(f"{what}: got {got!r}, want {want!r}")

    probe = harness.parse("\n".join(lab.blocks["probe"]))
    expect("probe attached in the guest", value(probe, "rdmascope_probe_attached", probe="mr"),
           1.0)

    churn = harness.parse("\n".join(lab.blocks["scrape_churn"]))
    churner = marker(lab, "CHURN-PID")
    expect("attached during a reg/dereg loop: outstanding regions, bytes",
           (value(churn, "rdma_mr_outstanding_regions", pid=churner),
            value(churn, "rdma_mr_outstanding_bytes", pid=churner)),
           (40.0, 40.0 * 65536))

    pingpong = harness.parse("\n".join(lab.blocks["scrape_pingpong"]))
    server = marker(lab, "PINGPONG-PID")
    expect("ibv_rc_pingpong server registrations",
           value(pingpong, "rdma_mr_registrations_total", pid=server), 1.0)
    expect("ibv_rc_pingpong server outstanding regions",
           value(pingpong, "rdma_mr_outstanding_regions", pid=server), 1.0)

    leak = harness.parse("\n".join(lab.blocks["scrape_leak"]))
    # Server and client both registered at least their 64 KiB buffer.
    bw_regs = value(leak, "rdma_mr_registration_size_bytes_count", comm="ib_write_bw")
    bw_bytes = value(leak, "rdma_mr_registration_size_bytes_sum", comm="ib_write_bw")
    if not bw_regs or bw_regs < 2 or not bw_bytes or bw_bytes < 2 * 65536:
        failures.append(f"ib_write_bw registrations {bw_regs}, bytes {bw_bytes}")
    if not any(" 65536 " in line for line in lab.blocks.get("write_bw_client", [])):
        failures.append("ib_write_bw client did not report a 65536-byte result")

    leaker = marker(lab, "LEAKER-PID")
    expect("leaker outstanding regions",
           value(leak, "rdma_mr_outstanding_regions", pid=leaker, comm="mr_leaker"),
           float(LEAKED_REGIONS))
    expect("leaker outstanding bytes",
           value(leak, "rdma_mr_outstanding_bytes", pid=leaker, comm="mr_leaker"),
           float(LEAKED_REGIONS * LEAKED_SIZE))

    # Without eBPF too: VmPin of a process holding /dev/infiniband/uverbs* open.
    expect("leaker pinned bytes (VmPin)",
           value(leak, "rdma_process_pinned_bytes", pid=leaker, comm="mr_leaker"),
           float(LEAKED_REGIONS * LEAKED_SIZE))

    # What pinned memory can grow to: the process's RLIMIT_MEMLOCK and the host's memory.
    limit = value(leak, "rdma_process_locked_memory_limit_bytes", pid=leaker)
    if limit is None or limit < LEAKED_REGIONS * LEAKED_SIZE:
        failures.append(f"leaker locked-memory limit {limit}")
    host_memory = value(leak, "rdma_host_memory_bytes")
    if not host_memory or host_memory < 64 << 20:
        failures.append(f"host memory {host_memory}")

    stacks = json.loads("\n".join(lab.blocks["stacks"]))["processes"]
    sites = stacks[0]["stacks"] if stacks else []
    expect("leak call site",
           # frames are "function+0xoffset": symbols only, no address
           (sites[0]["outstanding_regions"], sites[0]["frames"][0]["function"].split("+")[0])
           if sites else None,
           (LEAKED_REGIONS, "leak_one_region"))

    after = harness.parse("\n".join(lab.blocks["scrape_after_exit"]))
    expect("leaker series after exit",
           len(harness.series(after, "rdma_mr_outstanding_regions", pid=leaker)), 0)
    expect("leaker pinned series after exit",
           len(harness.series(after, "rdma_process_pinned_bytes", pid=leaker)), 0)
    expect("released at exit", value(after, "rdma_mr_exit_released_regions_total",
                                     comm="mr_leaker"), float(LEAKED_REGIONS))
    lab.notes.append(f"guest: ib_write_bw server+client: {int(bw_regs or 0)} registrations, "
                     f"{int(bw_bytes or 0)} bytes")
    lab.notes.append(f"guest: pingpong server pid {server} registered 1 region; mr_leaker pid "
                     f"{leaker} leaked {LEAKED_REGIONS} x {LEAKED_SIZE} bytes, all released at "
                     "exit")
    return failures
