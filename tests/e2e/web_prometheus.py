#!/usr/bin/env python3
"""A real Prometheus scrapes rdmascope over TLS with basic auth and a CA it was given
(`up == 1`), and a second job with the wrong password gets `up == 0`: the web config works
with the client operators use, not only with curl.

Usage: web_prometheus.py RDMASCOPE. Exit 77 (skip) without prometheus or openssl."""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402

SECRET = "$2b$04$gzNiwl/0J/QZFXK4QTrkQeyszaFLw8sVUhzUoTeq2/GDAJjdOfEVm"  # bcrypt of "secret"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def query(port, expr):
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return json.load(resp)["data"]["result"]
    except OSError:
        return None


def main(binary):
    prometheus = shutil.which("prometheus")
    if prometheus is None or shutil.which("openssl") is None:
        print("SKIP: needs prometheus and openssl")
        return harness.SKIP
    with tempfile.TemporaryDirectory(prefix="rdmascope-webprom-") as d:
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:P-256", "-nodes", "-keyout", "server.key", "-out",
                        "server.crt", "-days", "2", "-subj", "/CN=localhost", "-addext",
                        "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                       cwd=d, check=True, capture_output=True)
        with open(os.path.join(d, "web.yml"), "w") as f:
            f.write("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
                    f"basic_auth_users:\n  prometheus: '{SECRET}'\n")
        sysfs = os.path.join(d, "sys")
        os.mkdir(sysfs)
        with harness.Exporter(binary, [f"--path.sysfs={sysfs}",
                                       f"--web.config.file={os.path.join(d, 'web.yml')}"]) as ex:
            target = f"127.0.0.1:{ex.port}"
            job = ("  - job_name: {name}\n    scheme: https\n    scrape_interval: 1s\n"
                   "    tls_config: {{ca_file: {ca}}}\n"
                   "    basic_auth: {{username: prometheus, password: {password}}}\n"
                   "    static_configs: [{{targets: ['{target}']}}]\n")
            ca = os.path.join(d, "server.crt")
            with open(os.path.join(d, "prometheus.yml"), "w") as f:
                f.write("global: {evaluation_interval: 1s}\nscrape_configs:\n" +
                        job.format(name="good", ca=ca, password="secret", target=target) +
                        job.format(name="bad", ca=ca, password="wrong", target=target))
            port = free_port()
            log = open(os.path.join(d, "prometheus.log"), "w")
            prom = subprocess.Popen(
                [prometheus, f"--config.file={os.path.join(d, 'prometheus.yml')}",
                 f"--storage.tsdb.path={os.path.join(d, 'data')}",
                 f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=log)
            try:
                # Until both jobs have a sample of `up` (a deadline only against hanging).
                deadline = time.monotonic() + 120
                up = {}
                while len(up) < 2 and time.monotonic() < deadline and prom.poll() is None:
                    result = query(port, "up") or []
                    up = {r["metric"]["job"]: r["value"][1] for r in result}
                    time.sleep(0.2)
            finally:
                prom.terminate()
                prom.wait(timeout=30)
                log.close()
            print("up:", up)
            if up.get("good") != "1" or up.get("bad") != "0":
                with open(os.path.join(d, "prometheus.log")) as f:
                    print(f.read()[-3000:])
                print("FAIL: want up{job=good} == 1 and up{job=bad} == 0")
                return 1
    print("ok   Prometheus scrapes over TLS with basic auth: up == 1; wrong password: up == 0")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
