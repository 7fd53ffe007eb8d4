"""Checks for preload.sh: on the guest's real libibverbs over rxe, a plugin loaded with
dlopen(RTLD_LOCAL) under the preload library runs (before issue #11's fix: SIGSEGV, the library
called the NULL that dlvsym(RTLD_NEXT) returned) and its queues are counted: 10 receives
posted to an RC QP in INIT, one empty poll.
Then ibv_rc_pingpong -s 2048, server and client under the preload library (issue #14): each
reports its messages in the (1024, 2048] bucket in both directions (all of them: pingpong
posts nothing else) and a non-zero completion latency count and sum (1 in 16 signalled sends
timed)."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "e2e"))
import harness  # noqa: E402


def check(lab):
    failures = []

    def expect(what, got, want):
        if got != want:
            failures.append(f"{what}: got {got!r}, want {want!r}")

    out = lab.blocks.get("plugin", [])
    result = next((line.split() for line in out if line.startswith("RESULT")), None)
    expect("plugin_run through the preload library", result, ["RESULT", "10"])
    ready = next((line.split() for line in out if line.startswith("READY")), None)
    if not ready:
        failures.append(f"plugin host did not run: {out}")
        return failures
    pid = ready[1]
    samples = harness.parse("\n".join(lab.blocks["scrape"]))
    expect("outstanding: the 10 receives",
           harness.value(samples, "rdma_cq_outstanding_entries", pid=pid), 10.0)
    expect("polls", harness.value(samples, "rdma_cq_polls_total", pid=pid), 1.0)
    expect("empty polls", harness.value(samples, "rdma_cq_empty_polls_total", pid=pid), 1.0)
    lab.notes.append(f"guest: plugin under the preload library, stats files "
                     f"{[line for line in lab.blocks.get('stats_files', []) if line.strip()]}")
    check_pingpong(lab, failures)
    return failures


def pid_of(lab, marker):
    return next((line.split()[1] for line in lab.console
                 if line.startswith(marker + " ") and len(line.split()) > 1), None)


def bucket(samples, pid, direction, le):
    """The cumulative count of the size histogram's bucket whose bound is `le` bytes."""
    found = [v for k, v in harness.series(samples, "rdma_process_message_size_bytes_bucket",
                                          pid=pid, direction=direction).items()
             if float(dict(k)["le"]) == le]
    return found[0] if len(found) == 1 else None


def check_pingpong(lab, failures):
    samples = harness.parse("\n".join(lab.blocks.get("scrape_pingpong", [])))
    for role, marker in [("server", "@@@PINGPONG-PID"), ("client", "@@@PINGPONG-CLIENT-PID")]:
        pid = pid_of(lab, marker)
        if not pid:
            failures.append(f"pingpong {role}: no pid")
            continue
        for direction in ["send", "recv"]:
            wrs = harness.value(samples, "rdma_process_posted_work_requests_total", pid=pid,
                                direction=direction)
            in_2048 = bucket(samples, pid, direction, 2048.0)
            below = bucket(samples, pid, direction, 1024.0)
            size = harness.value(samples, "rdma_process_posted_bytes_total", pid=pid,
                                 direction=direction)
            if not wrs or in_2048 != wrs or below != 0.0 or size != 2048.0 * wrs:
                failures.append(f"pingpong {role} {direction}: {wrs} work requests, {size} "
                                f"bytes, {below} up to 1024 B, {in_2048} up to 2048 B: want "
                                "all of 2048 bytes")
        count = harness.value(samples, "rdma_process_completion_latency_seconds_count", pid=pid)
        total = harness.value(samples, "rdma_process_completion_latency_seconds_sum", pid=pid)
        if not count or not total or total <= 0:
            failures.append(f"pingpong {role}: completion latency count {count}, sum {total}")
        else:
            lab.notes.append(f"guest: ibv_rc_pingpong -s 2048 {role} under the preload library: "
                             f"{count:.0f} sends timed, mean {total / count * 1e6:.1f} us")
