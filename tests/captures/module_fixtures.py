"""The module EEPROM fixtures of the unit tests (tests/unit/module_eeprom_fixtures.h: each
module written byte by byte as its spec lays it out, every value worked by hand there), read
from that header so that the vendor matrix's captures carry the very bytes the decoder's tests
check, not a copy that could drift.

The header's fixtures are functions of `m.Put(i2c, page, offset, {bytes...}[, bank])`,
`m.Put(i2c, page, offset, std::vector<uint8_t>(count, byte))`, `m.Text(i2c, page, offset, width,
"text")` and `for (int lane = 0; lane < N; ++lane) { ... }` around Puts whose offsets use
`lane`. Anything else in a fixture is refused (a new construct needs a reader here, not a
silent skip)."""

import os
import re

HEADER = os.path.join("tests", "unit", "module_eeprom_fixtures.h")

# Integer expressions the fixtures use: numbers (hex or decimal), `lane`, + and *.
EXPRESSION = re.compile(r"^[0-9a-fA-Fx+* lane()]+$")


class FixtureError(Exception):
    pass


def _int(text, lane=None):
    text = text.strip()
    if not EXPRESSION.match(text) or ("lane" in text and lane is None):
        raise FixtureError(f"not an integer expression of the fixtures: {text!r}")
    return int(eval(text, {"__builtins__": {}}, {"lane": lane}))  # noqa: S307 (checked above)


def _split_args(text):
    """Top-level comma split (braces and parentheses kept whole)."""
    out, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c in "({":
            depth += 1
        elif c in ")}":
            depth -= 1
        elif c == "," and depth == 0:
            out.append(text[start:i])
            start = i + 1
    out.append(text[start:])
    return [a.strip() for a in out]


def _bytes(arg, lane):
    vector = re.fullmatch(r"std::vector<uint8_t>\((.+),(.+)\)", arg.replace(" ", ""))
    if vector:
        return [_int(vector.group(2), lane)] * _int(vector.group(1), lane)
    if arg.startswith("{") and arg.endswith("}"):
        return [_int(b, lane) for b in arg[1:-1].split(",") if b.strip()]
    raise FixtureError(f"not a byte list: {arg!r}")


def _statements(body):
    """(statement, lane range or None) of a fixture's body."""
    out = []
    pos = 0
    loop = re.compile(r"for \(int lane = 0; lane < (\d+); \+\+lane\) \{")
    while pos < len(body):
        match = loop.match(body, pos)
        if match:
            depth, end = 1, match.end()
            while depth and end < len(body):  # the loop's closing brace, past the byte lists'
                depth += {"{": 1, "}": -1}.get(body[end], 0)
                end += 1
            for statement in body[match.end():end - 1].split(";"):
                if statement.strip():
                    out.append((statement.strip(), range(int(match.group(1)))))
            pos = end
            while pos < len(body) and body[pos].isspace():
                pos += 1
            continue
        end = body.find(";", pos)
        if end < 0:
            break
        out.append((body[pos:end].strip(), None))
        pos = end + 1
        while pos < len(body) and body[pos].isspace():
            pos += 1
    return out


def _strip_comments(text):
    return re.sub(r"//[^\n]*", "", text)


def load(source, name):
    """{(i2c, page, bank): bytearray(256)} of fixture `name` (a function of the header)."""
    with open(os.path.join(source, HEADER), encoding="utf-8") as f:
        text = _strip_comments(f.read())
    match = re.search(r"inline FakeModule " + re.escape(name) +
                      r"\(\) \{\s*FakeModule m;(.*?)return m;\s*\}", text, re.S)
    if not match:
        raise FixtureError(f"{HEADER}: no fixture {name}()")
    pages = {}

    def page(i2c, number, bank=0):
        return pages.setdefault((i2c, number, bank), bytearray(256))

    for statement, lanes in _statements(match.group(1)):
        for lane in (lanes if lanes is not None else [None]):
            call = re.fullmatch(r"m\.(Put|Text)\((.*)\)", statement, re.S)
            if not call:
                raise FixtureError(f"{name}: statement not understood: {statement!r}")
            args = _split_args(call.group(2))
            if call.group(1) == "Put":
                if len(args) not in (4, 5):
                    raise FixtureError(f"{name}: Put takes 4 or 5 arguments: {statement!r}")
                bank = _int(args[4], lane) if len(args) == 5 else 0
                target = page(_int(args[0], lane), _int(args[1], lane), bank)
                offset = _int(args[2], lane)
                data = _bytes(args[3], lane)
                if offset + len(data) > 256:
                    raise FixtureError(f"{name}: Put past byte 255: {statement!r}")
                target[offset:offset + len(data)] = bytes(data)
            else:
                if len(args) != 5:
                    raise FixtureError(f"{name}: Text takes 5 arguments: {statement!r}")
                literal = re.fullmatch(r'"([^"\\]*)"', args[4])
                if not literal:
                    raise FixtureError(f"{name}: Text of no plain literal: {statement!r}")
                width = _int(args[3], lane)
                data = literal.group(1).encode("ascii").ljust(width, b" ")[:width]
                offset = _int(args[2], lane)
                page(_int(args[0], lane), _int(args[1], lane))[offset:offset + width] = data
    return pages
