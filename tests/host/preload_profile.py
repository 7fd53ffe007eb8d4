#!/usr/bin/env python3
"""Host tier: the preload library's profile counters (issue #14 item 2) as the exporter serves
them, per process, on the libibverbs stand-in. tests/host/fakeverbs/preload_profile.c posts
known sizes on 2 threads (its header derives the figures); checked:
- rdma_process_posted_work_requests_total, rdma_process_posted_bytes_total and the
  rdma_process_message_size_bytes buckets of each direction, exactly (a failed work request of
  a chain not counted, SRQ receives counted as recv);
- rdma_process_completion_latency_seconds: count > 0 and sum > 0 with the default sampling;
  with RDMASCOPE_PRELOAD_SAMPLE=1 every signalled send polled is timed (count 101); with
  RDMASCOPE_PRELOAD_SAMPLE=0 none; a bad value keeps the default, with one line on stderr;
- 70 more threads than the stats file's 64 per-thread shards: still exact;
- a forked child and an exec'd child count into files of their own: their figures only, the
  parent's unchanged;
- message sizes are counted only with RDMASCOPE_PRELOAD_MESSAGE_SIZES=1 (which `rdmascope
  profile` sets; the cases above run with it): without it no size series at all, not zeros,
  while the queues are still counted. No root needed."""

import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
import harness  # noqa: E402

CHECK = harness.Checker()
failures, expect = CHECK.failures, CHECK.expect


def buckets(samples, pid, direction):
    """The non-empty buckets of a size histogram as {le: count in that bucket alone}."""
    cumulative = sorted((float(dict(k)["le"]), v) for k, v in harness.series(
        samples, "rdma_process_message_size_bytes_bucket", pid=pid,
        direction=direction).items())
    out, previous = {}, 0.0
    for le, count in cumulative:
        if count != previous:
            out[le] = count - previous
        previous = count
    return out


def start(program, env, args=()):
    proc = subprocess.Popen([program, *args], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pids = dict(proc.stdout.readline().split() for _ in range(3))
    return proc, pids


def stop(proc, what):
    _, err = proc.communicate("exit\n", timeout=60)
    expect(f"{what}: exit status", proc.returncode, 0)
    return err


def main(binary, program, library, preload):
    with tempfile.TemporaryDirectory(prefix="rdmascope-profile-") as stats_dir:
        env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(library), LD_PRELOAD=preload,
                   RDMASCOPE_PRELOAD_DIR=stats_dir, RDMASCOPE_PRELOAD_MESSAGE_SIZES="1")
        env.pop("RDMASCOPE_PRELOAD_SAMPLE", None)
        with harness.Exporter(binary, ["--collector.disable-defaults", "--collector.occupancy",
                                       f"--collector.occupancy.dir={stats_dir}"]) as exporter:
            proc, pids = start(program, env)
            samples = harness.parse(exporter.metrics())
            pid = pids["READY"]
            for direction, wrs, size, buckets_want in [
                    ("send", 101.0, 206848.0, {2048.0: 101.0}),
                    ("recv", 60.0, 66560.0, {512.0: 50.0, 4096.0: 10.0})]:
                expect(f"{direction}: work requests", harness.value(
                    samples, "rdma_process_posted_work_requests_total", pid=pid,
                    direction=direction), wrs)
                expect(f"{direction}: bytes", harness.value(
                    samples, "rdma_process_posted_bytes_total", pid=pid, direction=direction),
                    size)
                expect(f"{direction}: size buckets", buckets(samples, pid, direction),
                       buckets_want)
                expect(f"{direction}: histogram count", harness.value(
                    samples, "rdma_process_message_size_bytes_count", pid=pid,
                    direction=direction), wrs)
                expect(f"{direction}: histogram sum", harness.value(
                    samples, "rdma_process_message_size_bytes_sum", pid=pid,
                    direction=direction), size)
            count = harness.value(samples, "rdma_process_completion_latency_seconds_count",
                                  pid=pid)
            total = harness.value(samples, "rdma_process_completion_latency_seconds_sum",
                                  pid=pid)
            print(f"latency (default sampling): {count} timed, {total} s")
            expect("latency: some sends timed", count is not None and count > 0, True)
            expect("latency: time elapsed", total is not None and total > 0, True)

            # The children: their own files, their own figures.
            forked, execed = pids["FORKED"], pids["EXECED"]
            for child, wrs, size, recv in [(forked, 5.0, 1500.0, 0.0),
                                           (execed, 7.0, 700.0, 3.0)]:
                expect(f"child {child}: sends", harness.value(
                    samples, "rdma_process_posted_work_requests_total", pid=child,
                    direction="send"), wrs)
                expect(f"child {child}: send bytes", harness.value(
                    samples, "rdma_process_posted_bytes_total", pid=child,
                    direction="send"), size)
                expect(f"child {child}: receives", harness.value(
                    samples, "rdma_process_posted_work_requests_total", pid=child,
                    direction="recv"), recv)
            # The forked child's thread continues its parent's sampling countdown; the exec'd
            # one starts afresh, its first signalled send timed.
            timed = harness.value(
                samples, "rdma_process_completion_latency_seconds_count", pid=execed)
            expect("exec'd child: timed sends", timed is not None and timed > 0, True)
            expect("exec'd child: comm", {dict(k)["comm"] for k in harness.series(
                samples, "rdma_process_posted_bytes_total", pid=execed)}, {"preload_profile"})
            stop(proc, "default sampling")

            # Every signalled send timed.
            proc, pids = start(program, dict(env, RDMASCOPE_PRELOAD_SAMPLE="1"),
                               ["--sequential"])
            samples = harness.parse(exporter.metrics())
            expect("RDMASCOPE_PRELOAD_SAMPLE=1: every polled send timed", harness.value(
                samples, "rdma_process_completion_latency_seconds_count",
                pid=pids["READY"]), 101.0)
            stop(proc, "sample 1")

            # More threads than the stats file has shards: the last ones share one, exactly.
            proc, pids = start(program, env, ["--many-threads"])
            samples = harness.parse(exporter.metrics())
            expect("70 more threads: send work requests", harness.value(
                samples, "rdma_process_posted_work_requests_total", pid=pids["READY"],
                direction="send"), 171.0)
            expect("70 more threads: size buckets", buckets(samples, pids["READY"], "send"),
                   {64.0: 70.0, 2048.0: 101.0})
            expect("70 more threads: bytes", harness.value(
                samples, "rdma_process_posted_bytes_total", pid=pids["READY"],
                direction="send"), 211328.0)
            stop(proc, "many threads")

            # Sampling off, and a bad value.
            proc, pids = start(program, dict(env, RDMASCOPE_PRELOAD_SAMPLE="0"))
            samples = harness.parse(exporter.metrics())
            expect("RDMASCOPE_PRELOAD_SAMPLE=0: nothing timed", harness.value(
                samples, "rdma_process_completion_latency_seconds_count",
                pid=pids["READY"]), 0.0)
            expect("RDMASCOPE_PRELOAD_SAMPLE=0: sizes still counted", harness.value(
                samples, "rdma_process_posted_work_requests_total", pid=pids["READY"],
                direction="send"), 101.0)
            stop(proc, "sample 0")
            proc, pids = start(program, dict(env, RDMASCOPE_PRELOAD_SAMPLE="often"))
            samples = harness.parse(exporter.metrics())
            timed = harness.value(samples, "rdma_process_completion_latency_seconds_count",
                                  pid=pids["READY"])
            expect("bad RDMASCOPE_PRELOAD_SAMPLE: default sampling", timed is not None and
                   timed > 0, True)
            err = stop(proc, "bad sample value")
            # The parent and the exec'd child read the variable at load (the forked child
            # does not load the library again).
            expect("bad RDMASCOPE_PRELOAD_SAMPLE: a line per process", len(
                [line for line in err.splitlines() if "RDMASCOPE_PRELOAD_SAMPLE=often" in line]),
                2)

            # Message sizes not asked for: absent (the post path did no size work).
            unasked = {k: v for k, v in env.items() if k != "RDMASCOPE_PRELOAD_MESSAGE_SIZES"}
            proc, pids = start(program, unasked)
            samples = harness.parse(exporter.metrics())
            for name in ("rdma_process_posted_work_requests_total",
                         "rdma_process_posted_bytes_total",
                         "rdma_process_message_size_bytes_count"):
                expect(f"sizes not asked: no {name}",
                       harness.series(samples, name, pid=pids["READY"]), {})
            expect("sizes not asked: queues still counted", bool(harness.series(
                samples, "rdma_cq_polls_total", pid=pids["READY"])), True)
            stop(proc, "sizes not asked")
            if failures:
                print(exporter.read_log())
    print("FAILED: " + ", ".join(failures) if failures else "PASS")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
