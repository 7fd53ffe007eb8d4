"""Network namespaces and veth pairs for the host tier; removed on exit whatever happens."""

import os
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "common"))
import harness  # noqa: E402,F401  (re-exported for the tests)
import machine  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


class IpError(RuntimeError):
    """An `ip` command failed; the message carries its stderr, which says why."""


def ip(*args, check=True):
    result = subprocess.run(["ip", *args], check=False, capture_output=True, text=True)
    if check and result.returncode != 0:
        raise IpError(f"`ip {' '.join(args)}` failed (exit {result.returncode}): "
                      f"{result.stderr.strip() or result.stdout.strip() or 'no output'}")
    return result


def _exit_on_sigterm(signum, frame):
    # ctest's timeout sends SIGTERM: turn it into SystemExit so that `with` blocks (and so
    # Namespaces.close) run instead of the interpreter dying with namespaces left behind.
    raise SystemExit(128 + signum)


class Namespaces:
    def __init__(self, *names):
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _exit_on_sigterm)
        machine.require("netns")  # `ip -n` makes / a slave mount in its own namespace
        tag = f"rds{os.getpid()}"
        self.names = [f"{tag}-{n}" for n in names]
        try:
            for name in self.names:
                ip("netns", "del", name, check=False)
                ip("netns", "add", name)
                ip("-n", name, "link", "set", "lo", "up")
        except BaseException:
            # __exit__ never runs when __init__ raises: remove what was made here.
            self.close()
            raise

    def __getitem__(self, i):
        return self.names[i]

    def close(self):
        for name in self.names:
            ip("netns", "del", name, check=False)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def veth_pair(ns_a, name_a, ns_b, name_b, queues=1, addr_a=None, addr_b=None):
    ip("link", "add", name_a, "numtxqueues", str(queues), "numrxqueues", str(queues), "netns",
       ns_a, "type", "veth", "peer", name_b, "numtxqueues", str(queues), "numrxqueues",
       str(queues), "netns", ns_b)
    for ns, name, addr in ((ns_a, name_a, addr_a), (ns_b, name_b, addr_b)):
        if addr:
            ip("-n", ns, "addr", "add", addr, "dev", name)
        ip("-n", ns, "link", "set", name, "up")


def build_xdp_object(workdir):
    """Compiles xdp_pass.bpf.c; returns its path, or None if clang cannot."""
    out = os.path.join(workdir, "xdp_pass.o")
    arch_include = "/usr/include/" + subprocess.run(
        ["gcc", "-print-multiarch"], capture_output=True, text=True).stdout.strip()
    result = subprocess.run(["clang", "-O2", "-target", "bpf", "-I", arch_include, "-c",
                             os.path.join(HERE, "xdp_pass.bpf.c"), "-o", out],
                            capture_output=True, text=True)
    if result.returncode != 0:
        print("cannot build the XDP program:", result.stderr)
        return None
    return out


def send_udp(ns, dst, count, size=100, port=9):
    """Sends `count` UDP datagrams from inside namespace `ns`."""
    code = ("import socket,sys\n"
            "s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
            f"for i in range({count}): s.sendto(b'x'*{size},('{dst}',{port}))\n")
    subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", code], check=True)


def ethtool_stats(ns, device):
    """`ethtool -S` of one interface as {name: value}, parsed as a person reads it."""
    out = subprocess.run(["ip", "netns", "exec", ns, "ethtool", "-S", device], check=True,
                         capture_output=True, text=True).stdout
    stats = {}
    for line in out.splitlines()[1:]:
        name, sep, value = line.strip().rpartition(": ")
        if sep:
            stats[name] = int(value)
    return stats


def tempdir():
    return tempfile.TemporaryDirectory(prefix="rdmascope-host-")
