#!/usr/bin/env python3
"""Hostile tier, output (issue 37 item 5): a process named with a terminal escape, a command
substitution, quotes and a newline (prctl PR_SET_NAME; the kernel's comm, 15 bytes at most)
registers memory through the libibverbs stand-in while `serve` runs. Every report doctor
makes of it must be safe to print and to paste:

- /doctor (JSON) and /doctor.html, `doctor --exporter URL` in text, JSON and HTML, and
  `doctor --exporter=none` (collecting here) in text: no raw ESC, DEL or C1 byte anywhere;
  the JSON parses and names the process; the HTML shows the escape as text (\\x1b);
- every fix line parses as shell (`sh -n`), and one carrying the name keeps it as one literal
  word: run through `sh -c 'printf ...'` it prints the name and runs nothing (no `uid=`);
- a report read from an exporter prints its fixes as comments naming the host (display only);
- /debug/mr/stacks and /debug/workloads (a second process named with ESC, CSI as C1 \xc2\x9b,
  DEL and a newline, in a cgroup whose systemd unit name holds ESC, C1 and DEL): no raw ESC,
  DEL or C1 byte; the JSON parses back to the exact names. Before the fix both served DEL
  and C1 raw (JSON allows them; nlohmann escapes C0 only).

Before the fix the text report printed the ESC raw (the terminal turned bold) and fixes put
names unquoted into shell lines. /metrics keeps answering throughout.

Usage: hostile_comm_output.py RDMASCOPE_BINARY FAKEVERBS_LIBRARY"""

import json
import os
import re
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "common"))
import cgroups  # noqa: E402
import harness  # noqa: E402
from named_registrar import NamedRegistrar  # noqa: E402

HOSTILE = b"\x1b[1m'$(id)\n\""  # 12 bytes: ESC, a quote, a command substitution, a newline
# 12 bytes: ESC's clear screen, CSI as C1 (U+009B), DEL, a newline. Not HOSTILE itself: doctor
# drops a fix line holding DEL or C1, and its fixes are what HOSTILE tests.
TERMINAL = b"\x1b[2J\xc2\x9b31m\x7f\nz"
# A systemd unit a tenant names (`systemd-run --unit`): /debug/workloads shows it.
UNIT = b"ev\x1b[2J\xc2\x9b31m\x7fil.scope"
RAW_CONTROL = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]|\xc2[\x80-\x9f]")


def fix_lines(text):
    """The commands of a text report's fix lines (a display-only one's after its comment)."""
    fixes = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("fix:"):
            fixes.append(line[len("fix:"):].strip())
    return fixes


def main(binary, library):
    if os.geteuid() != 0:
        print("SKIP: BPF and the hostile tier need root")
        return harness.SKIP
    failures = []

    def expect(what, ok, detail=""):
        print(("ok" if ok else "FAIL") + f": {what}" + ("" if ok else f": {detail!r}"[:600]))
        if not ok:
            failures.append(what)

    def no_raw_controls(what, data):
        found = RAW_CONTROL.findall(data)
        expect(f"{what}: no raw control byte", not found, found[:5])

    def check_fixes(what, text, display_only):
        for fix in fix_lines(text):
            if display_only:
                expect(f"{what}: fix is a comment naming its host", fix.startswith("# on "), fix)
                continue
            parsed = subprocess.run(["sh", "-n", "-c", fix], capture_output=True, text=True)
            expect(f"{what}: fix parses as shell: {fix}", parsed.returncode == 0, parsed.stderr)
            if "$(id)" in fix:
                words = fix.split(" ", 1)[1]
                out = subprocess.run(["sh", "-c", "printf '<%s>' " + words],
                                     capture_output=True, text=True).stdout
                expect(f"{what}: the name stays one literal word", "uid=" not in out and
                       "$(id)" in out, out)

    def check_debug_pages(url, child, terminal, in_unit):
        """/debug/mr/stacks and /debug/workloads: the names served with no raw control byte,
        and parsed back exactly."""
        pages = {}
        for path in ("/debug/mr/stacks", f"/debug/mr/stacks?pid={terminal.pid}",
                     "/debug/workloads"):
            with urllib.request.urlopen(url + path, timeout=30) as answer:
                body = answer.read()
            no_raw_controls(path, body)
            pages[path] = json.loads(body)
        stacks = {p["pid"]: p for p in pages["/debug/mr/stacks"]["processes"]}
        comms = {pid: stacks[pid]["comm"] if pid in stacks else None
                 for pid in (child.pid, terminal.pid)}
        expect("/debug/mr/stacks: the exact names",
               comms == {child.pid: HOSTILE.decode(), terminal.pid: TERMINAL.decode()}, comms)
        only = pages[f"/debug/mr/stacks?pid={terminal.pid}"]["processes"]
        expect("/debug/mr/stacks?pid: the exact name",
               [p["comm"] for p in only] == [TERMINAL.decode()], only)
        if not in_unit:
            print("note: no cgroup2 mount: no tenant-named unit in /debug/workloads")
            return
        unit = {"systemd_unit": UNIT.decode()}
        expect("/debug/mr/stacks: the exact unit",
               stacks.get(terminal.pid, {}).get("workload") == unit, stacks.get(terminal.pid))
        workloads = {p["pid"]: p["workload"] for p in pages["/debug/workloads"]["processes"]}
        expect("/debug/workloads: the exact unit", workloads.get(terminal.pid) == unit,
               workloads)

    args = ["--collector.disable-defaults", "--collector.mr", f"--probe.library={library}",
            "--collector.mr.leak-age=0s"]
    # TERMINAL's process runs in a cgroup of a tenant-named unit (UNIT), made for the test (which
    # stays where it is): the exporter, in the test's cgroup namespace, reads it as a systemd
    # unit at any depth.
    mount = cgroups.cgroup2_mount()
    tenant = cgroups.Root(mount, f"rdmascope-hostile-comm-{os.getpid()}") if mount else None
    try:
        in_unit = cgroups.joiner(tenant.make(UNIT.decode())) if tenant else None
        with harness.Exporter(binary, [*args, "--collector.workload"]) as exporter:
            with NamedRegistrar(library, HOSTILE) as child, \
                    NamedRegistrar(library, TERMINAL, preexec_fn=in_unit) as terminal:
                expect("children registered", child.ready and terminal.ready)
                expect("the kernel keeps the hostile name", child.kernel_comm() == HOSTILE)
                expect("the kernel keeps the terminal name", terminal.kernel_comm() == TERMINAL)
                url = f"http://127.0.0.1:{exporter.port}"
                # The series take a scrape or two to show the registration.
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline and not all(
                        f'pid="{pid}"' in exporter.metrics() for pid in (child.pid, terminal.pid)):
                    time.sleep(0.2)

                with urllib.request.urlopen(url + "/doctor", timeout=30) as answer:
                    body = answer.read()
                no_raw_controls("/doctor", body)
                report = json.loads(body)
                named = [f for f in report["findings"]
                         if any(HOSTILE.decode() in value for _, value in f["scope"].items())
                         or HOSTILE.decode() in f["advice"] + f["observed"]]
                expect("/doctor names the process (JSON keeps the name exactly)", bool(named))
                request = urllib.request.Request(url + "/doctor", headers={"Accept": "text/html"})
                with urllib.request.urlopen(request, timeout=30) as answer:
                    page = answer.read()
                no_raw_controls("/doctor.html", page)
                expect("/doctor.html shows the escape as text", b"\\x1b[1m" in page)

                for fmt in ("text", "json", "html"):
                    run = subprocess.run([binary, "doctor", f"--exporter={url}", f"--format={fmt}"],
                                         capture_output=True, timeout=60)
                    no_raw_controls(f"doctor --exporter --format={fmt}", run.stdout)
                    if fmt == "text":
                        check_fixes("doctor --exporter", run.stdout.decode(), display_only=True)
                        expect("doctor --exporter says its fixes are display only",
                               b"printed as comments" in run.stdout, run.stdout[:300])
                        expect("doctor --exporter shows the name escaped",
                               b"\\x1b[1m'$(id)\\x0a\"" in run.stdout, run.stdout[-2000:])

                run = subprocess.run([binary, "doctor", "--exporter=none", "--window=0s", *args],
                                     capture_output=True, timeout=120)
                no_raw_controls("doctor (collecting here)", run.stdout)
                check_fixes("doctor (collecting here)", run.stdout.decode(), display_only=False)
                check_debug_pages(url, child, terminal, tenant is not None)
                status, _ = exporter.get("/metrics", timeout=5)
                expect("/metrics answers", status == 200)
            expect("exporter alive", exporter.proc.poll() is None)
    finally:
        if tenant is not None:
            tenant.close()
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
