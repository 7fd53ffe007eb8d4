"""The host tier's namespace helper cleans up in every path and says why `ip` failed
(tests/host/netns.py): a failure while creating the namespaces, and ctest's SIGTERM at a
timeout, leave no namespace behind."""

import os
import signal
import subprocess
import sys

import netns
from netns import harness


def namespaces():
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def failure_while_creating(failures):
    """The second name is invalid: the first namespace must be gone and the error must quote
    ip's reason."""
    tag = f"rds{os.getpid()}-"
    try:
        netns.Namespaces("first", "bad/name")
        failures.append("an invalid namespace name did not raise")
    except netns.IpError as err:
        if "Invalid netns name" not in str(err):
            failures.append(f"the error does not say why: {err}")
    left = {name for name in namespaces() if name.startswith(tag)}
    if left:
        failures.append(f"namespaces left behind after a failed creation: {sorted(left)}")
        for name in left:
            netns.ip("netns", "del", name, check=False)


def sigterm_inside_with(failures):
    """A test killed by ctest's timeout (SIGTERM) inside its `with Namespaces(...)` block."""
    code = ("import sys, time\n"
            f"sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})\n"
            "import netns\n"
            "with netns.Namespaces('victim') as ns:\n"
            "    print(ns[0], flush=True)\n"
            "    time.sleep(60)\n")
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    name = child.stdout.readline().strip()
    if name not in namespaces():
        failures.append(f"the child's namespace {name!r} was not created")
    child.send_signal(signal.SIGTERM)
    try:
        child.wait(timeout=10)
    except subprocess.TimeoutExpired:
        child.kill()
        failures.append("the child did not exit on SIGTERM")
    if name in namespaces():
        failures.append(f"namespace {name} left behind after SIGTERM")
        netns.ip("netns", "del", name, check=False)


def main():
    if os.geteuid() != 0:
        print("needs root for network namespaces")
        return harness.SKIP
    failures = []
    failure_while_creating(failures)
    sigterm_inside_with(failures)
    for failure in failures:
        print("FAIL:", failure)
    print("netns harness:", "ok" if not failures else f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
