#!/usr/bin/env python3
"""Slow clients (issue 18 item 2): 200 connections that connect and send nothing, or send a
request a byte at a time and never finish it (slowloris), do not stop scrapes, cost bounded
memory, and are closed after --web.idle-timeout of silence.

1. 100 idle + 100 half-sent connections (the half-sent ones keep dripping a header byte, so the
   idle timeout never closes them); meanwhile 20 scrapes on new connections all answer 200
   within DEADLINE (a deadline for a blocked server, not a speed target).
2. Three such rounds, connections closed after each: RSS after the third round is within
   RSS_BOUND_KIB of RSS after the first (no growth per slow client), and the whole growth over
   the idle exporter stays under 200 x libmicrohttpd's 32 KiB connection pool plus slack.
3. --web.idle-timeout=1: a connection that sends nothing is closed by the server (EOF), and
   so is one that stopped half-way through its request.

Usage: slow_clients.py RDMASCOPE_BINARY FIXTURES_DIR"""

import os
import socket
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402

DEADLINE = 10          # seconds: a hung server fails instead of hanging the test
SLOW = 200             # slow connections per round
POOL_KIB = 32          # libmicrohttpd's default MHD_OPTION_CONNECTION_MEMORY_LIMIT
RSS_BOUND_KIB = 2048   # growth allowed from round 1 to round 3 (allocator noise)


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class SlowClients:
    """SLOW connections: half of them silent, half dripping a request that never ends."""

    def __init__(self, port):
        self.sockets = []
        self.stop = threading.Event()
        for i in range(SLOW):
            s = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE)
            if i % 2:
                s.sendall(b"GET /metrics HTTP/1.1\r\nHost: slow\r\nX-Slow: ")
            self.sockets.append(s)
        self.dripper = threading.Thread(target=self.drip)
        self.dripper.start()

    def drip(self):
        # One byte per half-sent connection every 0.5 s: never silent for --web.idle-timeout.
        while not self.stop.wait(0.5):
            for s in self.sockets[1::2]:
                try:
                    s.send(b"a")
                except OSError:
                    pass

    def close(self):
        self.stop.set()
        self.dripper.join()
        for s in self.sockets:
            s.close()


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=DEADLINE) as r:
        return r.status, r.read().decode()


def slowloris_rounds(binary, sysfs, failures):
    with harness.Exporter(binary, ["--collector.disable-defaults", "--collector.rdma",
                                   f"--path.sysfs={sysfs}"]) as exporter:
        for _ in range(5):
            scrape(exporter.port)  # allocations of a first scrape are not the clients' cost
        idle_rss = rss_kib(exporter.proc.pid)
        after = []
        for round_ in range(3):
            clients = SlowClients(exporter.port)
            try:
                for i in range(20):
                    try:
                        status, body = scrape(exporter.port)
                    except OSError as err:
                        failures.append(f"round {round_}: scrape {i} with {SLOW} slow "
                                        f"connections open failed: {err!r}")
                        break
                    if status != 200 or "rdma_port_info" not in body:
                        failures.append(f"round {round_}: scrape {i}: HTTP {status}")
                    elif i == 0:
                        harness.keep_scrape(body)
                after.append(rss_kib(exporter.proc.pid))
            finally:
                clients.close()
        if exporter.proc.poll() is not None:
            failures.append("exporter died")
            return
        growth = max(after) - idle_rss
        print(f"RSS idle {idle_rss} KiB, with {SLOW} slow connections after rounds 1-3: "
              f"{after} KiB")
        if after[2] - after[0] > RSS_BOUND_KIB:
            failures.append(f"RSS grew from round 1 to 3 by {after[2] - after[0]} KiB "
                            f"(> {RSS_BOUND_KIB}): memory per slow client is not returned")
        if growth > SLOW * POOL_KIB + 4096:
            failures.append(f"RSS grew {growth} KiB with {SLOW} slow connections, more than "
                            f"{SLOW} x {POOL_KIB} KiB pools + 4 MiB")
        if not failures:
            print(f"ok: 3 rounds of {SLOW} idle/half-sent connections, 60 scrapes all 200, "
                  f"RSS +{growth} KiB at most, flat across rounds")


def closed_by_server(s):
    """True once the server closes the connection; False if it is still open at DEADLINE."""
    s.settimeout(DEADLINE)
    try:
        while True:
            data = s.recv(4096)
            if not data:
                return True
    except socket.timeout:
        return False
    except ConnectionResetError:
        return True


def idle_timeout(binary, sysfs, failures):
    with harness.Exporter(binary, ["--collector.disable-defaults", "--collector.rdma",
                                   f"--path.sysfs={sysfs}", "--web.idle-timeout=1"]) as exporter:
        silent = socket.create_connection(("127.0.0.1", exporter.port), timeout=DEADLINE)
        half = socket.create_connection(("127.0.0.1", exporter.port), timeout=DEADLINE)
        half.sendall(b"GET /metrics HTTP/1.1\r\nHost: stalled\r\n")
        for name, s in (("silent", silent), ("half-sent", half)):
            if closed_by_server(s):
                print(f"ok: {name} connection closed by the server (--web.idle-timeout=1)")
            else:
                failures.append(f"{name} connection still open {DEADLINE} s later with "
                                f"--web.idle-timeout=1")
            s.close()


def main(binary, fixtures):
    failures = []
    with tempfile.TemporaryDirectory(prefix="rdmascope-slow-") as sysfs:
        harness.materialise_tree(os.path.join(fixtures, "sysfs", "rdma_hosts.tree"), sysfs)
        slowloris_rounds(binary, sysfs, failures)
        idle_timeout(binary, sysfs, failures)
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
