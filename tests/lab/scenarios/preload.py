"""Checks for preload.sh: on the guest's real libibverbs over rxe, a plugin loaded with
dlopen(RTLD_LOCAL) under the preload library runs (before issue #11's fix: SIGSEGV, the library
called the NULL that dlvsym(RTLD_NEXT) returned) and its queues are counted: 10 receives
posted to an RC QP in INIT, one empty poll."""

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
    return failures
