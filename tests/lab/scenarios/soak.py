"""Checks for soak.sh: the soak on rxe0 with the kernel MR path (fentry/fexit on uverbs/ib_core).

Asserted: every scrape answered, every collector successful, the kernel path attached; no
counter (of the printed rdma_mr_* series) ever decreases between rounds (a series with a pid
label absent from the previous round starts afresh); the exact registration counts of the
soak's comms (histogram _count), regions and bytes released at exit, and the churn process's
registrations, deregistrations, rejected registrations and outstanding regions/bytes (0) once
it is done; no lost events; after the end no series of a soak process nor of a deleted veth;
every veth seen while it lived; the exporter's regions/procs/kcalls/kderegs/owners maps back to
their entry counts after the warm-up and its stacks map to at most the warm-up's + 2 (when
bpftool is in the guest). Reported as notes: RSS per round, scrape count, registration cost."""

import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "e2e"))
import harness  # noqa: E402

COMMS = ("soak_churn", "soak_short")
# sum of 4096 * (1 + i) for the LEAK = 5 regions a leaking short process keeps (soak_mr.c)
LEAKED_BYTES_PER_PROCESS = 4096 * (1 + 2 + 3 + 4 + 5)
RETURNING_MAPS = ("regions", "procs", "kcalls", "kderegs", "owners")
STACKS_SLACK = 2
MONOTONIC = ("rdma_mr_registrations_total", "rdma_mr_deregistrations_total",
             "rdma_mr_registration_failures_total", "rdma_mr_exit_released_regions_total",
             "rdma_mr_exit_released_bytes_total", "rdma_mr_registration_size_bytes_count",
             "rdma_mr_lost_total")
VETH = re.compile(r"^(sk|veth)\d+$")

value = harness.value


def fmt(x):
    return "?" if x is None else f"{x:g}"


def plan(lab):
    for line in lab.console:
        if line.startswith("@@@SOAK-PLAN "):
            return {k: int(v) for k, v in (w.split("=") for w in line.split()[1:])}
    return None


def marker(lab, name):
    for line in lab.console:
        if line.startswith(f"@@@{name} "):
            return line.split()[1]
    return None


def block(lab, name):
    return harness.parse("\n".join(lab.blocks.get(name, [])))


def result(lab, name):
    """(registrations, failures, ns per registration) of the phase's churn, or None."""
    for line in lab.blocks.get(f"result-{name}", []):
        if line.startswith("DONE ") and len(line.split()) == 4:
            return tuple(int(float(x)) for x in line.split()[1:])
    return None


def check(lab):
    failures = []

    def expect(what, got, want):
        if got != want:
            failures.append(f"{what}: got {got!r}, want {want!r}")

    p = plan(lab)
    if p is None:
        return ["no @@@SOAK-PLAN line on the console"]
    rounds = [(name, block(lab, name)) for name in lab.blocks if name.startswith("round-")]
    if len(rounds) < 10:
        failures.append(f"only {len(rounds)} rounds scraped: vacuous")

    # Every round: scraped, collectors successful, kernel path attached, counters monotonic.
    previous, last = set(), {}
    veths_seen = set()
    rss = []
    for name, samples in rounds:
        if value(samples, "scrape_ok") != 1.0:
            failures.append(f"{name}: the scrape failed")
            continue
        for labels, ok in harness.series(samples, "rdmascope_collector_success").items():
            if ok != 1.0:
                failures.append(f"{name}: collector {dict(labels)} failed")
        expect(f"{name}: rdmascope_probe_attached{{probe=mr_kernel}}",
               value(samples, "rdmascope_probe_attached", probe="mr_kernel"), 1.0)
        for key, val in samples.items():
            metric, labels = key
            if metric == "soak_veth_seen":
                veths_seen.add(dict(labels)["device"])
            if metric not in MONOTONIC:
                continue
            fresh = key not in previous and any(k == "pid" for k, _ in labels)
            before = last.get(key)
            if before is not None and not fresh and val < before:
                failures.append(f"{name}: counter decreased: {metric}{dict(labels)} "
                                f"{before} -> {val}")
            last[key] = val
        previous = set(samples)
        kib = value(samples, "soak_rss_kib")
        if kib is not None and kib == kib:  # NaN: the exporter's status was unreadable
            rss.append(int(kib))

    # The churn process once done (all regions deregistered, still alive).
    hold = block(lab, "round-hold")
    pid = marker(lab, "SOAK-CHURN-PID")
    churn = tuple(value(hold, metric, pid=pid, comm="soak_churn") for metric in (
        "rdma_mr_registrations_total", "rdma_mr_deregistrations_total",
        "rdma_mr_registration_failures_total", "rdma_mr_outstanding_regions",
        "rdma_mr_outstanding_bytes"))
    expect("churn process done: registrations, deregistrations, rejected, regions, bytes",
           churn, (float(p["churn"]), float(p["churn"]), float(p["churn"] // 1024), 0.0, 0.0))

    final = block(lab, "round-final")
    procs = p["warm_procs"] + p["procs"]
    expect("registrations of soak_churn (histogram count)",
           value(final, "rdma_mr_registration_size_bytes_count", comm="soak_churn"),
           float(p["warm_churn"] + p["churn"]))
    expect("registrations of soak_short (histogram count)",
           value(final, "rdma_mr_registration_size_bytes_count", comm="soak_short"),
           float(procs * p["regions"]))
    expect("released at exit, soak_short (regions, bytes)",
           (value(final, "rdma_mr_exit_released_regions_total", comm="soak_short"),
            value(final, "rdma_mr_exit_released_bytes_total", comm="soak_short")),
           (float(procs // 2 * p["leak"]), float(procs // 2 * LEAKED_BYTES_PER_PROCESS)))
    expect("released at exit, soak_churn (deregisters all)",
           value(final, "rdma_mr_exit_released_regions_total", comm="soak_churn") or 0.0, 0.0)
    expect("lost events", sum(harness.series(final, "rdma_mr_lost_total").values()), 0.0)
    leftover = sorted(f"{metric}{dict(labels)}" for metric, labels in final
                      if metric.startswith("rdma_mr_") and any(k == "pid" for k, _ in labels)
                      and dict(labels).get("comm") in COMMS)
    expect("series of exited soak processes after the end", leftover, [])
    expect("veths left after the end",
           sorted(dict(labels)["device"] for labels in harness.series(final, "soak_veth_seen")),
           [])
    # Each batch lives for two rounds of the scraper: every one is scraped while it lives.
    sk_seen = {v for v in veths_seen if v.startswith("sk")}
    expect("veths seen while they lived", len(sk_seen), p["veths"] + p["warm_veths"])

    ends = [name for name in lab.blocks if name.startswith("maps-end-")]
    warm, end = block(lab, "maps_warm"), block(lab, ends[-1] if ends else "maps-end")
    maps_note = "bpftool not in the guest: BPF map entries not checked"
    if value(warm, "soak_bpftool_missing") is None:
        for name in RETURNING_MAPS:
            expect(f"BPF map {name} entries back to the warm-up's",
                   value(end, "soak_map_entries", map=name),
                   value(warm, "soak_map_entries", map=name) if
                   value(warm, "soak_map_entries", map=name) is not None else "a count")
        stacks_warm = value(warm, "soak_map_entries", map="stacks")
        stacks_end = value(end, "soak_map_entries", map="stacks")
        if stacks_warm is None or stacks_end is None or \
                stacks_end > stacks_warm + STACKS_SLACK:
            failures.append(f"BPF map stacks: {stacks_end} entries at the end, warm-up "
                            f"{stacks_warm} (+{STACKS_SLACK} allowed)")
        maps_note = "BPF map entries: " + ", ".join(
            f"{name} {fmt(value(block(lab, 'maps_start'), 'soak_map_entries', map=name))}/"
            f"{fmt(value(warm, 'soak_map_entries', map=name))}/"
            f"{fmt(value(end, 'soak_map_entries', map=name))}"
            for name in RETURNING_MAPS + ("stacks",)) + " (start/warm-up/end)"

    done = result(lab, "soak")
    seconds = next((ln.split()[1] for ln in lab.blocks.get("result-soak", [])
                    if ln.startswith("seconds ")), "?")
    lab.notes.append(
        f"soak (guest, TCG, scale {p['scale']}): {p['churn']} registrations in a ring of "
        f"{p['ring']} + {procs} short processes x {p['regions']} regions (half leave "
        f"{p['leak']}) + {p['veths'] + p['warm_veths']} veths, {seconds} s; registration + ring "
        f"deregistration on rxe0 under the kernel path: "
        f"{fmt(done[2] / 1000 if done else None)} us")
    rss_warm = value(block(lab, "round-warm-end"), "soak_rss_kib")
    lab.notes.append(
        f"rounds {len(rounds)}, veths seen {len(sk_seen)}; RSS KiB warm-up {fmt(rss_warm)}, max "
        f"{max(rss) if rss else '?'}, end {rss[-1] if rss else '?'}; every round: "
        + " ".join(str(k) for k in rss[::max(1, len(rss) // 30)]))
    lab.notes.append(maps_note)
    return failures
