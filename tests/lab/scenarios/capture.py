"""Checks for capture.sh (issue 39, "Fidelity"): every series of `serve --replay`'s n-th scrape
equals the exposition the collectors made live from the capture's n-th sample, and the last
sample repeats; the capture saw the workload (its QP, CQ and MR; counters that moved between
the samples), so the equality is not that of an idle host.

Series the comparison leaves out, each for its reason:
  process_*                              the exporter's own process (CPU, memory, fds, start)
  rdmascope_collector_duration_seconds   how long this process took, not what the host said
  rdmascope_scrape_*, rdmascope_http_*   the HTTP server's own counters and timings (capture
  exposer_*                              has no server)
  rdmascope_build_info                   the same binary on both sides: equal anyway, not data
"""

import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "e2e"))
import harness  # noqa: E402

IGNORED = re.compile(r"^(process_|rdmascope_collector_duration_seconds|rdmascope_scrape_|"
                     r"rdmascope_http_|exposer_|rdmascope_build_info)")


def compared(lab, block):
    return {key: value for key, value in harness.parse("\n".join(lab.blocks.get(block, []))).items()
            if not IGNORED.match(key[0])}


def exit_code(lab, block):
    lines = [line for line in lab.blocks.get(block, []) if line.startswith("@@@EXIT ")]
    return lines[-1].split()[1] if lines else None


def differences(live, replay, limit=10):
    out = [f"{key}: live {live.get(key)}, replay {replay.get(key)}"
           for key in sorted(set(live) | set(replay), key=str) if live.get(key) != replay.get(key)]
    return out[:limit] + ([f"... {len(out) - limit} more"] if len(out) > limit else [])


def json_block(lab, block):
    text = "\n".join(lab.blocks.get(block, []))
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None


def doctor_failures(lab):
    """doctor --replay finds what doctor found live over the same samples; two captures make a
    fleet report naming both hosts."""
    live, replay = json_block(lab, "doctor_live"), json_block(lab, "doctor_replay")
    if live is None or replay is None:
        return [f"doctor: no JSON report (live {live is not None}, replay {replay is not None}): "
                f"{lab.blocks.get('doctor_replay_log', [])[-5:]}"]
    failures = []
    if live["findings"] != replay["findings"]:
        diff = [(a, b) for a, b in zip(live["findings"], replay["findings"]) if a != b]
        failures.append(f"doctor --replay differs from doctor live: {len(live['findings'])} vs "
                        f"{len(replay['findings'])} findings, first differences {diff[:2]}")
    judged = [f for f in live["findings"] if f["severity"] != "skip"]
    on_rxe = [f for f in judged if f.get("scope", {}).get("device") == "rxe0"]
    if not on_rxe:
        failures.append(f"doctor judged nothing on rxe0: {[f['id'] for f in judged]}")
    lab.notes.append(f"doctor: {len(live['findings'])} findings live and replayed, "
                     f"{len(judged)} judged, {len(on_rxe)} on rxe0, window "
                     f"{replay.get('window_seconds')} s")
    fleet = json_block(lab, "doctor_fleet")
    if fleet is None or fleet.get("instances") != 2:
        failures.append(f"doctor over two captures: {fleet and fleet.get('instances')} hosts")
    else:
        hosts = {f.get("scope", {}).get("instance") for f in fleet["findings"]}
        if not {"peer"} <= hosts or len(hosts - {"*", "peer"}) != 1:
            failures.append(f"the fleet report's hosts: {hosts}")
    return failures


def check(lab):
    failures = []
    if exit_code(lab, "capture") != "0":
        return [f"capture failed: {lab.blocks.get('capture')}"]
    live = [compared(lab, "live_1"), compared(lab, "live_2")]
    replay = [compared(lab, "replay_1"), compared(lab, "replay_2"), compared(lab, "replay_3")]
    for n, (want, got) in enumerate(zip(live + [live[1]], replay), start=1):
        if not want:
            failures.append(f"sample {min(n, 2)}: no live exposition in the capture")
        elif want != got:
            failures.append(f"scrape {n} of the replay differs from sample {min(n, 2)}:\n  " +
                            "\n  ".join(differences(want, got)))
    # The workload was there, and moving.
    resources = {dict(k[1]).get("resource"): v for k, v in live[0].items()
                 if k[0] == "rdma_resources" and dict(k[1]).get("device") == "rxe0"}
    for kind in ("qp", "cq", "mr"):
        if not resources.get(kind):
            failures.append(f"the capture saw no {kind} on rxe0: {resources}")
    # The preload library's stats file (the waiting ibv_rc_pingpong server's CQ) was recorded
    # in both samples: the equality above covers the occupancy collector's series too.
    for n, sample in enumerate(live, start=1):
        occupancy = [k for k in sample if k[0] == "rdma_cq_outstanding_entries" and
                     dict(k[1]).get("comm") == "ibv_rc_pingpong"]
        if not occupancy:
            failures.append(f"sample {n}: no occupancy series of ibv_rc_pingpong")
    # The MR probes on the kernel path, and the workload's regions (registered before the
    # capture started: seeded from restrack) in the series the replay had to give back.
    if harness.value(live[0], "rdmascope_probe_attached", probe="mr_kernel") != 1.0:
        failures.append("the capture's MR probes are not on the kernel path")
    outstanding = sum(v for k, v in live[0].items() if k[0] == "rdma_mr_outstanding_regions")
    mr_series = sum(1 for k in live[0] if k[0].startswith("rdma_mr_"))
    if outstanding < 1:
        failures.append(f"the capture counted no outstanding MR ({mr_series} rdma_mr_* series)")
    lab.notes.append(f"{mr_series} rdma_mr_* series per sample, {outstanding:.0f} regions")
    moved = [k for k in live[0] if k[0].endswith("_total") and live[0][k] != live[1].get(k)]
    if not any(k[0] == "rdma_port_data_bytes_total" or "hw_counter" in k[0] for k in moved):
        failures.append(f"no RDMA counter moved between the samples: {moved[:5]}")
    lab.notes.append(f"{len(live[0])} series compared per sample, {len(moved)} counters moved")
    if exit_code(lab, "check") != "0":
        failures.append(f"check --replay: {lab.blocks.get('check')}")

    failures += doctor_failures(lab)

    # --redact: none of rxe0's identifiers in any file, and the capture replays.
    if exit_code(lab, "redact") != "0":
        failures.append(f"capture --redact failed: {lab.blocks.get('redact')}")
    identifiers = [line for line in lab.blocks.get("identifiers", []) if line.strip()]
    if not identifiers:
        failures.append("no node GUID or GID read from rxe0")
    hits = [line for line in lab.blocks.get("redacted_hits", []) if line.strip()]
    if hits:
        failures.append(f"identifiers left in the redacted capture: {hits}")
    if not [line for line in lab.blocks.get("unredacted_hits", []) if line.strip()]:
        failures.append("the search finds no identifier in the capture made without --redact")
    redacted = compared(lab, "replay_redacted")
    states = [k for k in redacted if k[0] == "rdma_port_state" and dict(k[1]).get("device") == "rxe0"]
    if not states:
        failures.append("the redacted capture does not replay rxe0's port")
    joined = "\n".join(lab.blocks.get("replay_redacted", []))
    leaked = [i for i in identifiers if i in joined]
    if leaked:
        failures.append(f"the redacted replay exports {leaked}")
    lab.notes.append(f"redacted: {len(identifiers)} identifiers checked, {len(redacted)} series")
    return failures
