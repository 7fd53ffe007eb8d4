"""Checks for mr_kernel.sh: the kernel path (fentry/fexit on uverbs/ib_core) is chosen in the
guest, counts a program with its own copy of libibverbs exactly (which the uprobes do not
see), and drops it at exit with its regions counted as released; the bench figures of the
same run are reported as notes (not asserted)."""

import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "e2e"))
import harness  # noqa: E402

SIZE = 65536
COPY_PAIRS, COPY_FAILURES, COPY_LEAKS = 7, 2, 12

value = harness.value


def marker(lab, name):
    for line in lab.console:
        if line.startswith(f"@@@{name} "):
            return line.split()[1]
    return None


def scrape(lab, name):
    return harness.parse("\n".join(lab.blocks.get(name, [])))


def pair_ns(lab, name):
    for line in lab.blocks.get(name, []):
        if line.startswith("pair_ns "):
            return int(line.split()[1])
    return None


def bpf_stats(lab, name, pairs=2000):
    """(ns, runs) per bench pair of the exporter's BPF programs (fdinfo run_time_ns, run_cnt:
    the programs only, not the uprobe trap or the trampoline around them)."""
    time_ns = runs = 0
    for line in lab.blocks.get(name, []):
        if line.startswith("run_time_ns:"):
            time_ns += int(line.split()[1])
        elif line.startswith("run_cnt:"):
            runs += int(line.split()[1])
    return (time_ns // pairs, round(runs / pairs, 2)) if runs else None


def pair_mean_ns(lab, name):
    for line in lab.blocks.get(name, []):
        if line.startswith("pair_ns_mean "):
            return int(line.split()[1])
    return None


def cleanup_fields(line):
    """The counts of an "mr stacks cleanup" debug log line (exporter/bpf/stack_gc.cc)."""
    return {key: int(value) for key, value in re.findall(
        r' (stacks|referenced|deleted|candidates)=(\d+)', line)}


def check(lab):
    failures = []

    def expect(what, got, want):
        if got != want:
            failures.append(f"{what}: got {got!r}, want {want!r}")

    # Forced uprobes: attached, not the kernel path; the system library's pairs are seen, the
    # private copy's registrations are not.
    uprobes = scrape(lab, "scrape_uprobes_bench")
    expect("uprobes: rdmascope_probe_attached{probe=mr}",
           value(uprobes, "rdmascope_probe_attached", probe="mr"), 1.0)
    expect("uprobes: rdmascope_probe_attached{probe=mr_kernel}",
           value(uprobes, "rdmascope_probe_attached", probe="mr_kernel"), 0.0)
    pid = marker(lab, "UPROBES-BENCH-PID")
    expect("uprobes: bench registrations",
           value(uprobes, "rdma_mr_registrations_total", pid=pid), 2000.0)
    copy = scrape(lab, "scrape_uprobes_copy")
    pid = marker(lab, "UPROBES-COPY-PID")
    expect("uprobes: series of the program with its own libibverbs",
           len(harness.series(copy, "rdma_mr_registrations_total", pid=pid)), 0)

    # Auto: the kernel path.
    kernel = scrape(lab, "scrape_kernel_bench")
    expect("kernel: rdmascope_probe_attached{probe=mr}",
           value(kernel, "rdmascope_probe_attached", probe="mr"), 1.0)
    expect("kernel: rdmascope_probe_attached{probe=mr_kernel}",
           value(kernel, "rdmascope_probe_attached", probe="mr_kernel"), 1.0)
    if not any("mr tracking in the kernel" in line for line in lab.blocks.get("log_kernel", [])):
        failures.append("no log line saying the kernel path was chosen")
    pid = marker(lab, "KERNEL-BENCH-PID")
    expect("kernel: bench registrations, deregistrations",
           (value(kernel, "rdma_mr_registrations_total", pid=pid),
            value(kernel, "rdma_mr_deregistrations_total", pid=pid)), (2000.0, 2000.0))

    if not any("/opt/x/libibverbs.so.1" in line for line in lab.blocks.get("maps_copy", [])):
        failures.append(f"the program did not load the copy: {lab.blocks.get('maps_copy')}")
    copy = scrape(lab, "scrape_kernel_copy")
    pid = marker(lab, "KERNEL-COPY-PID")
    got = tuple(value(copy, name, pid=pid, comm="mr_kernel_load") for name in (
        "rdma_mr_registrations_total", "rdma_mr_deregistrations_total",
        "rdma_mr_registration_failures_total", "rdma_mr_outstanding_regions",
        "rdma_mr_outstanding_bytes"))
    expect("kernel: copy's registrations, deregistrations, failures, regions, bytes", got,
           (float(COPY_PAIRS + COPY_LEAKS), float(COPY_PAIRS), float(COPY_FAILURES),
            float(COPY_LEAKS), float(COPY_LEAKS * SIZE)))
    expect("kernel: LOCAL_WRITE seen (access flags from ib_umem_get)",
           value(copy, "rdma_mr_access_flag_seen", pid=pid, flag="LOCAL_WRITE"), 1.0)

    stacks = json.loads("\n".join(lab.blocks.get("stacks", [])) or '{"processes": []}')
    sites = stacks["processes"][0]["stacks"] if stacks["processes"] else []
    functions = [frame.get("function", "").split("+")[0]
                 for site in sites for frame in site.get("frames", [])]
    held = sum(site["outstanding_regions"] for site in sites)
    expect("kernel: regions in /debug/mr/stacks", held, COPY_LEAKS)
    if not sites or not sites[0].get("frames"):
        failures.append(f"kernel: no user stack for the leaked regions: {sites}")
    lab.notes.append("kernel path: leak stack frames: " + " < ".join(
        f for f in functions[:8] if f))

    after = scrape(lab, "scrape_kernel_after_exit")
    expect("kernel: copy's series after exit",
           len(harness.series(after, "rdma_mr_outstanding_regions", pid=pid)), 0)
    expect("kernel: released at exit (regions, bytes)",
           (value(after, "rdma_mr_exit_released_regions_total", comm="mr_kernel_load"),
            value(after, "rdma_mr_exit_released_bytes_total", comm="mr_kernel_load")),
           (float(COPY_LEAKS), float(COPY_LEAKS * SIZE)))

    # The stacks cleanup over the kernel path's maps (kcalls, kderegs as in-flight references):
    # once the program is gone, the walks after its exit delete its call sites' ids (at least
    # one per site /debug/mr/stacks reported above), and the last one leaves the stacks map
    # empty (every id present deleted, none referenced, none awaiting a confirming walk): no
    # id of that program is left (no other process registers after it).
    walks = [cleanup_fields(line) for line in lab.blocks.get("log_kernel_after_exit", [])
             if 'msg="mr stacks cleanup"' in line]
    if not walks:
        failures.append("kernel: no stacks cleanup walk after the program's exit")
    else:
        deleted = sum(walk.get("deleted", 0) for walk in walks)
        with_stack = sum(1 for site in sites if site.get("frames"))  # each its own id
        if not with_stack or deleted < with_stack:
            failures.append(f"kernel: stacks cleanup deleted {deleted} ids after the exit, "
                            f"want at least the program's {with_stack} call sites: {walks}")
        last = walks[-1]
        expect("kernel: last stacks cleanup walk (stacks, referenced, deleted, candidates)",
               tuple(last.get(k) for k in ("stacks", "referenced", "deleted", "candidates")),
               (last.get("stacks"), 0, last.get("stacks"), 0))
        lab.notes.append(f"kernel path: stacks cleanup walks after the exit: {walks}")

    none, up, kern, none2 = (pair_ns(lab, n) for n in (
        "bench_none", "bench_uprobes", "bench_kernel", "bench_none_again"))
    if None in (none, up, kern, none2):
        failures.append(f"bench figures missing: none {none}, uprobes {up}, kernel {kern}, "
                        f"none again {none2}")
    else:
        floor = min(none, none2)
        over_up, over_kern = up - floor, kern - floor
        ratio = f"{over_up / over_kern:.1f}x" if over_kern > 0 else "n/a (within the noise)"
        lab.notes.append(
            f"bench (guest, TCG, 2000 pairs of 64 KiB in batches of 100, fastest batch, one "
            f"run): reg+dereg pair untracked {none} ns (again at the end: {none2} ns), uprobes "
            f"{up} ns (+{over_up}), kernel path {kern} ns (+{over_kern}); overhead "
            f"uprobes/kernel: {ratio}")
    up_off, kern_off = (pair_ns(lab, f"bench_{n}_nostack") for n in ("uprobes", "kernel"))
    if None in (up_off, kern_off):
        failures.append(f"bench figures without stack copies missing: uprobes {up_off}, "
                        f"kernel {kern_off}")
    else:
        lab.notes.append(
            f"bench, user stack copies for DWARF unwinding (16 KiB, deduplicated per site) on "
            f"and off: uprobes {up} / {up_off} ns, kernel path {kern} / {kern_off} ns per pair")
    lab.notes.append("bench means over all pairs: " + ", ".join(
        f"{n} {pair_mean_ns(lab, 'bench_' + n)} ns"
        for n in ("none", "uprobes", "kernel", "uprobes_nostack", "kernel_nostack", "none_again")))
    lab.notes.append(
        "BPF programs per pair (fdinfo run_time_ns, run_cnt; programs only): uprobes "
        f"{bpf_stats(lab, 'bpf_stats_uprobes')}, kernel path {bpf_stats(lab, 'bpf_stats_kernel')}")
    return failures
