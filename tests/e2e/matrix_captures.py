"""The vendor matrix's captures (tests/captures/<shape>/, docs/vendor-matrix.md), replayed as
both matrix tests read them: `rdmascope serve --replay` per capture, one scrape per sample, and
doctor asked through that serve's /doctor (`doctor --exporter`), which runs its checks on the
replay."""

import json
import os
import subprocess
import tempfile

import yaml

import harness


def captures(source):
    """{shape: directory} of every capture under tests/captures/ (a directory with index.json)."""
    root = os.path.join(source, "tests", "captures")
    return {name: os.path.join(root, name) for name in sorted(os.listdir(root))
            if os.path.isfile(os.path.join(root, name, "index.json"))}


def sample_count(capture):
    with open(os.path.join(capture, "index.json"), encoding="utf-8") as f:
        return len(json.load(f)["samples"])


def sample_file(capture, sample, host_path):
    """The text a capture's sample holds for a sysfs path (relative to /sys), or None."""
    path = os.path.join(capture, "samples", f"{sample:04d}", "sys", host_path)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return f.read()


def holder(capture_dirs, relative):
    """The one shape whose first sample has sys/<relative>; None if none, or several, do."""
    found = [shape for shape, capture in capture_dirs.items()
             if os.path.lexists(os.path.join(capture, "samples", "0001", "sys", relative))]
    return found[0] if len(found) == 1 else None


class Replay:
    """`rdmascope serve --replay CAPTURE`: scrapes() is one scrape per sample, in order (sample
    n on the n-th scrape); doctor() is `rdmascope doctor --exporter` against it, after them."""

    def __init__(self, binary, capture):
        self.binary, self.capture = binary, capture
        self.exporter = harness.Exporter(binary, [f"--replay={capture}"])

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.exporter.stop()

    def scrapes(self):
        return [harness.parse(self.exporter.metrics())
                for _ in range(sample_count(self.capture))]

    def doctor(self, *args):
        run = subprocess.run([self.binary, "doctor",
                              f"--exporter=http://127.0.0.1:{self.exporter.port}",
                              "--format", "json", *args],
                             capture_output=True, text=True, timeout=60)
        try:
            return json.loads(run.stdout)["findings"]
        except (json.JSONDecodeError, KeyError) as e:
            raise RuntimeError(f"doctor's output is not its JSON report ({e}):\n{run.stdout}\n"
                               f"{run.stderr}") from e


def doctor_replay(binary, capture):
    """`rdmascope doctor --replay CAPTURE`: doctor's own replay of the capture (no serve in
    between; docs/capture.md "doctor --replay"): its findings, for the callers to check against
    the same rows as the /doctor ones."""
    run = subprocess.run([binary, "doctor", f"--replay={capture}", "--format", "json"],
                         capture_output=True, text=True, timeout=60)
    try:
        return json.loads(run.stdout)["findings"]
    except (json.JSONDecodeError, KeyError) as e:
        raise RuntimeError(f"doctor --replay's output is not its JSON report ({e}):\n"
                           f"{run.stdout}\n{run.stderr}") from e


def promtool_test(case, name):
    """`promtool test rules` on one test file's content (`case`, a dict), written to a
    temporary NAME.rules.test.yml: (exit code, its output). Prints the output."""
    with tempfile.TemporaryDirectory(prefix="rdmascope-" + name + "-") as work:
        test_file = os.path.join(work, name + ".rules.test.yml")
        with open(test_file, "w", encoding="utf-8") as f:
            yaml.safe_dump(case, f, sort_keys=False)
        run = subprocess.run(["promtool", "test", "rules", test_file], capture_output=True,
                             text=True, timeout=180)
    print(run.stdout.strip(), run.stderr.strip())
    return run.returncode, run.stdout + run.stderr
