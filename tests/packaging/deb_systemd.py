#!/usr/bin/env python3
"""Boots a real systemd (systemd-nspawn -b) on a fresh Debian bookworm tree with the .deb
installed by apt (deb_tree.py, as deb_chroot.py), and checks the packaged service from inside:
- rdmascope.service starts at boot (enabled by the postinst) and a scrape of :9879/metrics
  answers with the package's version;
- it runs as user rdmascope, its effective capabilities are the serving set docs/security.md
  documents, with no ambient, inheritable or other permitted capability left;
- in its mount namespace /usr, /etc and /var/lib are read-only even for root, /run/rdmascope
  is writable (ProtectSystem=strict, ReadWritePaths=);
- `systemctl reload` re-reads --web.config.file (a header changes; a bad file is an error and
  the old one stays); `kill -9` gets it restarted; `systemctl start` returning means the port
  answers (Type=notify, READY=1); `systemctl stop` ends it with exit status 0, no SIGKILL;
- its journal lines are logfmt with the PRIORITY of their level (error 3, warn 4, info 6,
  debug 7: the `<N>` prefix on the journal stream), so `journalctl -p warning` shows errors.

Usage: deb_systemd.py DEB WORK_DIR   (root; RDMASCOPE_MIRROR overrides the mirror)"""

import json
import os
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
from harness import SKIP  # noqa: E402
import machine as this_machine  # noqa: E402  (main has a `machine` of its own)

import deb_tree  # noqa: E402

SECURITY_MD = os.path.join(HERE, "..", "..", "docs", "security.md")
MACHINE = "rdmascope-systemd-test"
URL = "http://127.0.0.1:9879/metrics"
PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# <linux/capability.h>
CAPABILITIES = {"CAP_DAC_READ_SEARCH": 2, "CAP_NET_BIND_SERVICE": 10, "CAP_NET_ADMIN": 12,
                "CAP_SYS_PTRACE": 19, "CAP_SYS_ADMIN": 21, "CAP_PERFMON": 38, "CAP_BPF": 39}
# syslog priorities of the levels (sd-daemon.h SD_ERR, SD_WARNING, SD_INFO, SD_DEBUG).
PRIORITIES = {"error": 3, "warn": 4, "info": 6, "debug": 7}
# One of the headers exporter-toolkit lets a web config set, with its two allowed values.
WEB_CONFIG = "http_server_config:\n  headers:\n    X-Frame-Options: {}\n"


def serving_capabilities():
    """The default serving set of docs/security.md ("by default **`CAP_... CAP_...`**")."""
    with open(SECURITY_MD) as f:
        text = f.read()
    match = re.search(r"by default \*\*`([A-Z_ ]+)`\*\*", text)
    if not match:
        raise RuntimeError(f"{SECURITY_MD}: no 'by default **`CAP_...`**' serving set")
    return sorted(match.group(1).split())


def mask(names):
    return sum(1 << CAPABILITIES[name] for name in names)


class Machine:
    """The booted container. Every command runs in all of its namespaces and its root."""

    def __init__(self, root, log_path):
        self.root = root
        self.log = open(log_path, "w")
        # SYSTEMD_SECCOMP=0: no nspawn filter of its own, the unit's SystemCallFilter= is the
        # one that applies. The capabilities the unit hands to the service must be in the
        # container's bounding set (nspawn's default lacks BPF and PERFMON).
        self.nspawn = subprocess.Popen(
            ["systemd-nspawn", "--register=no", "--keep-unit", "--private-network",
             f"--machine={MACHINE}", "--console=read-only",
             "--capability=CAP_BPF,CAP_PERFMON,CAP_NET_ADMIN", "-D", root, "-b"],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT,
            env=dict(os.environ, SYSTEMD_SECCOMP="0"), start_new_session=True)
        self.leader = None

    def find_leader(self, timeout):
        """The container's PID 1 as the host sees it: systemd, a child of systemd-nspawn."""
        def leader():
            if self.nspawn.poll() is not None:
                raise RuntimeError(f"systemd-nspawn exited with {self.nspawn.returncode}")
            for task in os.listdir(f"/proc/{self.nspawn.pid}/task"):
                with open(f"/proc/{self.nspawn.pid}/task/{task}/children") as f:
                    for pid in f.read().split():
                        try:
                            with open(f"/proc/{pid}/comm") as comm:
                                if comm.read().strip() == "systemd":
                                    return int(pid)
                        except OSError:
                            pass
            return None
        self.leader = wait_for(leader, timeout, "the container's systemd")

    def run(self, *cmd, timeout=60, input=None):
        return subprocess.run(["nsenter", f"--target={self.leader}", "--all", "--root", "--wd",
                               "env", "-i", PATH, "LC_ALL=C.UTF-8", *cmd],
                              capture_output=True, text=True, timeout=timeout, input=input)

    def sh(self, script, timeout=60):
        return self.run("sh", "-c", script, timeout=timeout)

    def show(self, *properties):
        out = self.run("systemctl", "show", "rdmascope.service",
                       *[f"--property={p}" for p in properties]).stdout
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)

    def scrape(self, headers=False):
        return self.run("curl", "--silent", "--show-error", "--fail", "--max-time", "10",
                        *(["--dump-header", "-"] if headers else []), URL, timeout=30)

    def journal(self):
        """The service's own lines: (MESSAGE, PRIORITY)."""
        out = self.run("journalctl", "--unit=rdmascope.service", "--output=json", "--no-pager",
                       "--output-fields=MESSAGE,PRIORITY,SYSLOG_IDENTIFIER").stdout
        lines = []
        for line in out.splitlines():
            entry = json.loads(line)
            if entry.get("SYSLOG_IDENTIFIER") != "rdmascope":
                continue  # systemd's own lines about the unit
            message = entry.get("MESSAGE", "")
            if isinstance(message, list):  # not UTF-8: an array of bytes
                message = bytes(message).decode("utf-8", "replace")
            lines.append((message, int(entry.get("PRIORITY", -1))))
        return lines

    def stop(self):
        """Powers the container off (SIGTERM to nspawn asks its systemd to halt); SIGKILL
        to the container's PID 1 and to nspawn if that takes more than 30 s."""
        if self.nspawn.poll() is None:
            self.nspawn.send_signal(signal.SIGTERM)
            try:
                self.nspawn.wait(timeout=30)
            except subprocess.TimeoutExpired:
                print("container did not halt within 30 s: killed")
                if self.leader:
                    try:
                        os.kill(self.leader, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                os.killpg(self.nspawn.pid, signal.SIGKILL)
                self.nspawn.wait(timeout=30)
        self.log.close()


def wait_for(predicate, timeout, what):
    """Polls `predicate` until it returns something true; fails naming `what` after
    `timeout` seconds (a bound on a wait, not a timed assertion)."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout} s")
        time.sleep(0.2)


def status_fields(machine, pid):
    out = machine.run("cat", f"/proc/{pid}/status").stdout
    return dict(re.findall(r"^(\w+):\s*(.*)$", out, re.M))


def check(machine, version, uid, failures):
    want = lambda cond, what: cond or failures.append(what)
    root = machine.root

    # --- Started at boot, scraped.
    state = machine.show("ActiveState", "SubState", "Type", "MainPID", "NRestarts")
    print("at boot:", state)
    want(state.get("ActiveState") == "active" and state.get("Type") == "notify",
         "rdmascope.service active (Type=notify) after boot")
    scrape = machine.scrape()
    want(scrape.returncode == 0 and "rdmascope_build_info{" in scrape.stdout
         and f'version="{version}"' in scrape.stdout,
         f"scrape at boot answers with rdmascope_build_info version {version}")
    print(f"scrape at boot: curl {scrape.returncode}, {len(scrape.stdout.splitlines())} lines",
          scrape.stderr.strip())

    # --- User and capabilities of the running service.
    pid = int(state.get("MainPID", "0"))
    if pid <= 1:
        failures.append(f"no main process: {state}")
        return
    status = status_fields(machine, pid)
    print("service /proc/PID/status:", {k: v for k, v in status.items()
                                        if k.startswith(("Uid", "Gid", "Cap"))})
    want(status.get("Uid", "").split() == [str(uid)] * 4, f"runs as user rdmascope ({uid})")
    serving = serving_capabilities()
    expected = mask(serving)
    for field, value in (("CapEff", expected), ("CapPrm", expected), ("CapAmb", 0),
                         ("CapInh", 0)):
        have = int(status.get(field, "-1"), 16) if field in status else None
        want(have == value, f"{field} {have if have is None else hex(have)} is {hex(value)}"
             f" ({' '.join(serving) if value else 'nothing'})")

    # --- ProtectSystem=strict: root in the service's mount namespace cannot write.
    for directory, writable in (("/usr", False), ("/etc", False), ("/var/lib", False),
                                ("/run/rdmascope", True)):
        probe = f"{directory}/.rdmascope-write-test"
        write = machine.run("nsenter", f"--target={pid}", "--mount", "sh", "-c",
                            f"touch {probe} && rm -f {probe}")
        print(f"write to {directory} in the service's namespace: rc {write.returncode}",
              write.stderr.strip())
        if writable:
            want(write.returncode == 0, f"{directory} writable for the service")
        else:
            want(write.returncode != 0 and "Read-only file system" in write.stderr,
                 f"{directory} read-only for the service")
        # And the write did not happen in the container's own view either.
        want(not os.path.exists(root + probe), f"{probe} left behind")

    # --- systemctl reload: a new header served; a bad file is an error, the old one stays.
    def header(value):
        answer = machine.scrape(headers=True)
        return re.search(rf"^X-Frame-Options: {value}\r?$", answer.stdout, re.M | re.I)

    with open(os.path.join(root, "etc/rdmascope/web.yml"), "w") as f:
        f.write(WEB_CONFIG.format("sameorigin"))
    reload = machine.run("systemctl", "reload", "rdmascope.service", timeout=60)
    print("systemctl reload:", reload.returncode, reload.stderr.strip())
    want(reload.returncode == 0, "systemctl reload exits 0")
    try:
        wait_for(lambda: header("sameorigin"), 20, "the reloaded header")
    except TimeoutError as e:
        failures.append(f"reload: {e}")
    with open(os.path.join(root, "etc/rdmascope/web.yml"), "w") as f:
        f.write("no_such_key: 1\n")
    reload = machine.run("systemctl", "reload", "rdmascope.service", timeout=60)
    want(reload.returncode == 0, "systemctl reload of a bad file exits 0 (the service stays)")
    try:
        wait_for(lambda: any("web config not reloaded" in m for m, _ in machine.journal()), 20,
                 "the journal line of the bad web config")
    except TimeoutError as e:
        failures.append(str(e))
    want(header("sameorigin"), "after a bad reload the previous web config still serves")
    want(machine.show("ActiveState").get("ActiveState") == "active", "active after reloads")

    # --- Journal: logfmt, and each line's PRIORITY is its level's.
    lines = machine.journal()
    seen = set()
    for message, priority in lines:
        level = re.match(r"ts=\S+ level=(\w+) msg=", message)
        if not level:
            failures.append(f"journal line is not logfmt: {message!r}")
            continue
        seen.add(level.group(1))
        if PRIORITIES.get(level.group(1)) != priority:
            failures.append(f"PRIORITY {priority} for level={level.group(1)}: {message!r}")
    print(f"journal: {len(lines)} lines of the service, levels {sorted(seen)}")
    # The capability broker starts under the unit's sandbox (SystemCallFilter=, the service's
    # user) holding the two capabilities the serving process no longer has, all layers entered.
    broker = [m for m, _ in lines if 'msg="capability broker started"' in m]
    print("broker:", broker)
    want(len(broker) == 1 and "holds=cap_dac_read_search,cap_sys_ptrace" in broker[0]
         and "refused=none" in broker[0], "the capability broker started, fully confined")
    for level in ("error", "info", "debug"):
        want(level in seen, f"a level={level} line in the journal")
    warnings = machine.run("journalctl", "--unit=rdmascope.service", "--priority=warning",
                           "--output=cat", "--no-pager").stdout
    print("journalctl -p warning:\n" + warnings.strip())
    want("web config not reloaded" in warnings, "journalctl -p warning shows the error")
    want("level=info" not in warnings, "journalctl -p warning shows no info line")
    with open(os.path.join(root, "etc/rdmascope/web.yml"), "w") as f:
        f.write(WEB_CONFIG.format("deny"))

    # --- kill -9: restarted (Restart=on-failure, RestartSec=5s), serving again.
    before = machine.show("MainPID", "NRestarts")
    if int(before["MainPID"]) <= 1:  # `kill 0` would kill this test's process group
        failures.append(f"no main process to kill: {before}")
        return
    machine.sh(f"kill -KILL {int(before['MainPID'])}")  # procps's kill is not Essential
    try:
        after = wait_for(lambda: (lambda s: s if s.get("ActiveState") == "active" and
                                  s.get("MainPID") not in ("0", before["MainPID"]) else None)(
            machine.show("ActiveState", "MainPID", "NRestarts")), 40, "restart after kill -9")
        print("after kill -9:", before, "->", after)
        want(int(after["NRestarts"]) == int(before["NRestarts"]) + 1, "NRestarts counts it")
        want(machine.scrape().returncode == 0, "scrape after the restart")
    except TimeoutError as e:
        failures.append(str(e))

    # --- Readiness: `systemctl start` returns once the port answers (no retry, no wait).
    for attempt in range(3):
        start = machine.sh("systemctl stop rdmascope.service && systemctl start "
                           f"rdmascope.service && curl --silent --show-error --fail "
                           f"--max-time 10 --output /dev/null {URL}", timeout=90)
        print(f"stop, start, scrape at once ({attempt + 1}/3):", start.returncode,
              start.stderr.strip())
        want(start.returncode == 0, "the port answers as soon as systemctl start returns")

    # --- systemctl stop: SIGTERM, exit status 0, no SIGKILL.
    stop = machine.run("systemctl", "stop", "rdmascope.service", timeout=60)
    result = machine.show("ActiveState", "Result", "ExecMainCode", "ExecMainStatus")
    print("systemctl stop:", stop.returncode, result)
    # ExecMainCode is the waitid() si_code: 1 CLD_EXITED, 2 CLD_KILLED.
    want(stop.returncode == 0 and result.get("Result") == "success" and
         result.get("ExecMainCode") == "1" and result.get("ExecMainStatus") == "0",
         "systemctl stop: exited with status 0")
    unit_log = machine.run("journalctl", "--unit=rdmascope.service", "--output=cat",
                           "--no-pager").stdout
    want("shutting down" in unit_log, "the service logged its shutdown")
    want(not re.search(r"timed out|Killing process|SIGKILL", unit_log),
         "no stop timeout, no SIGKILL")


def main(deb, work):
    if os.geteuid() != 0:
        print("skipped: needs root (mmdebstrap, systemd-nspawn)")
        return SKIP
    this_machine.require("mmdebstrap", "nspawn")
    version = deb_tree.package_version(deb)
    root = os.path.join(work, "root")
    os.makedirs(work, exist_ok=True)
    failures = []
    machine = None
    try:
        deb_tree.build(deb, root, include=["systemd", "curl"])
        # The service's flags: debug lines in the journal, a web config to reload.
        os.makedirs(os.path.join(root, "etc/rdmascope"), exist_ok=True)
        with open(os.path.join(root, "etc/rdmascope/web.yml"), "w") as f:
            f.write(WEB_CONFIG.format("deny"))
        with open(os.path.join(root, "etc/default/rdmascope"), "a") as f:
            f.write('RDMASCOPE_ARGS="--web.config.file=/etc/rdmascope/web.yml '
                    '--log.level=debug"\n')
        # Bounded stops: a service that ignores SIGTERM fails in 20 s, not systemd's 90.
        dropin = os.path.join(root, "etc/systemd/system/rdmascope.service.d")
        os.makedirs(dropin, exist_ok=True)
        with open(os.path.join(dropin, "test.conf"), "w") as f:
            f.write("[Service]\nTimeoutStopSec=20s\n")
        with open(os.path.join(root, "etc/passwd")) as f:
            uid = next(int(line.split(":")[2]) for line in f if line.startswith("rdmascope:"))

        machine = Machine(root, os.path.join(work, "console.log"))
        machine.find_leader(30)
        # systemctl needs PID 1's private socket, which exists once systemd has set up.
        wait_for(lambda: os.path.exists(f"/proc/{machine.leader}/root/run/systemd/private"), 60,
                 "the container's systemd private socket")
        running = machine.run("systemctl", "is-system-running", "--wait", timeout=90)
        print("systemctl is-system-running:", running.stdout.strip())
        if running.stdout.strip() != "running":
            print(machine.run("systemctl", "--failed", "--no-pager").stdout)
        check(machine, version, uid, failures)
    except (subprocess.SubprocessError, OSError, RuntimeError, TimeoutError, KeyError,
            ValueError) as e:
        failures.append(f"{type(e).__name__}: {e}")
    finally:
        if machine:
            if machine.leader:
                try:
                    print("journal of rdmascope.service:\n" + machine.run(
                        "journalctl", "--unit=rdmascope.service", "--no-pager",
                        "--output=short-monotonic", timeout=30).stdout)
                except subprocess.SubprocessError as e:
                    print("no journal:", e)
            machine.stop()
        deb_tree.remove(root)

    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
