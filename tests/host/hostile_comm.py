#!/usr/bin/env python3
"""Host tier: a process whose name (comm) holds a quote, a backslash, a newline and bytes that
are not UTF-8 registers memory through the libibverbs stand-in (issue 15). Its name must come
out escaped and valid in the exposition (promtool check metrics parses it; the label value
unescapes to the name with U+FFFD for the bad bytes) and valid JSON in /debug/mr/stacks (it
was a 500: nlohmann's dump throws on invalid UTF-8). The process renames itself with
prctl(PR_SET_NAME), the kernel's comm (at most 15 bytes: include/linux/sched.h TASK_COMM_LEN)
that bpf_get_current_comm() copies into the probe's records (tests/common/named_registrar.py,
shared with tests/hostile/hostile_comm_output.py)."""

import json
import os
import subprocess
import sys
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "common"))
import harness  # noqa: E402
from named_registrar import NamedRegistrar  # noqa: E402

HOSTILE = b'a"b\\c\nd\xff\xfez'  # 10 bytes
# What a reader must see: every byte that is not UTF-8 replaced by U+FFFD.
EXPECTED = HOSTILE.decode("utf-8", errors="replace")


def strings(node):
    """Every string in a JSON document, keys included."""
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for key, value in node.items():
            yield key
            yield from strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from strings(item)


def main(binary, library):
    if os.geteuid() != 0:
        print("SKIP: BPF needs root")
        return harness.SKIP
    checks = harness.Checker()
    expect, failures = checks.expect, checks.failures

    with harness.Exporter(binary, ["--collector.disable-defaults", "--collector.mr",
                                   f"--probe.library={library}", "--collector.mr.leak-age=0s"]) as exporter:
        with NamedRegistrar(library, HOSTILE) as child:
            expect("child registered", child.ready, True)
            pid = str(child.pid)
            expect("kernel comm", child.kernel_comm(), HOSTILE)
            url = f"http://127.0.0.1:{exporter.port}"
            with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
                raw = resp.read()
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                failures.append(f"exposition is not UTF-8: {err}")
                text = raw.decode("utf-8", errors="replace")
            lint = subprocess.run(["promtool", "check", "metrics"], input=raw,
                                  capture_output=True)
            output = (lint.stdout + lint.stderr).decode(errors="replace")
            expect("promtool parses the exposition", "parsing error" not in output, True)
            lines = [line for line in text.splitlines()
                     if line.startswith("rdma_mr_outstanding_regions{") and f'pid="{pid}"' in line]
            expect("escaped in the exposition",
                   lines and 'comm="a\\"b\\\\c\\nd' in lines[0], True)
            samples = harness.parse(text)
            comms = {dict(labels).get("comm") for labels in
                     harness.series(samples, "rdma_mr_outstanding_regions", pid=pid)}
            expect("label value unescaped", comms, {EXPECTED})

            status, body = None, b""
            try:
                with urllib.request.urlopen(url + "/debug/mr/stacks", timeout=10) as resp:
                    status, body = resp.status, resp.read()
            except urllib.error.HTTPError as err:
                status, body = err.code, err.read()
            expect("/debug/mr/stacks status", status, 200)
            try:
                stacks = json.loads(body.decode("utf-8"))
                comm = [p["comm"] for p in stacks["processes"] if str(p["pid"]) == pid]
            except (UnicodeDecodeError, ValueError, KeyError) as err:
                comm = f"not valid JSON: {err}: {body[:200]!r}"
            expect("comm in /debug/mr/stacks", comm, [EXPECTED])

            # /doctor's JSON (findings name processes by comm, e.g. memory.huge_page_alignment).
            with urllib.request.urlopen(url + "/doctor", timeout=30) as resp:
                status, body = resp.status, resp.read()
            expect("/doctor status", status, 200)
            try:
                mentions = [text for text in strings(json.loads(body.decode("utf-8")))
                            if 'a"b\\c\nd' in text]
            except (UnicodeDecodeError, ValueError) as err:
                mentions = [f"not valid JSON: {err}"]
            print(f"/doctor mentions the process {len(mentions)} times")
            expect("comm in /doctor as valid text",
                   [text for text in mentions if EXPECTED not in text], [])
        expect("exporter alive", exporter.proc.poll(), None)
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
