#!/usr/bin/env python3
"""Host tier: the DWARF unwinder (sys/dwarf_unwinder) on real stacks of live processes. Each
test program captures its own registers and stack inside leaf_fn (tests/host/unwind/capture.h,
the BPF capture's stand-in: no ptrace, no BPF), writes them to a file and waits on stdin;
unwind_cli unwinds the copy against the live process and prints the symbolised frames.

  (a) C, -O2 -fomit-frame-pointer, no -g: CFI names leaf_fn, outer_fn, main; the rbp walk
      cannot;
  (b) the same with frame pointers: both walks name them;
  (c) C++ -O2 -g: a namespace template demangled, the inlined function reported inlined;
  (d) a 64-byte copy: truncated with a reason, no crash;
  (e) the process gone before the unwind: "process gone", nothing past the instruction pointer;
  (f) through a stripped shared library (its .eh_frame only): its internal function unnamed,
      main named;
  (g) two live processes of one program unwound by one unwinder: both named, the second's ELF
      files served by the first's entries of the ELF cache (sys/elf_cache).

    dwarf_unwind.py UNWIND_CLI TARGET_OMIT TARGET_FP TARGET_CPP TARGET_LIB"""

import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
import harness  # noqa: E402

STACK_BYTES = 16384  # the BPF capture's default copy


def capture(target, path, size, mode):
    """Starts `target`, returns the process once its capture file is written."""
    proc = subprocess.Popen([target, path, str(size), mode], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline().strip()
    if line != "ready":
        proc.kill()
        raise RuntimeError(f"{target}: {line!r} instead of ready")
    return proc


def unwind(cli, pid, path, *extra):
    out = subprocess.run([cli, str(pid), path, *extra], capture_output=True, text=True,
                         timeout=60)
    if out.returncode != 0:
        raise RuntimeError(f"unwind_cli failed ({out.returncode}): {out.stderr}")
    result = {"frames": []}
    for line in out.stdout.splitlines():
        key, _, value = line.partition(" ")
        # "also-" lines: the second process of --also, in result["also"].
        target = result
        if key.startswith("also-"):
            target = result.setdefault("also", {"frames": []})
            key = key[len("also-"):]
        if key == "frame":
            function, offset, module, inlined = value.split("\t")
            target["frames"].append({"function": function, "offset": int(offset, 16),
                                     "module": module, "inlined": inlined == "inlined"})
        elif key == "elf":  # --stats: "entries N unused N ..."
            words = value.split()
            target["elf"] = {name: int(number) for name, number in zip(words[::2], words[1::2])}
        else:
            target[key] = value
    print(f"  {os.path.basename(path)} {' '.join(extra)}: method {result.get('method')}, "
          f"truncated {result.get('truncated')}, stop {result.get('stop')!r}")
    for part in [result] + ([result["also"]] if "also" in result else []):
        if part is not result:
            print(f"  also: method {part.get('method')}, stop {part.get('stop')!r}")
        for frame in part["frames"]:
            print(f"    {frame['function']}+{frame['offset']:#x} ({frame['module']})"
                  + (" [inlined]" if frame["inlined"] else ""))
    if "elf" in result:
        print(f"  elf cache: {result['elf']}")
    return result


def names(result):
    return [frame["function"] for frame in result["frames"]]


def unwound_live(cli, target, work, name, size=STACK_BYTES, *extra):
    """Captures in `target`, unwinds while it waits; returns (DWARF result, rbp-walk result)."""
    path = os.path.join(work, name)
    proc = capture(target, path, size, "wait")
    try:
        dwarf = unwind(cli, proc.pid, path, *extra)
        frame_pointers = unwind(cli, proc.pid, path, "--frame-pointers")
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)
    return dwarf, frame_pointers


def main(cli, target_omit, target_fp, target_cpp, target_lib):
    checks = harness.Checker()
    with tempfile.TemporaryDirectory(prefix="dwarf_unwind.") as work:
        print("(a) -O2 -fomit-frame-pointer, no -g")
        dwarf, fp = unwound_live(cli, target_omit, work, "omit")
        chain = ["leaf_fn", "outer_fn", "main"]
        checks.expect("(a) CFI: the first frames", names(dwarf)[:3], chain)
        checks.expect("(a) CFI: method", dwarf["method"], "dwarf")
        checks.expect("(a) CFI: past main, into libc", len(dwarf["frames"]) > 3, True)
        checks.expect("(a) CFI: the first frame's module", dwarf["frames"][0]["module"],
                      os.path.basename(target_omit))
        # The rbp walk cannot get from leaf_fn to its callers: rbp is a general register.
        checks.expect("(a) rbp walk: outer_fn and main not found",
                      [n for n in names(fp) if n in ("outer_fn", "main")], [])

        print("(b) -O2 -fno-omit-frame-pointer")
        dwarf, fp = unwound_live(cli, target_fp, work, "fp")
        checks.expect("(b) CFI: the first frames", names(dwarf)[:3], chain)
        checks.expect("(b) CFI: method", dwarf["method"], "dwarf")
        checks.expect("(b) rbp walk: the first frames", names(fp)[:3], chain)
        checks.expect("(b) rbp walk: method", fp["method"], "frame-pointer")

        print("(c) C++ -O2 -g: a namespace template, an inlined function")
        dwarf, _ = unwound_live(cli, target_cpp, work, "cpp")
        frames = dwarf["frames"]
        checks.expect("(c) the first frames", names(dwarf)[:4], [
            "long unwind_test::leaf_fn<long>(char const*, unwind_test::Box<long>)",
            "unwind_test::inlined_fn(char const*, long)",
            "unwind_test::outer_fn(char const*, long)",
            "main"])
        checks.expect("(c) which are inlined", [f["inlined"] for f in frames[:4]],
                      [False, True, False, False])
        checks.expect("(c) the inlined frame's module is the program's",
                      frames[1]["module"] if len(frames) > 1 else None,
                      os.path.basename(target_cpp))
        # Without inline frames (the Symbolizer's default): the same stack, one frame less.
        plain, _ = unwound_live(cli, target_cpp, work, "cpp_plain", STACK_BYTES, "--no-inline")
        checks.expect("(c) --no-inline",
                      (names(plain)[:3], any(f["inlined"] for f in plain["frames"])),
                      (["long unwind_test::leaf_fn<long>(char const*, unwind_test::Box<long>)",
                        "unwind_test::outer_fn(char const*, long)", "main"], False))

        print("(d) a 64-byte copy (leaf_fn's frame is larger)")
        dwarf, _ = unwound_live(cli, target_omit, work, "short", 64)
        checks.expect("(d) frames", names(dwarf), ["leaf_fn"])
        checks.expect("(d) truncated", dwarf["truncated"], "1")
        checks.expect("(d) reason", dwarf["stop"], "stack copy ends")
        # 300 bytes: leaf_fn's 256-byte frame fits, and a few more, not the whole stack.
        full, _ = unwound_live(cli, target_omit, work, "full")
        dwarf, _ = unwound_live(cli, target_omit, work, "medium", 300)
        cut = len(dwarf["frames"])
        checks.expect("(d) 300 bytes: more than leaf_fn, fewer than all, the same frames",
                      (1 < cut < len(full["frames"]), names(dwarf) == names(full)[:cut]),
                      (True, True))
        checks.expect("(d) 300 bytes: truncated, reason", (dwarf["truncated"], dwarf["stop"]),
                      ("1", "stack copy ends"))

        print("(e) the process exits before the unwind")
        path = os.path.join(work, "gone")
        proc = capture(target_omit, path, STACK_BYTES, "exit")
        proc.wait(timeout=10)
        gone = unwind(cli, proc.pid, path)
        checks.expect("(e) reason", gone["stop"], "process gone")
        checks.expect("(e) nothing past the instruction pointer, unnamed", names(gone), ["??"])
        checks.expect("(e) method", gone["method"], "none")

        print("(f) through a stripped shared library")
        dwarf, fp = unwound_live(cli, target_lib, work, "lib")
        frames = dwarf["frames"]
        modules = [f["module"] for f in frames]
        checks.expect("(f) leaf_fn, then two frames of the library, then main",
                      (names(dwarf)[:1], modules[1:3], names(dwarf)[3:4]),
                      (["leaf_fn"], ["libunwind_mid.so", "libunwind_mid.so"], ["main"]))
        checks.expect("(f) its internal function has no name",
                      frames[1]["function"] if len(frames) > 1 else None, "??")
        checks.expect("(f) its exported function is named from .dynsym",
                      frames[2]["function"] if len(frames) > 2 else None, "unwind_mid_call")
        checks.expect("(f) the rbp walk does not reach main", "main" in names(fp), False)

        print("(g) two processes of one program, one unwinder")
        first, second = (os.path.join(work, name) for name in ("twin1", "twin2"))
        procs = [capture(target_omit, first, STACK_BYTES, "wait")]
        try:
            procs.append(capture(target_omit, second, STACK_BYTES, "wait"))
            both = unwind(cli, procs[0].pid, first, "--also", str(procs[1].pid), second,
                          "--stats")
        finally:
            for proc in procs:
                proc.stdin.close()
                proc.wait(timeout=10)
        checks.expect("(g) the first process's frames", names(both)[:3], chain)
        checks.expect("(g) the second process's frames",
                      names(both.get("also", {"frames": []}))[:3], chain)
        elf = both.get("elf", {})
        # The program and libc at least; each file mapped once, the second process finding
        # every file it needed (the same frames, the same modules) already mapped.
        checks.expect("(g) the files of the stacks, each mapped once",
                      (elf.get("entries", 0) >= 2, elf.get("misses"), elf.get("unused")),
                      (True, elf.get("entries"), 0))
        checks.expect("(g) the second process shared them", elf.get("hits"), elf.get("entries"))

        # The limits, on a real stack: 2 frames, truncated.
        dwarf, _ = unwound_live(cli, target_omit, work, "limit", STACK_BYTES, "--max-frames", "2")
        checks.expect("frame limit", (names(dwarf), dwarf["truncated"], dwarf["stop"]),
                      (["leaf_fn", "outer_fn"], "1", "frame limit"))

    for failure in checks.failures:
        print("FAIL:", failure)
    return 1 if checks.failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:6]))
