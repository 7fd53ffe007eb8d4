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
- a report read from an exporter prints its fixes as comments naming the host (display only).

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
import harness  # noqa: E402
from named_registrar import NamedRegistrar  # noqa: E402

HOSTILE = b"\x1b[1m'$(id)\n\""  # 12 bytes: ESC, a quote, a command substitution, a newline
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

    args = ["--collector.disable-defaults", "--collector.mr", f"--probe.library={library}",
            "--collector.mr.leak-age=0s"]
    with harness.Exporter(binary, args) as exporter:
        with NamedRegistrar(library, HOSTILE) as child:
            expect("child registered", child.ready)
            expect("the kernel keeps the hostile name", child.kernel_comm() == HOSTILE)
            url = f"http://127.0.0.1:{exporter.port}"
            # The series take a scrape or two to show the registration.
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and f'pid="{child.pid}"' not in exporter.metrics():
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
            status, _ = exporter.get("/metrics", timeout=5)
            expect("/metrics answers", status == 200)
        expect("exporter alive", exporter.proc.poll() is None)
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
