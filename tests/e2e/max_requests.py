#!/usr/bin/env python3
"""--web.max-requests (issue 18 item 2): past the limit of scrapes in flight, a scrape gets 503
at once with a body naming the flag, counted in rdmascope_http_requests_rejected_total.

Scrapes are held in flight by a seam (hold_open.c, LD_PRELOAD): the rdma collector's open of
mlx5_0/fw_ver blocks until the test releases it, as a slow driver attribute would. With
--web.threads=4 --web.max-requests=2 and 2 scrapes held, a third scrape (on a free thread) must
be refused, the landing page still served; once released, both held scrapes answer 200 and the
next scrape is served again. The exporter before the flag existed refuses to start with it.

Usage: max_requests.py RDMASCOPE_BINARY FIXTURES_DIR HOLD_OPEN_SO"""

import os
import re
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402

# Deadlines for a server that hangs, not speed targets: each wait normally ends at once.
DEADLINE = 20
BODY = "too many concurrent scrapes (limit 2, --web.max-requests)\n"


def get(port, path):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=DEADLINE) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()
    except OSError as err:
        return None, repr(err)


def wait_for(predicate, what, failures):
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    failures.append(f"gave up waiting ({DEADLINE} s) for {what}")
    return False


def main(binary, fixtures, hold_so):
    failures = []
    with tempfile.TemporaryDirectory(prefix="rdmascope-maxreq-") as work:
        sysfs = os.path.join(work, "sys")
        harness.materialise_tree(os.path.join(fixtures, "sysfs", "rdma_hosts.tree"), sysfs)
        fifo = os.path.join(work, "hold")
        os.mkfifo(fifo)
        env = {"LD_PRELOAD": hold_so, "RDMASCOPE_HOLD_MATCH": "/mlx5_0/fw_ver",
               "RDMASCOPE_HOLD_FIFO": fifo}
        with harness.Exporter(binary, ["--collector.disable-defaults", "--collector.rdma",
                                       f"--path.sysfs={sysfs}", "--web.threads=4",
                                       "--web.max-requests=2"], env=env) as exporter:
            open(fifo + ".armed", "w").close()
            held = [None, None]

            def scrape(i):
                held[i] = get(exporter.port, "/metrics")

            # One after the other: a thread of the pool may accept several pending connections
            # when it wakes, and two scrapes sent together were seen to queue on one thread.
            threads = []
            ok = True
            for i in range(2):
                threads.append(threading.Thread(target=scrape, args=(i,)))
                threads[-1].start()
                entered = lambda: exporter.read_log().count("rdmascope-hold: entered") > i  # noqa
                ok = ok and wait_for(entered, f"scrape {i + 1} held in the rdma collector",
                                     failures)
            if ok:
                status, body = get(exporter.port, "/metrics")
                if status == 503 and body == BODY:
                    print("ok: third scrape with 2 in flight: 503,", body.strip())
                else:
                    failures.append(f"third scrape with 2 in flight: {status} {body[:200]!r}, "
                                    f"want 503 {BODY!r}")
                status, _ = get(exporter.port, "/")
                if status != 200:
                    failures.append(f"landing page while 2 scrapes are held: {status}")
            # Release: the held opens return; nothing is held any more.
            open(fifo + ".released", "w").close()
            with open(fifo, "w"):
                pass
            for t in threads:
                t.join(DEADLINE * 2)
            if any(t.is_alive() for t in threads) or [h and h[0] for h in held] != [200, 200]:
                failures.append(f"held scrapes after release: {[h and h[0] for h in held]}")
            status, body = get(exporter.port, "/metrics")
            if status != 200:
                failures.append(f"scrape after release: {status} {body[:200]!r}")
            else:
                harness.keep_scrape(body)
                samples = harness.parse(body)
                rejected = harness.value(samples, "rdmascope_http_requests_rejected_total",
                                         reason="max_requests")
                if rejected != 1:
                    failures.append(f"rdmascope_http_requests_rejected_total"
                                    f"{{reason=\"max_requests\"}} = {rejected}, want 1")
                else:
                    print("ok: after release the scrape is served; 1 refusal counted")
            log = exporter.read_log()
            if not re.search(r'msg="scrape refused: too many concurrent scrapes" limit=2', log):
                failures.append("no log line for the refusal:\n" + log[-2000:])
            if exporter.proc.poll() is not None:
                failures.append("exporter died")
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3]))
