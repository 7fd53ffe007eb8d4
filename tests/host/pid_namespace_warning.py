#!/usr/bin/env python3
"""Host tier: an exporter outside the host's initial pid namespace warns at start-up, once,
that processes outside its namespace are counted under pid="unknown" (RDMA netlink gives no pid
for them: drivers/infiniband/core/nldev.c, fill_res_name_pid omits task_pid_vnr() == 0). Run
with `unshare --pid --fork --mount-proc`, where /proc/self/status shows a single NSpid entry
just as on the host: the check must not rely on it. In the host namespace: no warning."""

import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "common"))
import machine  # noqa: E402

SKIP = 77
WARNING = "not in the host's initial pid namespace"


def check(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    return out.stdout + out.stderr


def main(binary):
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        print("SKIP: needs root and unshare(1) to make a pid namespace")
        return SKIP
    if os.readlink("/proc/self/ns/pid") != "pid:[4026531836]":
        print("SKIP: this test itself runs outside the initial pid namespace")
        return SKIP
    machine.require("mount-namespace")  # --mount-proc
    args = [binary, "check", "--collector.disable-defaults", "--collector.resources"]
    failures = []
    inside = check(["unshare", "--pid", "--fork", "--mount-proc"] + args)
    nspid = check(["unshare", "--pid", "--fork", "--mount-proc", "grep", "NSpid",
                   "/proc/self/status"]).split()
    print(f"NSpid inside the new namespace: {nspid[1:]}")
    if inside.count(WARNING) != 1:
        failures.append(f"in a new pid namespace: warning logged {inside.count(WARNING)} times")
    host = check(args)
    if WARNING in host:
        failures.append("in the host pid namespace: warned anyway")
    for failure in failures:
        print("FAIL:", failure)
    if not failures:
        print("ok: warned once in a new pid namespace, silent in the host's")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
