#!/usr/bin/env python3
"""Boots the lab guest under QEMU (TCG), runs one scenario in it, checks its results on the host.

Usage:
  run_scenario.py --guest DIR --scenario NAME      run scenarios/NAME.sh, check with NAME.py
  run_scenario.py --guest DIR --shell              interactive shell in the guest (Ctrl-A X quits)
  --append WORDS (default: $RDMASCOPE_LAB_APPEND) adds words to the guest's kernel command line,
  which scenarios may read (e.g. rdmascope.soak_scale=N for soak.sh).

The guest's console is parsed for blocks (@@@BEGIN/@@@END), @@@WAIT requests (the host runs
the scenario's on_wait hook, e.g. scraping through the forwarded port, then answers), and the
final @@@LAB-EXIT. Any error or timeout fails with the whole guest console."""

import argparse
import importlib.util
import os
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
import harness  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
GUEST_EXPORTER_PORT = 9879


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Lab:
    """What a scenario's host-side hooks get: the forwarded exporter port and the console."""

    def __init__(self, guest_dir, scenario, append="", tcg="multi"):
        self.guest_dir = guest_dir
        self.append = append
        self.tcg = tcg
        self.scenario = scenario
        self.host_port = free_port()
        self.console = []
        self.blocks = {}
        self.notes = []  # lines a check wants printed on success too

    def qemu_command(self, append):
        return [
            "qemu-system-x86_64", "-accel", f"tcg,thread={self.tcg}", "-cpu", "max", "-smp", "2", "-m", "1024",
            "-nographic", "-no-reboot", "-nodefaults", "-serial", "stdio",
            "-kernel", os.path.join(self.guest_dir, "vmlinuz"),
            "-initrd", os.path.join(self.guest_dir, "initrd.cpio.gz"),
            "-append", f"console=ttyS0 loglevel=4 panic=-1 rdmascope.scenario={append}"
                       + (f" {self.append}" if self.append else ""),
            "-netdev", f"user,id=n0,hostfwd=tcp:127.0.0.1:{self.host_port}-:"
                       f"{GUEST_EXPORTER_PORT}",
            "-device", "virtio-net-pci,netdev=n0",
        ]


def load_checks(name):
    path = os.path.join(HERE, "scenarios", name + ".py")
    spec = importlib.util.spec_from_file_location(f"scenario_{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.join(HERE, "scenarios"))
    spec.loader.exec_module(module)
    return module


def run(lab, checks, timeout):
    proc = subprocess.Popen(lab.qemu_command(lab.scenario), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    done = threading.Event()
    outcome = {"exit": None, "error": None}
    current = [None]

    def reader():
        for raw in iter(proc.stdout.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            lab.console.append(line)
            if line.startswith("@@@BEGIN "):
                current[0] = line.split(" ", 1)[1]
                lab.blocks[current[0]] = []
            elif line.startswith("@@@END "):
                current[0] = None
            elif current[0] is not None:
                lab.blocks[current[0]].append(line)
            elif line.startswith("@@@WAIT "):
                tag = line.split(" ", 1)[1]
                try:
                    hook = getattr(checks, "on_wait", None)
                    if hook:
                        hook(tag, lab)
                except Exception as err:  # noqa: BLE001 - reported as the scenario's failure
                    outcome["error"] = f"host hook for {tag} failed: {err!r}"
                proc.stdin.write(b"go\n")
                proc.stdin.flush()
            elif line.startswith("@@@LAB-EXIT "):
                outcome["exit"] = int(line.split()[1])
            elif line.startswith("@@@LAB-ERROR"):
                outcome["error"] = outcome["error"] or line
        done.set()

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    finished = done.wait(timeout)
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    thread.join(5)
    if not finished:
        return [f"timeout after {timeout} s"]
    if outcome["error"]:
        return [outcome["error"]]
    if outcome["exit"] is None:
        return ["the guest stopped without finishing the scenario"]
    if outcome["exit"] != 0:
        return [f"the guest scenario exited with {outcome['exit']}"]
    return checks.check(lab)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--guest", required=True, help="directory with vmlinuz, initrd.cpio.gz")
    parser.add_argument("--scenario")
    parser.add_argument("--shell", action="store_true")
    parser.add_argument("--timeout", type=float, default=110)
    parser.add_argument("--append", default=os.environ.get("RDMASCOPE_LAB_APPEND", ""),
                        help="more words for the guest's kernel command line")
    # Under multi-threaded TCG (one host thread per vCPU) a vCPU running through kernel text
    # that another vCPU patches (text_poke_bp: BPF trampolines, ftrace) can stay at the
    # patched function's first byte for good: the function tracer alone, switched on and off
    # while a program calls the function, locks that program up within 30 s (scenario
    # text_poke, docs/lab.md); with one thread for both vCPUs it never did in 300 switches.
    # Scenarios that patch kernel text while programs run through it use "single".
    parser.add_argument("--tcg-thread", choices=("multi", "single"), default="multi",
                        help="QEMU TCG threading (default multi)")
    args = parser.parse_args()
    if args.shell:
        lab = Lab(args.guest, "shell", args.append, args.tcg_thread)
        print(f"guest exporter port 9879 is forwarded to 127.0.0.1:{lab.host_port}")
        return subprocess.call(lab.qemu_command("shell"))
    if not args.scenario:
        parser.error("--scenario or --shell")
    lab = Lab(args.guest, args.scenario, args.append, args.tcg_thread)
    checks = load_checks(args.scenario)
    start = time.monotonic()
    try:
        failures = run(lab, checks, args.timeout)
    except Exception as err:  # noqa: BLE001 - a broken check is a failure with the console
        failures = [f"check raised {err!r}"]
    elapsed = time.monotonic() - start
    # The guest's scrapes are real expositions of the real stack: keep them for the check of
    # the metric names rules and dashboards use.
    for name, lines in lab.blocks.items():
        if name.startswith("scrape"):
            harness.keep_scrape("\n".join(lines) + "\n")
    if failures:
        # Failures first as well: CI logs keep the head and the tail of long output.
        for failure in failures:
            print("FAIL:", failure)
        print("===== guest console =====")
        print("\n".join(lab.console))
        print("===== end of guest console =====")
        for failure in failures:
            print("FAIL:", failure)
        print(f"scenario {args.scenario}: {len(failures)} failures in {elapsed:.1f} s")
        return 1
    for note in lab.notes:
        print(note)
    print(f"scenario {args.scenario}: passed in {elapsed:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
