"""Checks for mr_dwarf.sh (issue 27): a program built without frame pointers has its leak
call site named on both MR paths (DWARF unwinding), and in the profile's outputs."""

import json

FUNCTIONS = ["leak_one_region", "main"]


def names(stack):
    return [frame["function"].split("+")[0] for frame in stack["frames"]]


def check(lab):
    failures = []
    for path in ("kernel", "uprobes"):
        lines = lab.blocks.get(f"stacks_{path}", [])
        try:
            body = json.loads("\n".join(lines))
        except ValueError:
            failures.append(f"{path}: /debug/mr/stacks is not JSON: {lines[:3]}")
            continue
        stacks = body["processes"][0]["stacks"] if body.get("processes") else []
        if len(stacks) != 1:
            failures.append(f"{path}: {len(stacks)} call sites, want 1: {stacks}")
            continue
        site = stacks[0]
        got = names(site)
        lab.notes.append(f"{path}: {site['unwind']} frames {got}")
        if site["outstanding_regions"] != 6 or site["outstanding_bytes"] != 6 * 65536:
            failures.append(f"{path}: site holds {site['outstanding_regions']} regions, "
                            f"{site['outstanding_bytes']} bytes, want 6, {6 * 65536}")
        if site["unwind"] != "dwarf":
            failures.append(f"{path}: unwound with {site['unwind']!r}, want 'dwarf'")
        if [n for n in got if n in FUNCTIONS] != FUNCTIONS:
            failures.append(f"{path}: frames {got} do not name {FUNCTIONS} in order")
        figures = {line.split()[0]: line.split()[1] for line in lab.blocks.get(f"figures_{path}", [])
                   if " " in line}
        lab.notes.append(f"{path}: " + ", ".join(f"{k}={v}" for k, v in figures.items()
                                                 if "stack" in k))
        want_kernel = "1" if path == "kernel" else "0"
        attached = figures.get('rdmascope_probe_attached{probe="mr_kernel"}')
        if attached != want_kernel:
            failures.append(f"{path}: mr_kernel attached = {attached}")
    # Frames reached and named: DWARF against frame pointers alone (before issue 27).
    for block, what in (("stacks_kernel", "kernel path, -O2 no frame pointers, DWARF"),
                        ("stacks_kernel_fp_only", "kernel path, same program, frame pointers only"),
                        ("stacks_kernel_fp_program", "kernel path, mr_leaker (frame pointers), DWARF"),
                        ("stacks_uprobes", "uprobes, -O2 no frame pointers, DWARF")):
        try:
            body = json.loads("\n".join(lab.blocks.get(block, [])))
            site = max(body["processes"][0]["stacks"], key=lambda st: st["outstanding_regions"])
        except (ValueError, KeyError, IndexError):
            failures.append(f"{block}: no stacks")
            continue
        frames = names(site)
        named = sum(1 for frame in site["frames"] if not frame["function"].startswith(
            (frame["module"] + "+", "??")))
        lab.notes.append(f"{what}: {len(frames)} frames, {named} named, unwind "
                         f"{site['unwind']!r}: {frames}")
        if block == "stacks_kernel_fp_only" and "main" in frames:
            failures.append(f"frame pointers alone reached main through Debian's libibverbs: "
                            f"{frames} (the DWARF comparison proves nothing)")
    exit_line = next((line for line in lab.console if line.startswith("@@@EXIT-PROFILE ")), "")
    if exit_line.split()[1:] != ["0"]:
        failures.append(f"profile exit: {exit_line!r}")
    folded = lab.blocks.get("profile_folded", [])
    if not any("leak_one_region" in line and "main" in line for line in folded):
        failures.append(f"folded stacks do not name leak_one_region under main: {folded[:4]}")
    # The pprof's string table (protobuf: each string followed by the next field's tag).
    pprof = "\n".join(lab.blocks.get("profile_pprof", []))
    for function in FUNCTIONS:
        if function not in pprof:
            failures.append(f"pprof does not name {function}")
    summary = "\n".join(lab.blocks.get("profile_summary", []))
    if "from leak_one_region" not in summary:
        failures.append("the profile's summary does not name leak_one_region")
    lab.notes.append("profile: " + next((line.strip() for line in lab.blocks.get("profile_log", [])
                                         if "tracking" in line), "tracking not logged"))
    lab.notes.append(f"profile folded: {folded[:2]}")
    return failures
