"""Checks for mr_start_churn.sh (issue 27): every exporter start during registration churn
counts exactly what the program then holds, on each path, and the guest kernel logged no
soft lockup, hung task, RCU stall, BUG or WARNING while the probes attached and detached."""

import re

HOLD = 25
SIZE = 8192
# What the kernel prints when a CPU or task is stuck, or something went wrong inside it
# (kernel/watchdog.c, kernel/hung_task.c, kernel/rcu/tree_stall.h, lib/bug.c, lockdep).
KERNEL_TROUBLE = re.compile(
    r"soft lockup|hard LOCKUP|blocked for more than|rcu.*(stall|self-detected)|"
    r"BUG:|WARNING:|Oops|general protection|possible circular locking|"
    r"inconsistent lock state|bad unlock balance")


def iterations(lab):
    out = []
    for line in lab.console:
        if line.startswith("@@@ITER "):
            out.append(dict(word.split("=", 1) for word in line.split()[1:]))
    return out


def check(lab):
    failures = []
    starts = next((int(line.split()[1]) for line in lab.console
                   if line.startswith("@@@STARTS ")), 0)
    runs = iterations(lab)
    paths = sorted({run["path"] for run in runs})
    if not runs:
        return ["no start was reported"]
    for path in paths:
        done = [run for run in runs if run["path"] == path]
        if len(done) != starts:
            failures.append(f"{path}: {len(done)} starts reported, want {starts}")
        for run in done:
            where = f"{path} start {run['i']} (pid {run['pid']})"
            if run["restrack"] != str(HOLD):
                failures.append(f"{where}: restrack lists {run['restrack']} regions, want {HOLD}"
                                " (the program did not hold what it should)")
            if run["regions"] != f"{HOLD}" or run["bytes"] != f"{HOLD * SIZE}":
                failures.append(f"{where}: outstanding {run['regions']} regions, "
                                f"{run['bytes']} bytes, want {HOLD}, {HOLD * SIZE} "
                                f"(registrations {run['registrations']}, "
                                f"deregistrations {run['deregistrations']})")
            want_kernel = "1" if path == "kernel" else "0"
            if run["kernel_path"] != want_kernel:
                failures.append(f"{where}: mr_kernel probe attached = {run['kernel_path']}")
        seconds = [int(run["start_s"]) for run in done]
        regs = [run["registrations"] for run in done]
        lab.notes.append(f"{path}: {len(done)} starts during churn, start took "
                         f"{min(seconds)}-{max(seconds)} s; registrations counted after the "
                         f"attach: {', '.join(regs)}")
    trouble = [line for line in lab.blocks.get("kernel_log", []) if KERNEL_TROUBLE.search(line)]
    if "kernel_log" not in lab.blocks:
        failures.append("no kernel log block")
    for line in trouble[:20]:
        failures.append(f"guest kernel: {line}")
    lab.notes.append(f"guest kernel log after the starts: {len(lab.blocks.get('kernel_log', []))}"
                     f" lines, {len(trouble)} about lockups, stalls, BUGs or WARNINGs")
    return failures
