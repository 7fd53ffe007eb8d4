#!/usr/bin/env python3
"""The HTML report of `rdmascope profile` in a real browser (Debian's chromium, headless):
it renders, the plots are present (SVG elements counted in the DOM chromium built, and their
colours found in a screenshot), the hostile strings of the profiled process stayed text, and
the browser logged no console message (a blocked script or fetch would log one: the page
forbids both with a Content-Security-Policy, and has neither).

Usage: profile_html_chromium.py PROFILE_WRITER_SAMPLE
Set RDMASCOPE_PROFILE_SCREENSHOT=PATH to keep the screenshot (docs/profile.md's example)."""

import html.parser
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

SKIP = 77
HOSTILE_COMM = "<script>alert(1)</script>\ufffd'\"&"


def chromium_binary():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def chromium(binary, url, *args):
    """Runs headless chromium once; returns (stdout, console lines of stderr)."""
    cmd = [binary, "--headless", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
           "--enable-logging=stderr", "--v=0",
           # Any network access fails loudly instead of reaching out: the report needs none.
           "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9",
           *args, url]
    if os.geteuid() == 0:
        cmd.insert(1, "--no-sandbox")  # chromium refuses to run as root with its sandbox
    with tempfile.TemporaryDirectory(prefix="profout-chromium-") as profile_dir:
        cmd.insert(1, f"--user-data-dir={profile_dir}")
        # A guard against a hung browser, not an assertion on time.
        done = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=240)
    if done.returncode != 0:
        sys.exit(f"chromium failed ({done.returncode}): {done.stderr[-2000:]}")
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    return done.stdout, console


class Dom(html.parser.HTMLParser):
    """Counts elements (by tag, and svg by class) and keeps the text of h1 and title."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags = {}
        self.svg_classes = {}
        self.classes = {}
        self.text = {"h1": "", "title": ""}
        self.stack = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags[tag] = self.tags.get(tag, 0) + 1
        css = attrs.get("class") or ""
        if tag == "svg":
            self.svg_classes[css] = self.svg_classes.get(css, 0) + 1
        for name in css.split():
            key = f"{tag}.{name}"
            self.classes[key] = self.classes.get(key, 0) + 1
        self.stack.append(tag)

    def handle_endtag(self, tag):
        while self.stack and self.stack.pop() != tag:
            pass

    def handle_data(self, data):
        # Only the document's own title, not the SVGs' <title> tooltips.
        if self.stack and self.stack[-1] == "h1":
            self.text["h1"] += data
        if self.stack and self.stack[-1] == "title" and "svg" not in self.stack:
            self.text["title"] += data


def png_pixels(path):
    """(width, height, rows of RGB(A) tuples) of an 8-bit, non-interlaced PNG (chromium's)."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        filter_type = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            up_left = previous[i - channels] if i >= channels else 0
            if filter_type == 1:
                line[i] = (line[i] + left) & 0xFF
            elif filter_type == 2:
                line[i] = (line[i] + up) & 0xFF
            elif filter_type == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif filter_type == 4:
                p = left + up - up_left
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - up_left)
                predictor = left if pa <= pb and pa <= pc else (up if pb <= pc else up_left)
                line[i] = (line[i] + predictor) & 0xFF
        rows.append(line)
        previous = line
    return width, height, channels, rows


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    binary = chromium_binary()
    if not binary:
        print("SKIP: no chromium (apt-get install chromium)")
        return SKIP
    failures = []
    with tempfile.TemporaryDirectory(prefix="profout-html-") as out:
        subprocess.run([sys.argv[1], out], check=True)
        url = "file://" + os.path.join(out, "profile.html")

        dom_text, console = chromium(binary, url, "--dump-dom")
        if console:
            failures.append("console messages: " + "\n".join(console))
        dom = Dom()
        dom.feed(dom_text)
        print("elements:", {k: dom.tags.get(k, 0) for k in ("svg", "rect", "polyline", "circle",
                                                            "table", "script", "img")})
        print("svg by class:", dom.svg_classes)
        expected_svgs = {"flame": 2, "plot": 3}  # outstanding + registered; MR, CQ, NIC
        if dom.svg_classes != expected_svgs:
            failures.append(f"svg elements {dom.svg_classes}, expected {expected_svgs}")
        # Outstanding bytes: the root, __libc_start_call_main;main;leak_buffers,
        # main;{hostile, [libfoo.so.1]} and [no call stack]: 8 frames. Registered bytes: the
        # root, the leak's 3 and start_thread;worker_loop;post_buffers: 7 (main's 12 KiB is
        # under 0.1 px of 412 MiB, left out as flamegraph.pl leaves out its narrow frames).
        if dom.classes.get("g.frame", 0) != 15:
            failures.append(f"{dom.classes.get('g.frame', 0)} flame frames, expected 15")
        if dom.tags.get("polyline", 0) != 3 or dom.classes.get("line.limit", 0) != 1:
            failures.append("expected 3 series and 1 limit line (the CQ's capacity)")
        for tag in ("script", "img", "iframe", "link"):
            if dom.tags.get(tag):
                failures.append(f"a <{tag}> element exists: a hostile name became markup")
        want_title = f"rdmascope profile: {HOSTILE_COMM} (pid 4242)"
        for element in ("h1", "title"):
            if dom.text[element] != want_title:
                failures.append(f"<{element}> is {dom.text[element]!r}, expected {want_title!r}")

        shot = os.path.join(out, "report.png")
        _, console = chromium(binary, url, f"--screenshot={shot}", "--window-size=1200,4000")
        if console:
            failures.append("console messages (screenshot): " + "\n".join(console))
        width, height, channels, rows = png_pixels(shot)
        flame = series = limit = 0
        for line in rows:
            for x in range(0, len(line), channels):
                r, g, b = line[x], line[x + 1], line[x + 2]
                flame += r >= 205 and b < 55 and g < 230          # flamegraph.pl's palette
                series += (r, g, b) == (0x1f, 0x77, 0xb4)         # the timelines' blue
                limit += (r, g, b) == (0xd6, 0x27, 0x28)          # the dashed limit line
        print(f"screenshot {width}x{height}: flame pixels {flame}, series {series}, "
              f"limit {limit}")
        # Lower bounds far below what the page paints: drawn at all, not how large.
        if flame < 10000:
            failures.append(f"the flame graphs did not paint ({flame} pixels of their colours)")
        if series < 500 or limit < 100:
            failures.append(f"the timelines did not paint (series {series}, limit {limit})")
        keep = os.environ.get("RDMASCOPE_PROFILE_SCREENSHOT")
        if keep:
            shutil.copy(shot, keep)
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
