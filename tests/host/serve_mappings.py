#!/usr/bin/env python3
"""Host tier (issue 17): what `rdmascope serve` keeps mapped after scrapes. The libraries only
other subcommands need are loaded by those alone: libprotobuf (librdmascope_pprof.so,
`profile`), libcurl (`doctor --exporter`), libarchive (a `.tar.gz` capture); libpfm4 is loaded
while the perf collector resolves event names and unloaded after. None may be in serve's
/proc/PID/maps after start-up and scrapes. Also prints the RSS and the largest mappings (the
figures of docs/benchmarks.md, "Memory"), asserting none.
And `profile` without librdmascope_pprof.so (the binary copied alone): a clear error, the other
outputs written, no profile.pb.gz (a stale one removed) and none named in the summary.

    serve_mappings.py RDMASCOPE [SCRAPES]
"""

import collections
import http.client
import glob
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
import harness  # noqa: E402

FORBIDDEN = ("libprotobuf", "libpfm", "libcurl", "librdmascope_pprof", "libarchive")


def smaps_by_mapping(pid):
    """Rss KiB per mapped file (anonymous mappings as [anon], [heap], [stack])."""
    rss = collections.Counter()
    name = None
    with open(f"/proc/{pid}/smaps", encoding="utf-8", errors="replace") as f:
        for line in f:
            fields = line.split()
            if "-" in fields[0] and len(fields) >= 5 and not fields[0].endswith(":"):
                name = os.path.basename(fields[5]) if len(fields) > 5 else "[anon]"
            elif fields[0] == "Rss:":
                rss[name] += int(fields[1])
    return rss


def profile_without_pprof_library(binary):
    """Returns a list of failures (empty: passed, or not checkable on this host)."""
    if glob.glob("/usr/lib/*/rdmascope/librdmascope_pprof.so") + \
            glob.glob("/usr/local/lib*/rdmascope/librdmascope_pprof.so"):
        print("note: an installed librdmascope_pprof.so exists: the missing-library case is skipped")
        return []
    failures = []
    with tempfile.TemporaryDirectory(prefix="rdmascope-nopprof-") as tmp:
        alone = os.path.join(tmp, "rdmascope")
        shutil.copy(binary, alone)
        out = os.path.join(tmp, "out")
        os.mkdir(out)
        open(os.path.join(out, "profile.pb.gz"), "wb").close()  # a previous run's
        run = subprocess.run([alone, "profile", "--quiet", "--duration", "5s", "--output", out,
                              "--", "sleep", "0.3"], capture_output=True, text=True, timeout=120)
        written = sorted(os.listdir(out))
        print(f"profile without its pprof library: exit {run.returncode}, wrote {written}")
        checks = [
            ("exit status 0", run.returncode == 0),
            ("the error says why", "librdmascope_pprof.so found neither" in run.stderr),
            ("profile.json and profile.html written",
             {"profile.json", "profile.html"} <= set(written)),
            ("no profile.pb.gz", "profile.pb.gz" not in written),
            ("the summary names no profile.pb.gz", "profile.pb.gz," not in run.stdout),
        ]
        for what, ok in checks:
            print(("ok" if ok else "FAIL") + f": profile without librdmascope_pprof.so: {what}")
            if not ok:
                failures.append(what)
        if failures:
            print(run.stdout, run.stderr)
    return failures


def main(binary, scrapes):
    if os.geteuid() != 0:
        print("SKIP: serve with its default collectors (probes, perf) needs root")
        return harness.SKIP
    with harness.Exporter(binary, timeout=60) as exporter:  # probes load slowly on a busy host
        pid = exporter.proc.pid
        conn = http.client.HTTPConnection("127.0.0.1", exporter.port, timeout=30)
        for _ in range(scrapes):  # one keep-alive connection, gzip: as Prometheus scrapes
            conn.request("GET", "/metrics", headers={"Accept-Encoding": "gzip"})
            resp = conn.getresponse()
            resp.read()
            if resp.status != 200:
                print(f"FAIL: scrape returned HTTP {resp.status}")
                return 1
        conn.close()
        with open(f"/proc/{pid}/maps", encoding="utf-8") as f:
            paths = sorted({line.split()[5] for line in f if len(line.split()) > 5})
        with open(f"/proc/{pid}/smaps_rollup", encoding="utf-8") as f:
            rollup = f.read()
        by_mapping = smaps_by_mapping(pid)
    print(f"after {scrapes} scrapes:")
    print("\n".join("  " + line for line in rollup.splitlines()
                    if line.split(":")[0] in ("Rss", "Anonymous", "Private_Dirty",
                                              "Private_Clean", "Shared_Clean")))
    print("largest mappings (Rss KiB):")
    for name, kib in by_mapping.most_common(12):
        print(f"  {kib:6d} {name}")
    mapped = [p for p in paths if any(lib in os.path.basename(p) for lib in FORBIDDEN)]
    for path in mapped:
        print(f"FAIL: serve maps {path}")
    if not mapped:
        print("ok: no " + ", ".join(FORBIDDEN) + " in serve's mappings")
    failures = profile_without_pprof_library(binary)
    return 1 if mapped or failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1000))
