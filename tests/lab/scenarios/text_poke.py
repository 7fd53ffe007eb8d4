"""Checks for text_poke.sh: reports whether live code patching alone (the function tracer,
no BPF, no rdmascope) locks the churning program up in this emulated guest."""

import re

TROUBLE = re.compile(r"soft lockup|rcu.*(stall|self-detected)|blocked for more than")


def check(lab):
    toggles = next((line.split()[1] for line in lab.console if line.startswith("@@@TOGGLES ")),
                   "?")
    held = any(line.startswith("@@@CHURNER held") for line in lab.console)
    log = lab.blocks.get("kernel_log", [])
    trouble = [line for line in log if TROUBLE.search(line)]
    rips = sorted({line.split("RIP: 0010:")[1].strip() for line in log if "RIP: 0010:" in line})
    lab.notes.append(f"{toggles} function tracer on/off switches on ib_dereg_mr_user and "
                     f"ib_uverbs_reg_mr during churn, no BPF: churner finished: {held}; "
                     f"{len(trouble)} lockup/stall lines; stuck at {rips}")
    return []
