#!/usr/bin/env python3
"""Scrapes never wait on idle connections (issue 11 item 10).

CivetWeb, used until then, parked one of its --web.threads workers on every open keep-alive
connection for up to 60 s: four clients that kept their connection after a scrape (Prometheus
does; HA pairs, federation and agents add up) stopped every other scrape for more than 15 s.

1. With --web.threads=4: 16 keep-alive connections that each completed a scrape and stay
   open, plus 4 connections that sent half a request; then a scrape on a new connection must
   answer within REQUEST_TIMEOUT (a deadline for a blocked server, not a speed target), and
   every idle connection must still be usable for a second scrape (keep-alive kept, not cut).
2. With --web.threads=1: two clients scraping back to back, each on its own keep-alive
   connection, both get every answer.
"""

import http.client
import os
import socket
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402

REQUEST_TIMEOUT = 5  # seconds; the old server blocked such a scrape for 15 s and more


def scrape(conn):
    """One GET /metrics on an open keep-alive connection: (status, body)."""
    conn.request("GET", "/metrics")
    resp = conn.getresponse()
    return resp.status, resp.read().decode()


def keep_alive_connection(port):
    # auto_open=0: a connection the server closed raises instead of quietly reconnecting.
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT)
    conn.connect()
    conn.auto_open = 0
    return conn


def idle_connections_do_not_block(binary, sysfs, failures):
    with harness.Exporter(binary, ["--collector.disable-defaults", "--collector.rdma",
                                   f"--path.sysfs={sysfs}", "--web.threads=4"]) as exporter:
        idle = []
        for i in range(16):
            conn = keep_alive_connection(exporter.port)
            idle.append(conn)
            try:
                status, body = scrape(conn)
            except (socket.timeout, OSError, http.client.HTTPException) as err:
                # The old server already blocked here, once every worker held an idle one.
                failures.append(f"scrape on connection {i} with {i} idle keep-alive "
                                f"connections open did not complete within {REQUEST_TIMEOUT} s: "
                                f"{err!r}")
                break
            if status != 200 or "rdma_port_info" not in body:
                failures.append(f"idle connection {i}: first scrape gave {status}")
        half_sent = []
        for _ in range(4):
            s = socket.create_connection(("127.0.0.1", exporter.port), timeout=REQUEST_TIMEOUT)
            s.sendall(b"GET /metr")
            half_sent.append(s)

        fresh = http.client.HTTPConnection("127.0.0.1", exporter.port, timeout=REQUEST_TIMEOUT)
        try:
            status, body = scrape(fresh)
            if status == 200 and "rdma_port_info" in body:
                harness.keep_scrape(body)
                print("ok: a new connection's scrape answered with 16 idle keep-alive and "
                      "4 half-sent connections open (--web.threads=4)")
            else:
                failures.append(f"scrape beside idle connections: HTTP {status}")
        except (socket.timeout, OSError, http.client.HTTPException) as err:
            failures.append(f"scrape beside idle connections did not complete within "
                            f"{REQUEST_TIMEOUT} s: {err!r}")
        finally:
            fresh.close()

        reused = 0
        for i, conn in enumerate(idle if not failures else []):
            try:
                status, _ = scrape(conn)
                reused += status == 200
            except (socket.timeout, OSError, http.client.HTTPException) as err:
                failures.append(f"idle connection {i}: second scrape failed: {err!r}")
        for conn in idle:
            conn.close()
        for s in half_sent:
            s.close()
        if reused == len(idle):
            print(f"ok: all {reused} idle keep-alive connections served a second scrape")
        if exporter.proc.poll() is not None:
            failures.append("exporter died")


def two_keep_alive_clients(binary, sysfs, failures):
    with harness.Exporter(binary, ["--collector.disable-defaults", "--collector.rdma",
                                   f"--path.sysfs={sysfs}", "--web.threads=1"]) as exporter:
        clients = [keep_alive_connection(exporter.port) for _ in range(2)]
        answered = [0, 0]
        broken = False
        try:
            for _ in range(5):
                for i, conn in enumerate(clients):
                    status, body = scrape(conn)
                    answered[i] += status == 200 and "rdma_port_info" in body
        except (socket.timeout, OSError, http.client.HTTPException) as err:
            broken = True
            failures.append(f"back-to-back keep-alive scrapes, answered {answered} of 5 each, "
                            f"then: {err!r}")
        for conn in clients:
            conn.close()
        if answered == [5, 5]:
            print("ok: two keep-alive clients scraping back to back got 5 answers each "
                  "(--web.threads=1)")
        elif not broken:
            failures.append(f"back-to-back keep-alive scrapes answered {answered}, want [5, 5]")


def main(binary, fixtures):
    failures = []
    with tempfile.TemporaryDirectory(prefix="rdmascope-idle-") as sysfs:
        harness.materialise_tree(os.path.join(fixtures, "sysfs", "rdma_hosts.tree"), sysfs)
        idle_connections_do_not_block(binary, sysfs, failures)
        two_keep_alive_clients(binary, sysfs, failures)
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
