#!/usr/bin/env python3
"""/runbook on the real binary (issue 26 item 17): every runbook_url fragment of the rules in
rules/ is the id of an element of the served page (the anchors GitHub gives docs/runbook.md's
headings), every heading of docs/runbook.md is on the page, no link on it points at a file of
docs/ (dead on an exporter), the landing page links to it, /runbook/ lands on it, and it is
behind basic auth like /metrics (not like /-/healthy).

Usage: runbook.py RDMASCOPE_BINARY SOURCE_DIR"""

import base64
import glob
import html.parser
import os
import re
import sys
import tempfile
import urllib.error
import urllib.request

import yaml

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402

# bcrypt of "secret" at cost 4 (as in web_security.py).
SECRET_HASH = "$2b$04$gzNiwl/0J/QZFXK4QTrkQeyszaFLw8sVUhzUoTeq2/GDAJjdOfEVm"


class Page(html.parser.HTMLParser):
    """The ids, hrefs and heading texts of a page."""

    def __init__(self):
        super().__init__()
        self.ids, self.hrefs, self.headings, self._heading = [], [], [], None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.append(attrs["id"])
        if tag == "a" and "href" in attrs:
            self.hrefs.append(attrs["href"])
        if re.fullmatch(r"h[1-6]", tag):
            self._heading = ""

    def handle_data(self, data):
        if self._heading is not None:
            self._heading += data

    def handle_endtag(self, tag):
        if re.fullmatch(r"h[1-6]", tag) and self._heading is not None:
            self.headings.append(self._heading)
            self._heading = None


def get(port, path, user=None):
    """(status, headers, body, final URL), redirects followed."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
    if user:
        request.add_header("Authorization", "Basic " + base64.b64encode(user.encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=20) as resp:
            return resp.status, resp.headers, resp.read().decode(), resp.url
    except urllib.error.HTTPError as err:
        return err.code, err.headers, err.read().decode(), err.url


def runbook_fragments(source):
    """{alert: fragment} of every alerting rule under rules/ (None: no fragment)."""
    fragments = {}
    for path in sorted(glob.glob(os.path.join(source, "rules", "*.yml"))):
        with open(path) as f:
            doc = yaml.safe_load(f) or {}
        for group in doc.get("groups", []):
            for rule in group.get("rules", []):
                url = rule.get("annotations", {}).get("runbook_url")
                if "alert" in rule and url is not None:
                    fragments[rule["alert"]] = url.partition("#")[2] or None
    return fragments


def check(failures, what, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + what + (f" ({detail})" if detail else ""))
    if not ok:
        failures.append(what)


def main(binary, source):
    failures = []
    with tempfile.TemporaryDirectory(prefix="rdmascope-runbook-") as d:
        sysfs = os.path.join(d, "sys")
        os.mkdir(sysfs)
        with harness.Exporter(binary, [f"--path.sysfs={sysfs}"]) as exporter:
            status, headers, body, _ = get(exporter.port, "/runbook")
            check(failures, "GET /runbook is 200 text/html",
                  status == 200 and headers.get("Content-Type", "").startswith("text/html"),
                  f"status={status}")
            page = Page()
            page.feed(body)

            fragments = runbook_fragments(source)
            check(failures, "the rules have runbook_urls (at least 40 alerts)",
                  len(fragments) >= 40, f"{len(fragments)}")
            for alert, fragment in sorted(fragments.items()):
                check(failures, f"{alert}: runbook_url #{fragment} is an id on /runbook",
                      fragment is not None and fragment in page.ids)
            check(failures, "ids are unique", len(page.ids) == len(set(page.ids)))

            # The page is this tree's runbook: each of its headings, in order.
            with open(os.path.join(source, "docs", "runbook.md")) as f:
                written = [line.lstrip("#").strip() for line in f
                           if re.match(r"#{1,6} ", line)]
            check(failures, "every heading of docs/runbook.md is on the page, in order",
                  [h.strip() for h in page.headings] == [w.replace("`", "") for w in written],
                  f"{len(page.headings)} on the page, {len(written)} written")
            dead = [h for h in page.hrefs if re.match(r"^(?![a-z][a-z0-9+.-]*:|/|#)", h)]
            check(failures, "no relative link (to a file of docs/) on the page", not dead,
                  str(dead))

            _, _, landing, _ = get(exporter.port, "/")
            check(failures, "the landing page links to /runbook", 'href="/runbook"' in landing)
            status, _, slash_body, url = get(exporter.port, "/runbook/")
            check(failures, "/runbook/ lands on /runbook",
                  status == 200 and url.endswith("/runbook") and slash_body == body,
                  f"status={status} url={url}")

        config = os.path.join(d, "web.yml")
        with open(config, "w") as f:
            f.write(f"basic_auth_users:\n  alice: '{SECRET_HASH}'\n")
        with harness.Exporter(binary, [f"--path.sysfs={sysfs}",
                                       f"--web.config.file={config}"]) as exporter:
            for user, want in ((None, 401), ("alice:wrong", 401), ("alice:secret", 200)):
                status, _, _, _ = get(exporter.port, "/runbook", user)
                check(failures, f"/runbook as {user or 'nobody'} is {want}", status == want,
                      f"status={status}")
            status, _, _, _ = get(exporter.port, "/-/healthy")
            check(failures, "control: /-/healthy needs no credentials", status == 200,
                  f"status={status}")

    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
