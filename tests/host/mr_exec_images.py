#!/usr/bin/env python3
"""Host tier (issue 38): an exec is a new process image, unwound and named with its own modules.

mr_exec_first registers LEAKS regions from register_in_first_image, then (same pid) execs
mr_exec_second, which registers LEAKS regions from register_in_second_image. Both are non-PIE,
built without frame pointers (DWARF unwinding), and run without address randomisation: the
second image's code lies where the first image's first_image_padding was, and libfakeverbs at
the same address in both. An unwinder session kept by pid (the pidfd and the start time survive
the exec) would unwind and name the second image's stack with the first image's modules:
first_image_padding, or no frame past the library. Checked, with the sandboxed unwinder worker
and without:
- before the exec, /debug/mr/stacks shows the pid's first image (its exec_id) with one stack
  through register_in_first_image and main;
- after it, the second image (another exec_id; the first one's regions were released by the
  kernel at the exec, so it is listed no more) with one stack through register_in_second_image
  and main, and nothing of the first image's code."""

import ctypes
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
import harness  # noqa: E402

LEAKS, SIZE = 4, 65536
ADDR_NO_RANDOMIZE = 0x0040000


def no_aslr():
    """In the child before its exec: the personality flag is inherited by both images."""
    ctypes.CDLL(None, use_errno=True).personality(ADDR_NO_RANDOMIZE)


def images_of(exporter, pid):
    status, body = exporter.get(f"/debug/mr/stacks?pid={pid}")
    if status != 200:
        raise RuntimeError(f"/debug/mr/stacks: HTTP {status}")
    return json.loads(body)["processes"]


def names(stack):
    return [frame["function"].split("+")[0] for frame in stack["frames"]]


def wait_unwound(exporter):
    """Every sample sent is unwound (the stack thread works in the background)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        samples = harness.parse(exporter.metrics())
        sent = harness.value(samples, "rdmascope_mr_stack_samples_total", result="sent")
        done = harness.value(samples, "rdmascope_mr_stacks_unwound_total")
        if sent and sent == done:
            return samples
        time.sleep(0.1)
    return samples


def run(binary, first, second, library, sandbox, expect):
    env = {**os.environ, "LD_LIBRARY_PATH": os.path.dirname(library)}
    flag = "--collector.mr.unwind-sandbox" if sandbox else "--no-collector.mr.unwind-sandbox"
    with harness.Exporter(binary, ["--collector.disable-defaults", "--collector.mr",
                                   "--collector.mr.tracking=uprobes", flag,
                                   f"--probe.library={library}"]) as exporter:
        proc = subprocess.Popen([first, str(LEAKS), str(SIZE), second], env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                preexec_fn=no_aslr)
        try:
            if proc.stdout.readline().strip() != "ready 1":
                raise RuntimeError("the first image did not get ready")
            wait_unwound(exporter)
            before = images_of(exporter, proc.pid)
            proc.stdin.write("exec\n")
            proc.stdin.flush()
            if proc.stdout.readline().strip() != "ready 2":
                raise RuntimeError("the second image did not get ready")
            samples = wait_unwound(exporter)
            after = images_of(exporter, proc.pid)
        finally:
            proc.kill()
            proc.wait()
    mode = "worker" if sandbox else "in process"
    print(f"{mode}: before the exec:", json.dumps(before))
    print(f"{mode}: after the exec:", json.dumps(after))
    expect(f"{mode}: one image before the exec", len(before), 1)
    expect(f"{mode}: one image after the exec", len(after), 1)
    if len(before) != 1 or len(after) != 1:
        return
    expect(f"{mode}: the same pid", after[0]["pid"], before[0]["pid"])
    expect(f"{mode}: another image", after[0]["exec_id"] != before[0]["exec_id"], True)
    for label, image, mine, other in (("first", before[0], "register_in_first_image",
                                       "register_in_second_image"),
                                      ("second", after[0], "register_in_second_image",
                                       "register_in_first_image")):
        stacks = image["stacks"]
        expect(f"{mode}: {label} image: one stack", len(stacks), 1)
        if not stacks:
            continue
        got = names(stacks[0])
        print(f"{mode}: {label} image frames: {got}")
        expect(f"{mode}: {label} image: its regions", stacks[0]["outstanding_regions"], LEAKS)
        expect(f"{mode}: {label} image: unwound with", stacks[0]["unwind"], "dwarf")
        expect(f"{mode}: {label} image: named in order",
               [n for n in got if n in (mine, "main")], [mine, "main"])
        expect(f"{mode}: {label} image: nothing of the other image",
               [n for n in got if n in (other, "first_image_padding")], [])
    expect(f"{mode}: no sample dropped as gone",
           harness.value(samples, "rdmascope_mr_stacks_dropped_total", reason="process_gone")
           or 0.0, 0.0)


def main(binary, first, second, library):
    if os.geteuid() != 0:
        print("SKIP: BPF needs root")
        return 77
    checks = harness.Checker()
    expect, failures = checks.expect, checks.failures

    for sandbox in (True, False):
        run(binary, first, second, library, sandbox, expect)
    if failures:
        print("FAIL:", "; ".join(failures))
        return 1
    print("PASS: each image of one pid unwound and named with its own modules")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
