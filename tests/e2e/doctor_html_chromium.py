#!/usr/bin/env python3
"""`serve`'s /doctor in a real browser (Debian's chromium, headless), issue 29: a browser
asking for /doctor gets the HTML report (chromium sends Accept: text/html first), which renders
with a table per area, a row per finding classed by severity (mlx5_1's SymbolErrorCounter over
its threshold in the fixture tree is a warn), checks linked to the runbook, and no console
message. curl's */* still gets the JSON.

Usage: doctor_html_chromium.py RDMASCOPE FIXTURES"""

import json
import os
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402
from profile_html_chromium import Dom, chromium, chromium_binary  # noqa: E402


class Links(Dom):
    """Dom, plus the href of every link."""

    def __init__(self):
        super().__init__()
        self.hrefs = []

    def handle_starttag(self, tag, attrs):
        super().handle_starttag(tag, attrs)
        if tag == "a":
            self.hrefs.append(dict(attrs).get("href") or "")


def main(binary, fixtures):
    browser = chromium_binary()
    if browser is None:
        print("SKIP: no chromium")
        return harness.SKIP
    check = harness.Checker()
    with tempfile.TemporaryDirectory(prefix="rdmascope-doctor-html-") as sysfs:
        harness.materialise_tree(os.path.join(fixtures, "sysfs", "rdma_hosts.tree"), sysfs)
        with harness.Exporter(binary, ["--collector.disable-defaults", "--collector.rdma",
                                       f"--path.sysfs={sysfs}"]) as exporter:
            url = f"http://127.0.0.1:{exporter.port}/doctor"
            # The exporter's loopback address is the one name the browser may reach (the
            # helper's rules fail every other; a later --host-resolver-rules wins).
            dom_text, console = chromium(
                browser, url, "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
                "--dump-dom")
            dom = Links()
            dom.feed(dom_text)
            check.expect("the page's heading", dom.text["h1"].strip(), "rdmascope doctor")
            check.expect("a table per area", dom.tags.get("table", 0) >= 2, True)
            check.expect("the IBA error is a warn row", dom.classes.get("tr.warn", 0) >= 1, True)
            check.expect("checks link their runbook section",
                         any(h.startswith("/runbook#") for h in dom.hrefs), True)
            check.expect("no console message", console, [])
            # Anything else keeps the JSON (curl, doctor --exporter, scripts).
            with urllib.request.urlopen(url + "?window=0s", timeout=30) as answer:
                body = json.loads(answer.read())
                check.expect("urllib's default Accept gets JSON", body.get("schema_version"), 1)
            status, landing = exporter.get("/")
            check.expect("the landing page links the page", 'href="/doctor.html"' in landing, True)
    return check.result()


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
