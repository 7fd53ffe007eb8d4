"""Checks for profile.sh: `rdmascope profile` on soft-RoCE names a leaking function and the
regions left at exit, measures ibv_rc_pingpong's 2048-byte messages and completion latency,
and sees an attached ib_write_bw's traffic (issue #14)."""

import json

LEAK_REGIONS, LEAK_SIZE = 8, 16384


def exit_code(lab, name):
    for line in lab.console:
        if line.startswith(f"@@@EXIT-{name} "):
            return line.split()[1]
    return None


def report(lab, block):
    try:
        return json.loads("\n".join(lab.blocks.get(block, [])))
    except json.JSONDecodeError:
        return None


def check(lab):
    failures = []

    def expect(what, got, want):
        if got != want:
            failures.append(f"{what}: got {got!r}, want {want!r}")

    # (a) The leaker, killed: its regions are left at exit, from leak_one_region.
    expect("(a) rdmascope exit", exit_code(lab, "LEAK"), "0")
    leak = report(lab, "leak_json")
    if leak is None:
        return failures + [f"(a) no profile.json: {lab.blocks.get('leak_log')}"]
    expect("(a) end_reason", leak["end_reason"], "exited")
    expect("(a) exit_status (SIGTERM)", leak["exit_status"], 128 + 15)
    expect("(a) outstanding regions at exit", leak["mr"]["outstanding_regions"], LEAK_REGIONS)
    expect("(a) released at exit", leak["mr"]["released_at_exit_bytes"], LEAK_REGIONS * LEAK_SIZE)
    named = [s for s in leak["stacks"]
             if any(f["function"] == "leak_one_region" for f in s["frames"])]
    expect("(a) a stack names leak_one_region", len(named), 1)
    if named:
        expect("(a) its regions", named[0]["outstanding_regions"], LEAK_REGIONS)
    folded = "\n".join(lab.blocks.get("leak_folded", []))
    expect("(a) the flame graph input names it", "leak_one_region" in folded, True)
    # The pprof's string table (librdmascope_pprof.so, loaded at run time) names it too.
    pprof_strings = "\n".join(lab.blocks.get("leak_pprof", []))
    expect("(a) the pprof names it", "leak_one_region" in pprof_strings, True)

    # (b) pingpong: 2048-byte messages, completion latency (the preload library's metrics).
    expect("(b) rdmascope exit", exit_code(lab, "PP"), "0")
    pp = report(lab, "pp_json")
    if pp is None:
        failures.append(f"(b) no profile.json: {lab.blocks.get('pp_log')}")
    else:
        expect("(b) end_reason", pp["end_reason"], "exited")
        expect("(b) exit_status", pp["exit_status"], 0)
        expect("(b) preload active", pp["preload_active"], True)
        send = (pp.get("messages") or {}).get("send_bytes")
        if not send:
            failures.append(f"(b) message sizes not measured: notes {pp['notes']}")
        else:
            expect("(b) messages of 2048 bytes", send["sum"], 2048 * send["count"])
            expect("(b) messages sent", send["count"] >= 1000, True)
            latency = pp["messages"].get("completion_latency_ns")
            expect("(b) completion latency measured", bool(latency and latency["sum"] > 0), True)

    # (c) ib_write_bw attached with --pid: its traffic and its pre-attach registrations.
    expect("(c) rdmascope exit", exit_code(lab, "BW"), "0")
    bw = report(lab, "bw_json")
    if bw is None:
        failures.append(f"(c) no profile.json: {lab.blocks.get('bw_log')}")
    else:
        expect("(c) command empty", bw["command"], [])
        received = [c for c in bw["counters"] if c["device"] == "rxe0"
                    and "rcvd_pkts" in c["counter"]]
        expect("(c) rxe0 received packets over the window",
               bool(received and received[0]["delta"] >= 2000), True)
        # perftest registers its buffers once connected: after the attach, seen by the probes.
        expect("(c) its registrations seen", (bw["mr"]["registrations"] or 0) >= 1, True)
    return failures
