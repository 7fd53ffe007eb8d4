#!/usr/bin/env python3
"""`rdmascope doctor --replay` (issue 39 item 2): doctor on captures, one host or several.

Three hosts are captured from the same fixture tree (tests/fixtures/sysfs/rdma_hosts.tree),
two samples each, named node-a, node-b and node-c in their index (a capture is editable by
hand: that is how a support engineer tells them apart). node-c's mlx5_0 runs another firmware,
and its mlx5_1 port's SymbolErrorCounter jumps by 3,000 in its second sample (edited into the
capture). Then:
1. `doctor --replay node-a` finds exactly what the capture's own doctor.json (doctor on the
   live samples, written by `capture`) found: the same findings, in the same order;
2. `doctor --replay a --replay b --replay c` is a fleet report: fleet.firmware and
   fleet.symbol_errors name node-c's objects and no other host's, node-c's own
   links.symbol_errors warns from the two samples' rate, and the exit code says warn;
3. `--window 0s` takes the last sample alone: no rate, so links.symbol_errors skips;
4. two captures of one host name stay two hosts, told apart by their paths;
5. bad input: a capture of a newer format version, --replay with --prometheus, a host name
   with terminal controls (printed escaped, never raw).

Usage: doctor_replay.py RDMASCOPE SOURCE_DIR"""

import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

COLLECTORS = ["--collector.disable-defaults", "--collector.rdma", "--collector.host"]
failures = []


def expect(condition, message):
    if not condition:
        failures.append(message)
        print("FAIL:", message)


def edit_index(capture, **fields):
    path = os.path.join(capture, "index.json")
    with open(path, encoding="utf-8") as f:
        index = json.load(f)
    index.update(fields)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(index, f, indent=2)


def doctor(rdmascope, *args):
    return subprocess.run([rdmascope, "doctor", *args], capture_output=True, text=True,
                          timeout=120)


def report(rdmascope, *args):
    result = doctor(rdmascope, *args, "--format", "json")
    try:
        return result.returncode, json.loads(result.stdout)
    except json.JSONDecodeError:
        raise SystemExit(f"FAIL: doctor {args} printed no JSON (exit {result.returncode}): "
                         f"{result.stderr[-2000:]}")


def found(findings, check, severity=None, **scope):
    return [f for f in findings if f["id"] == check
            and (severity is None or f["severity"] == severity)
            and all(f.get("scope", {}).get(k) == v for k, v in scope.items())]


def main():
    rdmascope, source = sys.argv[1], sys.argv[2]
    tree = os.path.join(source, "tests", "fixtures", "sysfs", "rdma_hosts.tree")
    with tempfile.TemporaryDirectory() as work:
        captures = {}
        for name in ("a", "b", "c"):
            sysfs = os.path.join(work, f"host-{name}", "sys")
            harness.materialise_tree(tree, sysfs)
            if name == "c":
                with open(os.path.join(sysfs, "class/infiniband/mlx5_0/fw_ver"), "w") as f:
                    f.write("22.35.1000\n")
            capture = os.path.join(work, f"capture-{name}")
            harness.run([rdmascope, "capture", "--output", capture, "--samples", "2",
                         "--interval", "1s", f"--path.sysfs={sysfs}", *COLLECTORS])
            edit_index(capture, hostname=f"node-{name}")
            captures[name] = capture
        counter = os.path.join(captures["c"], "samples", "0002", "sys", "class", "infiniband",
                               "mlx5_1", "ports", "1", "counters", "symbol_error")
        with open(counter, encoding="utf-8") as f:
            before = int(f.read())
        with open(counter, "w", encoding="utf-8") as f:
            f.write(f"{before + 3000}\n")

        # 1. One capture: what doctor found live, from the replay.
        with open(os.path.join(captures["a"], "samples", "0002", "doctor.json"),
                  encoding="utf-8") as f:
            live = json.load(f)
        code, replayed = report(rdmascope, "--replay", captures["a"])
        expect(live["findings"] == replayed["findings"],
               "doctor --replay differs from the capture's doctor.json: " + json.dumps(
                   [(a, b) for a, b in zip(live["findings"], replayed["findings"]) if a != b][:2]))
        expect(len(replayed["findings"]) > 20, f"only {len(replayed['findings'])} findings")
        expect(replayed["host"] == "node-a", f"host {replayed['host']!r}")
        expect(replayed.get("window_kind") == "capture" and 0.9 < replayed["window_seconds"] < 5,
               f"window {replayed.get('window_kind')} {replayed['window_seconds']}")
        expect(replayed.get("fixes_display_only") is True, "a capture's fixes are not display-only")
        print(f"one capture: {len(replayed['findings'])} findings, equal to doctor.json")

        # 2. Three captures: the fleet report.
        code, fleet = report(rdmascope, "--replay", captures["a"], "--replay", captures["b"],
                             "--replay", captures["c"])
        findings = fleet["findings"]
        expect(code == 1, f"exit code {code}, not 1 (warn)")
        expect(fleet.get("instances") == 3, f"instances {fleet.get('instances')}")
        firmware = found(findings, "fleet.firmware", "warn")
        expect([f["scope"].get("instance") for f in firmware] == ["node-c"] and
               firmware[0]["scope"].get("device") == "mlx5_0",
               f"fleet.firmware warns: {firmware}")
        symbol = found(findings, "fleet.symbol_errors", "warn")
        expect([(f["scope"].get("instance"), f["scope"].get("device")) for f in symbol] ==
               [("node-c", "mlx5_1")], f"fleet.symbol_errors warns: {symbol}")
        own = found(findings, "links.symbol_errors", "warn")
        expect([f["scope"].get("instance") for f in own] == ["node-c"],
               f"links.symbol_errors warns: {own}")
        expect(not found(findings, "host.collectors", "warn"),
               "a collector the captures did not record reports failing: " +
               json.dumps(found(findings, "host.collectors", "warn")[:1]))
        print(f"fleet: {len(findings)} findings; node-c's firmware and symbol errors named")

        # 3. --window 0s: the last sample alone.
        _, last = report(rdmascope, "--replay", captures["c"], "--window", "0s")
        expect(found(last["findings"], "links.symbol_errors", "skip") and
               not found(last["findings"], "links.symbol_errors", "warn"),
               "--window 0s still judged a rate")
        expect(last.get("window_kind") == "none", f"window_kind {last.get('window_kind')}")

        # 4. One host name twice.
        _, twice = report(rdmascope, "--replay", captures["a"], "--replay", captures["a"],
                          "--show-ok")
        instances = {f["scope"].get("instance") for f in twice["findings"]} - {"*"}
        expect(instances == {f"node-a ({captures['a']}) #1", f"node-a ({captures['a']}) #2"},
               f"two captures of node-a: {instances}")
        expect(twice.get("instances") == 2, f"instances {twice.get('instances')}")

        # 5. Bad input.
        newer = os.path.join(work, "newer")
        subprocess.run(["cp", "-a", captures["b"], newer], check=True)
        edit_index(newer, format_version=99)
        result = doctor(rdmascope, "--replay", newer)
        expect(result.returncode == 3 and "newer" in result.stderr and not result.stdout,
               f"newer format: exit {result.returncode}, {result.stderr[-300:]!r}")
        result = doctor(rdmascope, "--replay", captures["a"], "--prometheus", "http://x:9090")
        expect(result.returncode == 3 and "--replay" in result.stderr,
               f"--replay with --prometheus: exit {result.returncode}, {result.stderr[-300:]!r}")
        result = doctor(rdmascope, "--replay", os.path.join(work, "absent"))
        expect(result.returncode == 3, f"absent capture: exit {result.returncode}")
        hostile = os.path.join(work, "hostile")
        subprocess.run(["cp", "-a", captures["b"], hostile], check=True)
        edit_index(hostile, hostname="evil\x1b]0;owned\x07\x1b[2J")
        result = doctor(rdmascope, "--replay", hostile)
        expect(result.returncode in (0, 1, 2) and "\x1b" not in result.stdout and
               "evil" in result.stdout,
               f"hostile host name: exit {result.returncode}, {result.stdout[:200]!r}")

    if failures:
        raise SystemExit(f"{len(failures)} failure(s)")
    print("ok")


if __name__ == "__main__":
    main()
