#!/usr/bin/env python3
"""The rooms' direction is the build's, not a convention (docs/architecture.md, "Rooms").

For every room: a header of the room itself and of a room below it compiles through the room's
include view (build/.../exporter/rooms/NAME/), and a header of every room above it or beside it
does not. Also: no source reaches around the views with a relative include ("../cli/x.h").
Usage: rooms_enforced.py CXX SOURCE_DIR BUILD_EXPORTER_DIR
"""
import pathlib
import re
import subprocess
import sys

# What each room may see: itself and everything below (exporter/CMakeLists.txt, BELOW).
BELOW = {"core": [], "sys": ["core"], "bpf": ["sys"], "collectors": ["bpf"],
         "doctor": ["collectors"], "web": ["core"], "http": ["doctor", "web"],
         "profile": ["doctor"], "cli": ["http", "profile"]}


def visible(room):
    seen = {room}
    for below in BELOW[room]:
        seen |= visible(below)
    return seen


def compiles(cxx, view, others, header):
    source = f'#include "{header}"\n'
    flags = [flag for directory in others for flag in ("-I", directory)]
    result = subprocess.run([cxx, "-std=c++23", "-x", "c++", "-", "-I", view, *flags,
                             "-E", "-o", "/dev/null"],
                            input=source, capture_output=True, text=True, timeout=60)
    return result.returncode == 0


def main():
    cxx, source_dir, build_dir = sys.argv[1:4]
    exporter = pathlib.Path(source_dir) / "exporter"
    failures = []
    for path in exporter.rglob("*"):
        if path.suffix in (".h", ".cc") and re.search(r'#include "\.\./', path.read_text()):
            failures.append(f"{path}: a relative include reaches around the rooms")
    # One header a room that includes nothing but the standard library and its own room, or
    # the plainest one, to test reachability (preprocessing only: -E).
    probe = {room: sorted((exporter / room).glob("*.h"))[0].relative_to(exporter).as_posix()
             for room in BELOW}
    # The headers from outside the rooms every room sees: generated, probes/ and preload/ ABIs.
    others = [str(pathlib.Path(build_dir) / "generated"), f"{source_dir}/probes",
              f"{source_dir}/preload"]
    for room in BELOW:
        view = str(pathlib.Path(build_dir) / "rooms" / room)
        for other, header in probe.items():
            expected = other in visible(room)
            # A header of a visible room may itself need a room the probe cannot see only
            # when the tree is wrong; preprocessing tells both apart.
            if compiles(cxx, view, others, header) != expected:
                failures.append(f"room {room}: #include \"{header}\" "
                                f"{'fails' if expected else 'compiles'}")
    for failure in failures:
        print(failure)
    print(f"{len(BELOW)} rooms, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
