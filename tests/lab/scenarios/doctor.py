"""Checks for doctor.sh: the report a person gets on a real soft-RoCE host, with and without
a running exporter, and after the MTU is fixed (issue #13's lab tests)."""

import json

NO_EXPORTER = "no exporter running: history needs rdmascope serve (use --exporter)"
HISTORY_CHECKS = ("memory.mr_leak", "memory.pinned_growth")


def report(lab, block):
    lines = lab.blocks.get(block, [])
    body = "\n".join(line for line in lines if not line.startswith("@@@EXIT"))
    exits = [line.split()[1] for line in lines if line.startswith("@@@EXIT")]
    try:
        return json.loads(body), exits[0] if exits else None
    except json.JSONDecodeError:
        return None, exits[0] if exits else None


def by_id(doc, check_id):
    return [f for f in doc["findings"] if f["id"] == check_id]


def mtu_failures(doc, where):
    failures = []
    netdev = [f for f in by_id(doc, "roce.netdev_mtu") if f["scope"].get("netdev") == "eth0"]
    if not (netdev and netdev[0]["severity"] == "warn" and netdev[0]["observed"] == "netdev MTU 1500"):
        failures.append(f"{where}: roce.netdev_mtu warn 'netdev MTU 1500' on eth0: {netdev}")
    active = [f for f in by_id(doc, "links.active_mtu") if f["scope"].get("device") == "rxe0"]
    if not (active and active[0]["severity"] == "warn"
            and active[0]["observed"].startswith("active MTU 1024,")):
        failures.append(f"{where}: links.active_mtu warn 'active MTU 1024' on rxe0: {active}")
    return failures


def for_pid(doc, check_id, pid):
    return [f for f in by_id(doc, check_id) if f["scope"].get("pid") == pid]


def check(lab):
    failures = []
    cq_pid = next(line.split()[1] for line in lab.console if line.startswith("@@@CQ-PID "))
    leaker_pid = next(line.split()[1] for line in lab.console if line.startswith("@@@LEAKER-PID "))

    # (a) Under the exporter.
    doc, code = report(lab, "doctor_exporter")
    if doc is None:
        return [f"(a) no JSON report: {lab.blocks.get('doctor_exporter')}"]
    log = "\n".join(lab.blocks.get("doctor_exporter_log", []))
    if "report of the running exporter" not in log:
        failures.append(f"(a) doctor did not use the exporter:\n{log}")
    cq = for_pid(doc, "queues.cq_capacity", cq_pid)
    if not (cq and cq[0]["severity"] in ("warn", "crit") and "fed by 128 WRs" in cq[0]["observed"]):
        failures.append(f"(a) the undersized CQ of pid {cq_pid} is not named: {cq}")
    leak = for_pid(doc, "memory.mr_leak", leaker_pid)
    if not (leak and leak[0]["severity"] == "warn" and leak[0]["scope"].get("comm") == "mr_leaker"):
        failures.append(f"(a) the leaking pid {leaker_pid} is not named: {leak}")
    # The QP's actual send depth reached doctor through the verbs probes (cq_undersized
    # creates one RC QP with max_send_wr 64, so the process's summed depth is 64 too; rxe's
    # port rate comes from eth0's speed).
    depth = for_pid(doc, "queues.qp_depth", cq_pid)
    if not (depth and depth[0]["severity"] in ("ok", "warn")
            and depth[0]["observed"].startswith(
                "64 send WRs across the RC QPs, smallest send queue 64 WRs")):
        failures.append(f"(a) queues.qp_depth of pid {cq_pid}: want its 64 send WRs, got {depth}")
    failures += mtu_failures(doc, "(a)")
    if code != "2":
        failures.append(f"(a) exit code {code}, want 2 (a crit CQ)")
    lab.notes.append(f"(a) {doc['summary']}; leak: {leak[0]['observed'] if leak else None}")

    # (b) Without an exporter.
    doc, code = report(lab, "doctor_local")
    if doc is None:
        return failures + [f"(b) no JSON report: {lab.blocks.get('doctor_local')}"]
    log = "\n".join(lab.blocks.get("doctor_local_log", []))
    if "no exporter running at http://127.0.0.1:9879" not in log:
        failures.append(f"(b) doctor did not say it found no exporter:\n{log}")
    failures += mtu_failures(doc, "(b)")
    for check_id in HISTORY_CHECKS:
        found = by_id(doc, check_id)
        if not found or any(f["severity"] != "skip" or f["observed"] != NO_EXPORTER for f in found):
            failures.append(f"(b) {check_id} not skipped with the reason: {found}")
    lab.notes.append(f"(b) {doc['summary']}")

    # (c) MTU 4200 before the rxe link.
    doc, code = report(lab, "doctor_healthy")
    if doc is None:
        return failures + [f"(c) no JSON report: {lab.blocks.get('doctor_healthy')}"]
    for check_id in ("roce.netdev_mtu", "links.active_mtu"):
        found = [f for f in by_id(doc, check_id) if f["scope"].get("device") == "rxe0"
                 or f["scope"].get("netdev") == "eth0"]
        if not found or any(f["severity"] != "ok" for f in found):
            failures.append(f"(c) {check_id}: want ok on rxe0/eth0, got {found} "
                            f"(guest: {lab.blocks.get('healthy_mtu')})")
    lab.notes.append(f"(c) {doc['summary']}")
    return failures
