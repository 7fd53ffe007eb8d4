"""Checks for mr_restart.sh: regions registered before the exporter started are counted
exactly (from restrack), followed as they are deregistered, never counted twice, and gone
with their process."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "e2e"))
import harness  # noqa: E402

SIZES = [65536, 65536, 131072, 262144, 4096]
DROPPED = 2
EXTRA = [8192, 16384]
value = harness.value


def marker(lab, name):
    for line in lab.console:
        if line.startswith(f"@@@{name} "):
            return line.split()[1]
    return None


def check(lab):
    failures = []

    def expect(what, got, want):
        if got != want:
            failures.append(f"{what}: got {got!r}, want {want!r}")

    pid = marker(lab, "HOLDER-PID")
    held = SIZES[DROPPED:] + EXTRA

    def figures(block):
        scrape = harness.parse("\n".join(lab.blocks[block]))
        return scrape, (value(scrape, "rdma_mr_outstanding_regions", pid=pid),
                        value(scrape, "rdma_mr_outstanding_bytes", pid=pid))

    # Started after the registrations: the probes saw none of them, restrack all (with no
    # pid: their thread has exited; their PD names the process).
    no_pid = [line for line in lab.blocks["restrack_before"]
              if " mrn " in line and " pid " not in line and "[" not in line]
    expect("restrack lists the 5 regions of the exited thread without a pid", len(no_pid),
           len(SIZES))
    seeded, got = figures("scrape_seeded")
    expect("started after 5 registrations: regions, bytes", got,
           (float(len(SIZES)), float(sum(SIZES))))
    expect("registrations counted since the start", value(
        seeded, "rdma_mr_registrations_total", pid=pid), 0.0)
    expect("the kernel's own per-process MR bytes (resources collector)",
           value(seeded, "rdma_process_mr_bytes", pid=pid, device="rxe0"), float(sum(SIZES)))
    expect("VmPin", value(seeded, "rdma_process_pinned_bytes", pid=pid), float(sum(SIZES)))

    # 2 deregistered (seeded: followed in restrack), 2 registered (seen by the probes).
    followed, got = figures("scrape_followed")
    expect("after 2 deregistrations and 2 registrations: regions, bytes", got,
           (float(len(held)), float(sum(held))))
    expect("registrations seen by the probes",
           value(followed, "rdma_mr_registrations_total", pid=pid), float(len(EXTRA)))
    expect("resources collector agrees", value(
        followed, "rdma_process_mr_bytes", pid=pid, device="rxe0"), float(sum(held)))

    restarted, got = figures("scrape_restarted")
    expect("restarted exporter: regions, bytes", got, (float(len(held)), float(sum(held))))
    expect("restarted exporter: registrations since its start",
           value(restarted, "rdma_mr_registrations_total", pid=pid), 0.0)

    after = harness.parse("\n".join(lab.blocks["scrape_after_exit"]))
    expect("series after exit", len(harness.series(after, "rdma_mr_outstanding_regions",
                                                   pid=pid)), 0)
    expect("mr collector healthy after exit",
           value(after, "rdmascope_collector_success", collector="mr"), 1.0)

    for block, regions in (("first_exporter_log", len(SIZES)), ("exporter_log", len(held))):
        seeded_line = [line for line in lab.blocks[block]
                       if "before the exporter started, from restrack" in line]
        expect(f"{block}: seed log line", len(seeded_line), 1)
        if seeded_line and f"regions={regions}" not in seeded_line[0]:
            failures.append(f"{block}: {seeded_line[0]!r} does not say regions={regions}")
    probe = value(seeded, "rdmascope_probe_attached", probe="mr_kernel")
    lab.notes.append(f"guest: mr_holder pid {pid}: {len(SIZES)} regions ({sum(SIZES)} bytes) "
                     f"seeded from restrack, {len(held)} ({sum(held)} bytes) after the step "
                     f"and after a restart; kernel path {probe}")
    return failures
