#!/usr/bin/env python3
"""Hostile and malformed HTTP requests never crash or wedge the exporter: after each one it
still answers a scrape. Also: concurrent scrapes all succeed, files are never served."""

import os
import socket
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402


def raw(port, payload, read=True, timeout=5):
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(payload)
        if not read:
            return b""
        chunks = []
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
        except (socket.timeout, ConnectionResetError):
            pass
        return b"".join(chunks)


def status_of(response):
    try:
        return int(response.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return None


def main(binary):
    failures = []
    with tempfile.TemporaryDirectory() as sysfs, harness.Exporter(
            binary, [f"--path.sysfs={sysfs}", "--web.threads=2"]) as exporter:
        port = exporter.port
        cases = {
            "garbage request line": b"\x00\xff\x16\x03\x01 hello\r\n\r\n",
            "tls client hello": bytes.fromhex("16030100a5010000a10303") + os.urandom(64),
            "huge header": b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 200000 +
                           b"\r\n\r\n",
            "huge url": b"GET /" + b"a" * 100000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
            "path traversal": b"GET /../../../../etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n",
            "encoded traversal": b"GET /%2e%2e/%2e%2e/etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n",
            "post to metrics": b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
            "delete landing": b"DELETE / HTTP/1.1\r\nHost: x\r\n\r\n",
            "post to debug endpoint": b"POST /debug/mr/stacks HTTP/1.1\r\nHost: x\r\n"
                                      b"Content-Length: 0\r\n\r\n",
            "negative length": b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
            "http/0.9": b"GET /metrics\r\n\r\n",
            "bad version": b"GET /metrics HTTP/9.9\r\nHost: x\r\n\r\n",
            "header without colon": b"GET /metrics HTTP/1.1\r\nHost x\r\n\r\n",
            "half request then close": b"GET /metr",
        }
        for name, payload in cases.items():
            response = raw(port, payload, read=(name != "half request then close"))
            status = status_of(response)
            if b"root:" in response:
                failures.append(f"{name}: served a file")
            if name in ("delete landing", "post to debug endpoint") and status != 405:
                failures.append(f"{name}: status {status}, want 405")
            code, body = exporter.get("/metrics")
            if code != 200 or "rdmascope_build_info" not in body:
                failures.append(f"after {name}: scrape failed with {code}")
            else:
                print(f"ok: {name} -> {status}; exporter still serves")

        # Idle connections hold no thread (tests/e2e/idle_connections.py goes further).
        idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(4)]
        results = []

        def scrape():
            try:
                results.append(exporter.get("/metrics", timeout=30)[0])
            except Exception as err:  # noqa: BLE001 - any failure is a test failure
                results.append(repr(err))

        threads = [threading.Thread(target=scrape) for _ in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for s in idle:
            s.close()
        if results.count(200) != 16:
            failures.append(f"concurrent scrapes with idle connections: {results}")
        else:
            print("ok: 16 concurrent scrapes with 4 idle connections all returned 200")
        if exporter.proc.poll() is not None:
            failures.append("exporter died")
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
