#!/usr/bin/env python3
"""--web.config.file end to end, with curl (OpenSSL) against rdmascope (libmicrohttpd/GnuTLS):
TLS 1.0/1.1 refused and 1.2/1.3 served by default; no/wrong/right password 401/401/200 on
every path (landing page, metrics, debug routes, unknown paths, other methods); the configured
headers on every response; client certificates per client_auth_type and client_allowed_sans;
the certificate and key given inline (`cert`, `key`); rate_limit's 429 on every path.
Certificates are made with the openssl CLI in a temporary directory.

Usage: web_security.py RDMASCOPE. Exit 77 (skip) without curl or openssl."""

import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402

# bcrypt of "secret" at cost 4 (tests/unit/web_config_test.cc uses the same).
SECRET_HASH = "$2b$04$gzNiwl/0J/QZFXK4QTrkQeyszaFLw8sVUhzUoTeq2/GDAJjdOfEVm"
HEADERS = {"X-Frame-Options": "deny", "Strict-Transport-Security": "max-age=31536000",
           "X-Content-Type-Options": "nosniff"}
# Every kind of route: the landing page, metrics (GET and HEAD), the debug and doctor routes
# (whatever they answer when authorised, it must be 401 without), an unknown path, and a
# method that gets 405.
PATHS = [("GET", "/"), ("GET", "/metrics"), ("HEAD", "/metrics"), ("GET", "/debug/mr/stacks"),
         ("GET", "/doctor"), ("GET", "/runbook"),
         ("GET", "/no/such/path"), ("POST", "/metrics")]


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_certs(d):
    """A CA; a server certificate for 127.0.0.1; a client certificate from the CA with SAN
    client.example, one from the CA with another SAN, and a self-signed one with the allowed
    SAN (not trusted)."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
            "-subj", "/CN=rdmascope-test-ca", cwd=d)

    def signed(name, ext):
        openssl("req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj",
                f"/CN={name}", cwd=d)
        with open(os.path.join(d, f"{name}.ext"), "w") as f:
            f.write(ext)
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                "-CAcreateserial", "-out", f"{name}.crt", "-days", "2", "-extfile",
                f"{name}.ext", cwd=d)

    signed("server", "subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    signed("client", "subjectAltName=DNS:client.example\nextendedKeyUsage=clientAuth\n")
    signed("other", "subjectAltName=DNS:other.example\nextendedKeyUsage=clientAuth\n")
    # Every SAN kind exporter-toolkit compares; its CN (/CN=kinds) must never count.
    signed("kinds", "subjectAltName=email:prom@example.org,URI:spiffe://cluster.local/prom,"
                    "IP:10.1.2.3,IP:::ffff:10.9.8.7\nextendedKeyUsage=clientAuth\n")
    openssl("req", "-x509", *ec, "-keyout", "rogue.key", "-out", "rogue.crt", "-days", "2",
            "-subj", "/CN=rogue", "-addext", "subjectAltName=DNS:client.example", cwd=d)


def write_config(d, name, tls_extra="", users=True, headers=True):
    lines = ["tls_server_config:", "  cert_file: server.crt", "  key_file: server.key"]
    lines += ["  " + line for line in tls_extra.splitlines()]
    if users:
        lines += ["basic_auth_users:", f"  alice: '{SECRET_HASH}'"]
    if headers:
        lines += ["http_server_config:", "  headers:"]
        lines += [f"    {k}: '{v}'" for k, v in HEADERS.items()]
    path = os.path.join(d, name)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


class Curl:
    def __init__(self, d, port):
        self.d, self.port = d, port

    def __call__(self, path="/metrics", method="GET", user=None, cert=None, tls=None,
                 seclevel0=False):
        """(status or None if no HTTP answer, {header: value}, curl exit code)."""
        cmd = ["curl", "-s", "-o", "/dev/null", "-D", "-", "-m", "20",
               "--cacert", os.path.join(self.d, "ca.crt")]
        cmd += ["-I"] if method == "HEAD" else ["-X", method]
        if user:
            cmd += ["-u", user]
        if cert:
            cmd += ["--cert", os.path.join(self.d, f"{cert}.crt"),
                    "--key", os.path.join(self.d, f"{cert}.key")]
        if tls:
            cmd += [f"--tlsv{tls}", "--tls-max", tls]
        if seclevel0:
            # OpenSSL 3 refuses TLS 1.0/1.1 itself at its default security level: lower it, so
            # that a refusal can only come from the server.
            cmd += ["--ciphers", "DEFAULT@SECLEVEL=0"]
        cmd.append(f"https://127.0.0.1:{self.port}{path}")
        out = subprocess.run(cmd, capture_output=True, text=True)
        status, headers = None, {}
        for line in out.stdout.splitlines():
            if line.startswith("HTTP/"):
                status, headers = int(line.split()[1]), {}
            elif ":" in line:
                key, _, value = line.partition(":")
                headers[key.strip()] = value.strip()
        return status, headers, out.returncode


def check(failures, what, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + what + (f" ({detail})" if detail else ""))
    if not ok:
        failures.append(what)


def serve(binary, sysfs, config):
    return harness.Exporter(binary, [f"--path.sysfs={sysfs}", "--web.threads=2",
                                     f"--web.config.file={config}"])


def main(binary):
    if shutil.which("curl") is None or shutil.which("openssl") is None:
        print("SKIP: needs curl and openssl")
        return harness.SKIP
    failures = []
    with tempfile.TemporaryDirectory(prefix="rdmascope-websec-") as d:
        make_certs(d)
        sysfs = os.path.join(d, "sys")
        os.mkdir(sysfs)

        # TLS + basic auth + headers, default versions.
        with serve(binary, sysfs, write_config(d, "auth.yml")) as exporter:
            curl = Curl(d, exporter.port)
            for version in ("1.0", "1.1"):
                status, _, rc = curl(user="alice:secret", tls=version, seclevel0=True)
                check(failures, f"TLS {version} refused", status is None and rc != 0,
                      f"status={status} curl={rc}")
            for version in ("1.2", "1.3"):
                status, _, rc = curl(user="alice:secret", tls=version)
                check(failures, f"TLS {version} served", status == 200, f"status={status}")
            for method, path in PATHS:
                for user, want in ((None, 401), ("alice:wrong", 401), ("bob:secret", 401),
                                   ("alice:secret", None)):
                    status, headers, _ = curl(path, method, user=user)
                    what = f"{method} {path} as {user or 'nobody'}"
                    if want is None:
                        check(failures, what + " is let through", status not in (None, 401),
                              f"status={status}")
                    else:
                        check(failures, what + " is 401 with WWW-Authenticate: Basic",
                              status == 401 and headers.get("WWW-Authenticate") == "Basic",
                              f"status={status}")
                    missing = [k for k, v in HEADERS.items() if headers.get(k) != v]
                    check(failures, what + " has the configured headers", not missing,
                          f"missing {missing}")
            # Health paths answer probes without credentials, with the configured headers;
            # a wrong password does not matter there either (issue 26 item 18).
            for path in ("/-/healthy", "/-/ready"):
                for user in (None, "alice:wrong"):
                    status, headers, _ = curl(path, "GET", user=user)
                    check(failures, f"GET {path} as {user or 'nobody'} is 200", status == 200,
                          f"status={status}")
                    check(failures, f"GET {path} has the configured headers",
                          all(headers.get(k) == v for k, v in HEADERS.items()), str(headers))
            status, _, _ = curl("/metrics", user="alice:secret")
            check(failures, "an authorised scrape is 200", status == 200, f"status={status}")
            status, _, _ = curl("/", user="alice:secret")
            check(failures, "an authorised landing page is 200", status == 200,
                  f"status={status}")

        # Control for the version checks above: the same TLS 1.0 request succeeds when the
        # configuration allows it, so the refusal came from the server's min_version.
        with serve(binary, sysfs, write_config(d, "tls10.yml", "min_version: TLS10",
                                               users=False, headers=False)) as exporter:
            status, _, rc = Curl(d, exporter.port)(tls="1.0", seclevel0=True)
            check(failures, "TLS 1.0 served when min_version is TLS10", status == 200,
                  f"status={status} curl={rc}")

        # Client certificates. None: no HTTP answer or a 403; either way no metrics.
        refused = (None, 403)
        cases = {
            "RequireAndVerifyClientCert\nclient_ca_file: ca.crt\n"
            "client_allowed_sans: [client.example]": {
                None: refused, "client": (200,), "rogue": refused, "other": refused},
            "VerifyClientCertIfGiven\nclient_ca_file: ca.crt": {
                None: (200,), "client": (200,), "other": (200,), "rogue": refused},
            "RequireAnyClientCert": {None: refused, "rogue": (200,)},
            # exporter-toolkit (web/tls_config.go VerifyPeerCertificate): with allowed SANs
            # Go checks any certificate sent, whatever the policy, and a client sending none
            # fails (rawCerts[0]); RequestClientCert does not verify the chain.
            "RequestClientCert\nclient_allowed_sans: [client.example]": {
                None: refused, "client": (200,), "rogue": (200,), "other": refused},
            "VerifyClientCertIfGiven\nclient_ca_file: ca.crt\n"
            "client_allowed_sans: [client.example]": {
                None: refused, "client": (200,), "other": refused, "rogue": refused},
            # DNS, e-mail, IP (Go's text: an IPv4-mapped address as a.b.c.d) and URI SANs.
            "RequireAndVerifyClientCert\nclient_ca_file: ca.crt\n"
            "client_allowed_sans: [prom@example.org]": {"kinds": (200,), "client": refused},
            "RequireAndVerifyClientCert\nclient_ca_file: ca.crt\n"
            "client_allowed_sans: ['spiffe://cluster.local/prom']": {"kinds": (200,)},
            "RequireAndVerifyClientCert\nclient_ca_file: ca.crt\n"
            "client_allowed_sans: [10.1.2.3]": {"kinds": (200,)},
            "RequireAndVerifyClientCert\nclient_ca_file: ca.crt\n"
            "client_allowed_sans: [10.9.8.7]": {"kinds": (200,)},
            "RequireAndVerifyClientCert\nclient_ca_file: ca.crt\n"
            "client_allowed_sans: [kinds]": {"kinds": refused},
            # [] is a set list that matches nothing.
            "RequireAndVerifyClientCert\nclient_ca_file: ca.crt\n"
            "client_allowed_sans: []": {"client": refused},
            # No certificate asked for: the list checks nothing (and the log says so).
            "NoClientCert\nclient_allowed_sans: [client.example]": {None: (200,)},
        }
        for n, (policy, expectations) in enumerate(cases.items()):
            config = write_config(d, f"mtls{n}.yml", "client_auth_type: " + policy,
                                  users=False, headers=False)
            name = policy.replace("\n", ", ")
            with serve(binary, sysfs, config) as exporter:
                curl = Curl(d, exporter.port)
                for cert, allowed in expectations.items():
                    status, _, rc = curl(cert=cert)
                    check(failures, f"{name}: client certificate {cert}: {allowed}",
                          status in allowed, f"status={status} curl={rc}")

        check_inline_and_rate_limit(binary, d, sysfs, failures)

    if failures:
        print(f"{len(failures)} failures")
        return 1
    return 0


def block(key, text):
    """`key: |` and the text, indented under tls_server_config."""
    return [f"  {key}: |"] + ["    " + line for line in text.splitlines()]


def check_inline_and_rate_limit(binary, d, sysfs, failures):
    """exporter-toolkit's inline `cert` and `key` (no file named: curl verifying the server
    against ca.crt proves they are what TLS serves), and rate_limit: a bucket of 3 shared by
    every request and path, then 429 "Too Many Requests" (Go's http.Error), before basic auth
    and without the configured headers, as in exporter-toolkit's webHandler."""
    texts = {}
    for name in ("server.crt", "server.key"):
        with open(os.path.join(d, name)) as f:
            texts[name] = f.read()
    lines = ["tls_server_config:", *block("cert", texts["server.crt"]),
             *block("key", texts["server.key"]),
             "rate_limit:", "  interval: 1h", "  burst: 3",
             "basic_auth_users:", f"  alice: '{SECRET_HASH}'",
             "http_server_config:", "  headers:", "    X-Frame-Options: deny"]
    config = os.path.join(d, "inline.yml")
    with open(config, "w") as f:
        f.write("\n".join(lines) + "\n")
    with serve(binary, sysfs, config) as exporter:
        curl = Curl(d, exporter.port)
        status, headers, rc = curl(user="alice:secret")
        check(failures, "inline cert and key: https verified against the CA, 200",
              status == 200 and headers.get("X-Frame-Options") == "deny",
              f"status={status} curl={rc}")
        status, _, _ = curl("/-/healthy")
        check(failures, "rate_limit: 2nd request (a health path) within the burst", status == 200,
              f"status={status}")
        status, _, _ = curl(user="alice:wrong")
        check(failures, "rate_limit: 3rd request within the burst (401: wrong password)",
              status == 401, f"status={status}")
        for method, path, user in (("GET", "/metrics", "alice:secret"), ("GET", "/-/healthy", None),
                                   ("GET", "/-/ready", None), ("GET", "/metrics", "alice:wrong"),
                                   ("HEAD", "/metrics", "alice:secret")):
            status, headers, _ = curl(path, method, user=user)
            what = f"rate_limit: {method} {path} as {user or 'nobody'} past the burst"
            check(failures, what + " is 429 without the configured headers",
                  status == 429 and "X-Frame-Options" not in headers
                  and "Retry-After" not in headers, f"status={status} headers={headers}")
        body = subprocess.run(
            ["curl", "-s", "-m", "20", "--cacert", os.path.join(d, "ca.crt"), "-u",
             "alice:secret", f"https://127.0.0.1:{exporter.port}/metrics"],
            capture_output=True, text=True).stdout
        check(failures, "rate_limit: the 429 body is Go's", body == "Too Many Requests\n",
              repr(body))
        logged = 'msg="rate limiter is enabled" burst=3 interval_seconds=3600' in exporter.read_log()
        check(failures, "rate_limit: the log says the limiter is on", logged,
              "" if logged else exporter.read_log()[-400:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
