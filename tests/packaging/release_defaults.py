#!/usr/bin/env python3
"""Distributions build with `-DCMAKE_BUILD_TYPE=Release` (or None) and their own flags; a newer
compiler's new warning must not break that build (GCC 12's -Wrestrict false positive did).
Checks that a plain Release configure compiles project code without -Werror, and that the
developer and CI presets (CMakePresets.json: release, asan) still turn RDMASCOPE_WERROR on.

Usage: release_defaults.py SOURCE_DIR WORK_DIR"""

import json
import os
import shutil
import subprocess
import sys


def main(source, work):
    failures = []
    shutil.rmtree(work, ignore_errors=True)
    subprocess.run(["cmake", "-S", source, "-B", work, "-DCMAKE_BUILD_TYPE=Release",
                    "-DRDMASCOPE_BUILD_TESTS=OFF"], check=True, capture_output=True)
    with open(os.path.join(work, "CMakeCache.txt")) as f:
        cache = [line.strip() for line in f if line.startswith("RDMASCOPE_WERROR:")]
    print("plain Release configure:", cache)
    if cache != ["RDMASCOPE_WERROR:BOOL=OFF"]:
        failures.append("RDMASCOPE_WERROR is not OFF by default")
    with open(os.path.join(work, "compile_commands.json")) as f:
        commands = json.load(f)
    werror = [c["file"] for c in commands if "/exporter/" in c["file"] and
              "-Werror" in c["command"].replace("-Werror=format-security", "").split()]
    print(f"{len(commands)} compile commands, {len(werror)} exporter files with -Werror")
    if werror:
        failures.append(f"-Werror on project code in a plain Release build: {werror[:3]}")

    with open(os.path.join(source, "CMakePresets.json")) as f:
        presets = {p["name"]: p for p in json.load(f)["configurePresets"]}
    for name in ("release", "asan"):
        value = presets.get(name, {}).get("cacheVariables", {}).get("RDMASCOPE_WERROR")
        print(f"preset {name}: RDMASCOPE_WERROR={value}")
        if value != "ON":
            failures.append(f"preset {name} does not turn RDMASCOPE_WERROR on")
    shutil.rmtree(work, ignore_errors=True)
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
