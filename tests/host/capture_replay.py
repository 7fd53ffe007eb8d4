#!/usr/bin/env python3
"""Host tier (issue 39): `rdmascope capture` of a network namespace with veth pairs, then
`serve --replay` scraped twice: each scrape equals the live exporter's scrape taken at the same
sample (traffic between the two samples makes them differ, so the order is checked too).
Under replay, strace shows no SIOCETHTOOL ioctl, no AF_NETLINK socket, no perf_event_open and
no bpf() call at all (on a second capture taken with the perf collector on, and the mr and verbs
collectors' probes attached to this host's libibverbs), and after start-up no open
outside the capture but the exporter's own process files. The same capture
as a .tar.gz (made by tar, under its top directory) replays the same three scrapes.

Series the comparison ignores, each for its reason:
  process_*                              the exporter's own process (CPU, memory, fds, start)
  rdmascope_collector_duration_seconds   how long this process took, not what the host said
  exposer_*, rdmascope_scrape_*          the HTTP server's own counters and timings
Allowed opens after start-up (the first scrape's, the exporter's own process_* series):
  /proc/self/..., /proc/thread-self/..., /proc/stat (the boot time of process_start_time_seconds)
Start-up opens (libraries, /etc/ld.so.cache, /etc/localtime, /sys/devices/system/cpu/online for
the thread pools, the binary's /proc/self) are not checked: they are before the replay begins.
"""

import os
import re
import subprocess
import sys
import time

import netns
from netns import harness

IGNORED = re.compile(r"^(process_|rdmascope_collector_duration_seconds|exposer_|rdmascope_scrape_)")
LIVE_FLAGS = ["--no-collector.mr", "--no-collector.verbs", "--no-collector.perf",
              "--no-collector.occupancy", "--collector.ethtool.refresh-interval=0s"]


def compared(body):
    """{(name, labels): value} of the series the comparison keeps."""
    return {key: value for key, value in harness.parse(body).items()
            if not IGNORED.match(key[0])}


def differences(expected, actual, limit=12):
    out = []
    for key in sorted(set(expected) | set(actual), key=str):
        if expected.get(key) != actual.get(key):
            out.append(f"  {key}: live {expected.get(key)}, replay {actual.get(key)}")
    return out[:limit] + ([f"  ... {len(out) - limit} more"] if len(out) > limit else [])


def wait_for(path, pattern, proc, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(path, encoding="utf-8", errors="replace") as f:
            if re.search(pattern, f.read()):
                return
        if proc.poll() is not None:
            raise RuntimeError(f"capture exited before {pattern!r}")
        time.sleep(0.05)
    raise RuntimeError(f"no {pattern!r} within {timeout}s")


def quiet(ns):
    # No IPv6 (router solicitations, DAD) or other chatter: counters move only by our traffic.
    subprocess.run(["ip", "netns", "exec", ns, "sh", "-c",
                    "echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6 && "
                    "echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6"], check=True)


def main(binary):
    harness.require_root_and_netns()
    failures = []
    with netns.Namespaces("a", "b") as ns, netns.tempdir() as work:
        for n in ns:
            quiet(n)
        # XDP on every end, so that veth's per-queue ethtool counters move with the traffic.
        xdp = netns.build_xdp_object(work)
        if xdp is None:
            return 1
        for i, queues in enumerate((1, 2)):
            netns.veth_pair(ns[0], f"cr{i}a", ns[1], f"cr{i}b", queues, f"10.78.{i}.1/24",
                            f"10.78.{i}.2/24")
            for n, dev in ((ns[0], f"cr{i}a"), (ns[1], f"cr{i}b")):
                netns.ip("-n", n, "link", "set", "dev", dev, "xdp", "obj", xdp, "sec", "xdp")
            netns.send_udp(ns[0], f"10.78.{i}.2", 5 * (i + 1))
        capture = os.path.join(work, "capture")
        capture_log = os.path.join(work, "capture.log")

        with harness.Exporter(binary, LIVE_FLAGS, netns=ns[0]) as live:
            with open(capture_log, "w") as log:
                proc = subprocess.Popen(
                    ["ip", "netns", "exec", ns[0], binary, "capture", "--output", capture,
                     "--samples", "2", "--interval", "4s", "--no-collector.perf",
                     "--no-collector.occupancy",
                     # Two processes' probes never compare (capture_ebpf checks the mr and
                     # verbs collectors against the capture's own metrics.prom).
                     "--no-collector.mr", "--no-collector.verbs"],
                    stdout=log, stderr=subprocess.STDOUT)
            try:
                wait_for(capture_log, r'msg="sample recorded" sample=1', proc)
                live_1 = compared(live.metrics())
                for i in range(2):  # between the samples: the second one differs
                    netns.send_udp(ns[0], f"10.78.{i}.2", 11 * (i + 1), size=200)
                    netns.send_udp(ns[1], f"10.78.{i}.1", 3 * (i + 1))
                time.sleep(0.5)
                live_2 = compared(live.metrics())
            finally:
                if proc.wait(timeout=60) != 0:
                    failures.append("capture failed:\n" + open(capture_log).read())
        print(open(capture_log).read())
        if failures:
            print("\n".join(failures))
            return 1
        if live_1 == live_2:
            failures.append("the traffic between the samples moved no counter: the order "
                            "would not be checked")

        # Replayed outside the namespace: this host's own interfaces must not leak in.
        with harness.Exporter(binary, ["--replay", capture]) as replay:
            replay_1 = compared(replay.metrics())
            replay_2 = compared(replay.metrics())
            replay_3 = compared(replay.metrics())
        for n, (live_n, replay_n) in enumerate(((live_1, replay_1), (live_2, replay_2)), 1):
            if live_n != replay_n:
                failures.append(f"sample {n}: replay differs from the live scrape:\n" +
                                "\n".join(differences(live_n, replay_n)))
        if replay_3 != replay_2:
            failures.append("the last sample does not repeat")
        stats = sum(1 for key in replay_1 if key[0] == "rdma_ethtool_stat")
        print(f"compared {len(replay_1)} series per sample ({stats} ethtool stats)")
        if stats < 10:
            failures.append(f"only {stats} ethtool stats replayed: the comparison proves little")

        # The same capture as a .tar.gz (tar's own, with its top directory) replays alike.
        archive = os.path.join(work, "capture.tar.gz")
        subprocess.run(["tar", "-C", work, "-czf", archive, "capture"], check=True)
        with harness.Exporter(binary, ["--replay", archive]) as replay:
            archived = [compared(replay.metrics()) for _ in range(3)]
        if archived != [replay_1, replay_2, replay_3]:
            failures.append("the .tar.gz replays otherwise than its directory:\n" + "\n".join(
                differences(replay_1, archived[0]) + differences(replay_2, archived[1])))

        # Perf counts of two processes never compare: the counters go in a capture of their own,
        # with every default collector (occupancy too: its replay opens nothing of /run either;
        # host_capture_occupancy replays a directory of real stats files under strace).
        perf_capture = os.path.join(work, "capture-perf")
        subprocess.run(["ip", "netns", "exec", ns[0], binary, "capture", "--output", perf_capture,
                        "--samples", "1", "--exporter", "none"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        failures += strace_replay(binary, perf_capture, work)
        failures += strace_doctor(binary, perf_capture, work)
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


# What a replay must not open: the host's sysfs, devices, runtime sockets and any /proc but
# the process's own (libpfm4 is not loaded either: its pfm_initialize reads /proc/mounts and
# sysfs; the capture holds its encodings, docs/capture.md "perf").
HOST_PATHS = re.compile(r'"(/sys/|/dev/|/run/|/proc/(?!self/|thread-self/|stat"))')


def strace_replay(binary, capture, work):
    failures = []
    trace = os.path.join(work, "strace.txt")
    launcher = ["strace", "-f", "-qq", "-e",
                "trace=ioctl,socket,open,openat,openat2,perf_event_open,bpf", "-o", trace]
    with harness.Exporter(binary, ["--replay", capture], launcher=launcher) as replay:
        time.sleep(0.5)  # the doctor service's first collection, at start-up
        with open(trace, errors="replace") as f:
            startup_lines = len(f.readlines())
        replay.metrics()
        replay.metrics()
    with open(trace, errors="replace") as f:
        lines = f.readlines()
    real_capture = os.path.realpath(capture)
    allowed = re.compile(r'"(/proc/self/|/proc/thread-self/|/proc/stat"|' +
                         re.escape(capture) + "|" + re.escape(real_capture) + ")")
    beneath = re.compile(r'openat2\(\d+, "samples/|openat\(\d+, "[^/]')
    capture_opens = 0
    for number, line in enumerate(lines):
        # Over the whole run, start-up included: nothing of the host (the check strace_doctor
        # makes, HOST_PATHS); a sample is read into memory once, so after start-up there may be
        # few opens left to see.
        if re.search(r"\bopen(at2?)?\(", line):
            if HOST_PATHS.search(line):
                failures.append(f"strace: the host read under replay: {line.strip()}")
            if beneath.search(line) or allowed.search(line) and capture in line:
                capture_opens += 1
        if "SIOCETHTOOL" in line or "0x8946" in line:
            failures.append(f"strace: an ethtool ioctl under replay: {line.strip()}")
        if re.search(r"socket\((AF_NETLINK|PF_NETLINK)", line):
            failures.append(f"strace: a netlink socket under replay: {line.strip()}")
        if "perf_event_open(" in line:
            failures.append(f"strace: perf_event_open under replay: {line.strip()}")
        # The mr and verbs collectors read the capture's bpf/*.json: no BPF object is loaded.
        if re.search(r"\bbpf\(", line):
            failures.append(f"strace: bpf() under replay: {line.strip()}")
        if number < startup_lines:
            continue
        if re.search(r"\bopen(at2?)?\(", line) and not allowed.search(line):
            # openat2 beneath the capture's root descriptor names paths relative to it; a
            # sample read into memory opens each name beneath its directory's descriptor.
            if beneath.search(line):
                continue
            failures.append(f"strace: an open outside the capture after start-up: {line.strip()}")
    bpf_calls = sum(1 for line in lines if re.search(r"\bbpf\(", line))
    print(f"strace: {len(lines)} calls, {len(lines) - startup_lines} after start-up, "
          f"{capture_opens} opens of the capture, {bpf_calls} bpf()")
    if capture_opens < 5:
        failures.append("strace saw almost no read of the capture: the check proves little")
    return failures[:20]


def strace_doctor(binary, capture, work):
    """`doctor --replay` reads the host no more than `serve --replay` does: it runs once, so
    every open is checked but the dynamic loader's and the locale's (before main) and the
    process's own /proc/self."""
    failures = []
    trace = os.path.join(work, "strace_doctor.txt")
    result = subprocess.run(["strace", "-f", "-qq", "-e", "trace=ioctl,socket,open,openat,openat2",
                             "-o", trace, binary, "doctor", "--replay", capture, "--format", "json"],
                            capture_output=True, text=True, timeout=120)
    if result.returncode not in (0, 1, 2) or '"findings"' not in result.stdout:
        return [f"doctor --replay under strace: exit {result.returncode}: {result.stderr[-500:]}"]
    with open(trace, errors="replace") as f:
        lines = f.readlines()
    host = HOST_PATHS
    opens = 0
    for line in lines:
        if "SIOCETHTOOL" in line or "0x8946" in line:
            failures.append(f"strace doctor: an ethtool ioctl under replay: {line.strip()}")
        if re.search(r"socket\((AF_NETLINK|PF_NETLINK)", line):
            failures.append(f"strace doctor: a netlink socket under replay: {line.strip()}")
        if re.search(r"\bopen(at2?)?\(", line):
            opens += 1
            if host.search(line):
                failures.append(f"strace doctor: the host read under replay: {line.strip()}")
    print(f"strace doctor --replay: {len(lines)} calls, {opens} opens")
    if opens < 5:
        failures.append("strace saw almost no open from doctor --replay: the check proves little")
    return failures[:20]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
