#!/usr/bin/env python3
"""Hostile tier (issue 37, items 1 and 6): a local user plays the attacker against the occupancy
collector, which runs as root and reads the preload library's stats directory, world-writable
like /run/rdmascope (mode 1777). One case per run (argv[1]):

  fifo_occ          a FIFO named x.occ: every scrape used to hang in open(2) for good
  fifo_readers      a FIFO named .readers: start-up used to hang, every capability still held
  special_files     a device node, a FIFO, a symlink to another process's stats file, a
                    symlink to /etc/shadow, a directory, a file too large: refused, counted,
                    and (under strace, where installed) never opened but O_PATH
  truncating_writer a locked stats-sized file truncated and re-extended in a loop while the
                    exporter scrapes 1,000 times: it used to die of SIGBUS (the file was mmap'ed)
  forged_flood      10,000 forged stats files (half of them locked): bounded series, scrape
                    time and memory
  forged_pid        a user's file claiming root's process (pid 1): no series, no workload
  delegated_cgroup  a real process of the preload library in a user's delegated cgroup named
                    like a pod: its workload names no pod

Each asserts that /metrics keeps answering within a few seconds and that a real process run
with the preload library (the victim, here run as another user) keeps its series."""

import fcntl
import os
import re
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
import harness  # noqa: E402

NOBODY = 65534  # the victim's user
ATTACKER = 60001  # another local user, no passwd entry needed
STATS_SIZE = 443264  # sizeof(struct occ_file), preload/stats_file.h
OCC_MAGIC = 0x31434f4353414d52
OCC_VERSION = 3
SCRAPE_BUDGET = 3.0  # seconds: a scrape of this collector takes milliseconds



def end_tracees(strace_pid):
    """Ends what strace runs: strace 6.1 has no --kill-on-exit, and ending strace (what the
    harness stops) detaches its tracee and leaves it running: an exporter left behind."""
    for task in os.listdir(f"/proc/{strace_pid}/task"):
        try:
            with open(f"/proc/{strace_pid}/task/{task}/children", encoding="ascii") as f:
                children = [int(pid) for pid in f.read().split()]
        except OSError:
            continue
        for child in children:
            try:
                os.kill(child, signal.SIGTERM)
            except ProcessLookupError:
                pass

def as_user(uid, action):
    """Runs action() in a child with the uid (and gid) given; returns its exit status."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            action()
            os._exit(0)
        except BaseException as err:  # noqa: BLE001 - report, never return into the parent
            print("attacker failed:", err, file=sys.stderr)
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    return status


def header(pid, pid_ns, comm=b"forged"):
    """A stats file's header (struct occ_header) as the library writes it."""
    return struct.pack("<QII Q 16s II QQQQ II Q", OCC_MAGIC, OCC_VERSION, pid, 0, comm,
                       1024, 256, 0, 0, pid_ns, 0, 64, 1, 0)


def lock(fd):
    """The liveness lock the library takes (an OFD write lock on the whole file)."""
    flock = struct.pack("hh4xqqi4x", fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
    fcntl.fcntl(fd, fcntl.F_OFD_SETLK, flock)


def own_pid_ns():
    return os.stat("/proc/self/ns/pid").st_ino


def scrape(exporter, failures, what):
    start = time.monotonic()
    try:
        status, body = exporter.get(timeout=SCRAPE_BUDGET + 7)
    except OSError as err:  # refused, reset, timed out: the exporter died or hung
        failures.append(f"{what}: /metrics did not answer ({err}); exporter exit status "
                        f"{exporter.proc.poll()}")
        return {}, time.monotonic() - start
    took = time.monotonic() - start
    if status != 200 or took > SCRAPE_BUDGET:
        failures.append(f"{what}: /metrics answered {status} in {took:.2f} s")
    return harness.parse(body), took


def skipped(samples, reason):
    return harness.value(samples, "rdmascope_occupancy_files_skipped_total", reason=reason)


def skipped_by_one_scrape(exporter, failures, reason):
    """What one collection adds to the counter (the exporter may have collected before)."""
    before, _ = scrape(exporter, failures, "scrape")
    after, _ = scrape(exporter, failures, "scrape")
    return (skipped(after, reason) or 0) - (skipped(before, reason) or 0)


class Victim:
    """A real process of the preload library (occupancy_workload), run as another user: its
    file is owned by that user, which the exporter must accept from that user's process."""

    def __init__(self, workload, library, preload, stats_dir, uid=NOBODY):
        env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(library), LD_PRELOAD=preload,
                   RDMASCOPE_PRELOAD_DIR=stats_dir)

        def drop():
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
        self.proc = subprocess.Popen([workload], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     env=env, text=True, preexec_fn=drop)
        self.pid = self.proc.stdout.readline().split()[1]

    def series(self, samples):
        return len(harness.series(samples, "rdma_cq_outstanding_entries", pid=self.pid))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.stdin.write("exit\n")
            self.proc.stdin.flush()
            self.proc.wait(timeout=10)


def shared_stats_dir():
    directory = tempfile.mkdtemp(prefix="rdmascope-hostile-")
    os.chmod(directory, 0o1777)
    return directory


def exporter_args(stats_dir, extra=()):
    return ["--collector.disable-defaults", "--collector.occupancy",
            f"--collector.occupancy.dir={stats_dir}", "--log.level=debug", *extra]


def rss_bytes(pid):
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        return int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1)) * 1024


def case_fifo_occ(ctx):
    as_user(ATTACKER, lambda: os.mkfifo(os.path.join(ctx.dir, "x.occ"), 0o666))
    with harness.Exporter(ctx.binary, exporter_args(ctx.dir), timeout=20) as exporter:
        for i in range(5):
            samples, _ = scrape(exporter, ctx.failures, f"scrape {i} with a FIFO x.occ")
        ctx.expect("victim served", ctx.victim.series(samples) > 0, True)
        ctx.expect("FIFO counted", (skipped(samples, "not_regular") or 0) >= 1, True)


def case_fifo_readers(ctx):
    as_user(ATTACKER, lambda: os.mkfifo(os.path.join(ctx.dir, ".readers"), 0o666))
    start = time.monotonic()
    with harness.Exporter(ctx.binary, exporter_args(ctx.dir), timeout=20) as exporter:
        ctx.expect("start-up within seconds", time.monotonic() - start < 10, True)
        samples, _ = scrape(exporter, ctx.failures, "scrape after a FIFO .readers")
        ctx.expect("victim served", ctx.victim.series(samples) > 0, True)
        st = os.lstat(os.path.join(ctx.dir, ".readers"))
        ctx.expect(".readers now the exporter's regular file",
                   (oct(st.st_mode >> 12), st.st_uid), (oct(0o10), 0))
        # The lock works again: the victim's final figures are left for the exporter.
        pid = ctx.victim.pid
        ctx.victim.stop()
        samples, _ = scrape(exporter, ctx.failures, "scrape after the victim exited")
        ctx.expect("victim's final figures served",
                   len(harness.series(samples, "rdma_cq_outstanding_entries", pid=pid)) > 0, True)


def case_special_files(ctx):
    victim_file = next(n for n in os.listdir(ctx.dir) if n.endswith(".occ"))

    def plant():
        os.symlink(os.path.join(ctx.dir, victim_file), os.path.join(ctx.dir, "copy.occ"))
        os.symlink("/etc/shadow", os.path.join(ctx.dir, "shadow.occ"))
        os.mkdir(os.path.join(ctx.dir, "dir.occ"))
        os.mkfifo(os.path.join(ctx.dir, "fifo.occ"), 0o666)
        with open(os.path.join(ctx.dir, "big.occ"), "wb") as f:
            f.truncate(STATS_SIZE * 4)
    as_user(ATTACKER, plant)
    # A container's root with CAP_MKNOD can make device nodes in a shared hostPath.
    os.mknod(os.path.join(ctx.dir, "dev.occ"), 0o666 | 0o020000, os.makedev(1, 3))
    # Where strace is installed (tests/programs.txt: optional), every open of the planted names
    # is recorded: none may be more than an O_PATH one (which opens no file: no FIFO wait, no
    # device driver's open, no symlink followed).
    trace = shutil.which("strace")
    trace_log = os.path.join(tempfile.mkdtemp(prefix="rdmascope-strace-"), "opens")
    binary, prefix = ctx.binary, ()
    if trace:
        binary, prefix = trace, ("-f", "-qq", "-e", "trace=open,openat,openat2", "-o", trace_log,
                                 ctx.binary)
    with harness.Exporter(binary, exporter_args(ctx.dir), timeout=60, prefix=prefix) as exporter:
        samples, _ = scrape(exporter, ctx.failures, "scrape with special files")
        ctx.expect("victim served once, not twice through the symlink",
                   ctx.victim.series(samples), 2)
        ctx.expect("not regular per scrape: 2 symlinks, a directory, a FIFO, a device",
                   skipped_by_one_scrape(exporter, ctx.failures, "not_regular"), 5.0)
        ctx.expect("too large per scrape",
                   skipped_by_one_scrape(exporter, ctx.failures, "too_large"), 1.0)
        ctx.expect("symlinks left alone", os.path.islink(os.path.join(ctx.dir, "shadow.occ")),
                   True)
        if trace:
            end_tracees(exporter.proc.pid)
    if trace:
        with open(trace_log, encoding="utf-8", errors="replace") as f:
            opens = [line.strip() for line in f
                     if re.search(r'(copy|shadow|dir|fifo|dev|big)\.occ"', line)]
        ctx.expect("planted names opened only O_PATH",
                   [line for line in opens if "O_PATH" not in line], [])
        ctx.expect("the opens were traced", len(opens) > 0, True)
    else:
        print("note: strace not installed: the opens of the planted names are not checked")
    shutil.rmtree(os.path.dirname(trace_log), ignore_errors=True)


def case_truncating_writer(ctx):
    path = os.path.join(ctx.dir, "1-2-3-0.occ")
    ready_r, ready_w = os.pipe()
    writer = os.fork()
    if writer == 0:
        os.close(ready_r)
        os.setgroups([])
        os.setresgid(ATTACKER, ATTACKER, ATTACKER)
        os.setresuid(ATTACKER, ATTACKER, ATTACKER)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        lock(fd)
        os.pwrite(fd, header(1, own_pid_ns()), 0)
        os.write(ready_w, b"x")
        while True:  # the file flips between full size and nothing, as fast as it can
            os.ftruncate(fd, STATS_SIZE)
            os.ftruncate(fd, 4096)
    os.close(ready_w)
    os.read(ready_r, 1)
    try:
        with harness.Exporter(ctx.binary, exporter_args(ctx.dir), timeout=20) as exporter:
            for i in range(int(os.environ.get("HOSTILE_SCRAPES", "1000"))):
                if exporter.proc.poll() is not None:
                    ctx.failures.append(f"exporter died (status {exporter.proc.returncode}) "
                                        f"at scrape {i}")
                    break
                samples, _ = scrape(exporter, ctx.failures, f"scrape {i} racing a truncation")
            ctx.expect("exporter alive after the scrapes", exporter.proc.poll(), None)
            ctx.expect("victim served", ctx.victim.series(samples) > 0, True)
            ctx.expect("the writer's file never served",
                       len(harness.series(samples, "rdma_cq_outstanding_entries", pid="1")), 0)
    finally:
        os.kill(writer, 9)
        os.waitpid(writer, 0)


def case_forged_flood(ctx):
    count = 10000
    ready_r, ready_w = os.pipe()
    attacker = os.fork()
    if attacker == 0:
        os.close(ready_r)
        resource.setrlimit(resource.RLIMIT_NOFILE, (count + 100, count + 100))
        os.setgroups([])
        os.setresgid(ATTACKER, ATTACKER, ATTACKER)
        os.setresuid(ATTACKER, ATTACKER, ATTACKER)
        ns = own_pid_ns()
        held = []
        for i in range(count):
            fd = os.open(os.path.join(ctx.dir, f"{ns}-{i + 100000}-1-0.occ"),
                         os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
            os.ftruncate(fd, STATS_SIZE)  # sparse: a full-size file costs no memory
            os.pwrite(fd, header(i + 100000, ns), 0)
            if i % 2 == 0:
                lock(fd)  # half of them "live"
                held.append(fd)
            else:
                os.close(fd)
        os.write(ready_w, b"x")
        time.sleep(3600)
    os.close(ready_w)
    os.read(ready_r, 1)
    try:
        with harness.Exporter(ctx.binary, exporter_args(ctx.dir), timeout=20) as exporter:
            times = []
            for i in range(10):
                samples, took = scrape(exporter, ctx.failures, f"scrape {i} of a flood")
                times.append(took)
            times.sort()
            print(f"scrape with {count} forged files: median {times[len(times) // 2]:.3f} s, "
                  f"max {times[-1]:.3f} s; exporter RSS {rss_bytes(exporter.proc.pid) >> 20} MiB")
            ctx.expect("median scrape under 1 s", times[len(times) // 2] < 1.0, True)
            forged = {dict(k)["pid"] for k in harness.series(samples, "rdma_cq_capacity_entries")
                      if int(dict(k)["pid"]) >= 100000}
            ctx.expect("no forged process served", forged, set())
            ctx.expect("victim served", ctx.victim.series(samples) > 0, True)
            ctx.expect("per-uid cap counted", (skipped(samples, "over_uid_cap") or 0) > 0, True)
            ctx.expect("exporter RSS under 256 MiB", rss_bytes(exporter.proc.pid) < 256 << 20,
                       True)
    finally:
        os.kill(attacker, 9)
        os.waitpid(attacker, 0)


def case_forged_pid(ctx):
    """A user's files claiming root's process (pid 1: another owner) and the user's own process
    (same owner, but it does not map the file): neither is believed."""
    ready_r, ready_w = os.pipe()
    attacker = os.fork()
    if attacker == 0:
        os.close(ready_r)
        os.setgroups([])
        os.setresgid(ATTACKER, ATTACKER, ATTACKER)
        os.setresuid(ATTACKER, ATTACKER, ATTACKER)
        ns = own_pid_ns()
        for claimed in (1, os.getpid()):
            fd = os.open(os.path.join(ctx.dir, f"{ns}-{claimed}-1-0.occ"),
                         os.O_RDWR | os.O_CREAT, 0o644)
            lock(fd)
            os.ftruncate(fd, STATS_SIZE)
            os.pwrite(fd, header(claimed, ns, b"init"), 0)
            # One CQ in use, so that a believed claim would show series.
            os.pwrite(fd, struct.pack("<IIII64s", 1, 7, 63, 0, b"mlx5_0"), 128)
        os.write(ready_w, str(os.getpid()).encode())
        time.sleep(3600)
    os.close(ready_w)
    own = os.read(ready_r, 32).decode()
    try:
        args = exporter_args(ctx.dir, ["--collector.workload",
                                       "--collector.workload.cri-endpoint=none"])
        with harness.Exporter(ctx.binary, args, timeout=20) as exporter:
            samples, _ = scrape(exporter, ctx.failures, "scrape with forged pids")
            for pid in ("1", own):
                ctx.expect(f"no series for pid {pid}",
                           len(harness.series(samples, "rdma_cq_capacity_entries", pid=pid)), 0)
                ctx.expect(f"no workload looked up for pid {pid}", len(harness.series(
                    samples, "rdma_process_workload_info", pid=pid)), 0)
            ctx.expect("pid 1 per scrape: another owner",
                       skipped_by_one_scrape(exporter, ctx.failures, "owner_mismatch"), 1.0)
            ctx.expect("own pid per scrape: not mapped by it",
                       skipped_by_one_scrape(exporter, ctx.failures, "not_mapped"), 1.0)
            ctx.expect("victim served", ctx.victim.series(samples) > 0, True)
            ctx.expect("victim described", len(harness.series(
                samples, "rdma_process_workload_info", pid=ctx.victim.pid)), 1)
    finally:
        os.kill(attacker, 9)
        os.waitpid(attacker, 0)


def cgroup2_root():
    """Where the cgroup2 hierarchy is mounted (/sys/fs/cgroup, or .../unified on a hybrid host)."""
    with open("/proc/self/mounts", encoding="ascii") as mounts:
        for line in mounts:
            fields = line.split()
            if fields[2] == "cgroup2":
                return fields[1]
    return None


def case_delegated_cgroup(ctx):
    root = cgroup2_root()
    if root is None:
        print("SKIP: no cgroup2 hierarchy mounted")
        raise SystemExit(harness.SKIP)
    with open(f"/proc/{ctx.victim.pid}/cgroup", encoding="ascii") as f:
        home = next(line.split(":", 2)[2].strip() for line in f if line.startswith("0::"))
    uid = "0c1e3f3a_2b6d_4f6a_9d3e_7a2b1c0d9e8f"
    # What a user may build under their delegated user@UID.service: a pod's names, deeper down.
    base = os.path.join(root, "rdmascope-hostile.slice")
    delegated = os.path.join(base, "user-65534.slice", f"kubepods-burstable-pod{uid}.slice",
                             "cri-containerd-" + "a" * 64 + ".scope")
    os.makedirs(delegated)
    try:
        with open(os.path.join(delegated, "cgroup.procs"), "w", encoding="ascii") as f:
            f.write(ctx.victim.pid)
        args = exporter_args(ctx.dir, ["--collector.workload",
                                       "--collector.workload.cri-endpoint=none"])
        with harness.Exporter(ctx.binary, args, timeout=20) as exporter:
            samples, _ = scrape(exporter, ctx.failures, "scrape with a delegated cgroup")
            info = [dict(k) for k in harness.series(samples, "rdma_process_workload_info",
                                                    pid=ctx.victim.pid)]
            ctx.expect("victim described", len(info), 1)
            ctx.expect("no pod from a delegated cgroup", [i.get("pod_uid") for i in info], [None])
            ctx.expect("no container either", [i.get("container_id") for i in info], [None])
    finally:
        with open(os.path.join(root, home.lstrip("/"), "cgroup.procs"), "w",
                  encoding="ascii") as f:
            f.write(ctx.victim.pid)
        for directory, _, _ in sorted(os.walk(base), key=lambda entry: -len(entry[0])):
            os.rmdir(directory)


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}


class Context:
    pass


def main(case, binary, workload, library, preload):
    if os.geteuid() != 0:
        print("SKIP: the hostile tier runs the exporter as root and attackers as nobody")
        return harness.SKIP
    check = harness.Checker()
    ctx = Context()
    ctx.binary, ctx.failures, ctx.expect = binary, check.failures, check.expect
    ctx.dir = shared_stats_dir()
    with harness.reachable_copy(workload) as workload_copy, \
            harness.reachable_copy(library) as library_copy, \
            harness.reachable_copy(preload) as preload_copy:
        ctx.victim = Victim(workload_copy, library_copy, preload_copy, ctx.dir)
        try:
            CASES[case](ctx)
        finally:
            ctx.victim.stop()
            shutil.rmtree(ctx.dir, ignore_errors=True)
    for failure in ctx.failures:
        print("FAIL:", failure)
    return 1 if ctx.failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:6]))
