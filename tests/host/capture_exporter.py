#!/usr/bin/env python3
"""Host tier (issue 39 item 4): a real `rdmascope serve` with its mr collector answers
/debug/mr/stacks and /debug/workloads; `rdmascope capture --exporter URL` keeps both answers in
its sample, byte for byte as a GET of that exporter gives them; `serve --replay` (the workload
collector off, so that neither route has a collector of its own) serves them back byte for byte
as application/json; a capture taken with `--exporter none` has neither file, says why in
index.json, and its replay has no such route (404)."""

import json
import os
import subprocess
import sys
import urllib.request

import netns
from netns import harness


def get(port, path):
    """(status, content type, body bytes)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as resp:
            return resp.status, resp.headers.get("Content-Type"), resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.headers.get("Content-Type"), err.read()


def capture(binary, output, exporter):
    subprocess.run([binary, "capture", "--output", output, "--samples", "1", "--exporter",
                    exporter, "--no-collector.perf"], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=120)


def main(binary):
    if os.geteuid() != 0:
        print("SKIP: needs root (the mr collector's probes)")
        return 77
    failures = []
    routes = {"/debug/mr/stacks": "exporter/debug/mr/stacks.json",
              "/debug/workloads": "exporter/debug/workloads.json"}
    with netns.tempdir() as work:
        recorded = os.path.join(work, "recorded")
        # Nothing registers meanwhile and no scrape runs: both answers stay as they are, so the
        # capture's bytes can be compared with a GET before and after it.
        with harness.Exporter(binary, []) as live:
            before = {route: get(live.port, route) for route in routes}
            for route, (status, _, body) in before.items():
                if status != 200:
                    print(f"SKIP: the live exporter answers {route} with {status}: {body[:200]}")
                    return 77
            capture(binary, recorded, f"http://127.0.0.1:{live.port}")
            after = {route: get(live.port, route) for route in routes}
        sample = os.path.join(recorded, "samples", "0001")
        for route, file in routes.items():
            path = os.path.join(sample, file)
            if not os.path.isfile(path):
                failures.append(f"{file} not in the capture")
                continue
            with open(path, "rb") as f:
                kept = f.read()
            if kept not in (before[route][2], after[route][2]):
                failures.append(f"{file} is not the exporter's answer: {kept[:200]!r}")
        with harness.Exporter(binary, ["--replay", recorded, "--no-collector.workload"]) as replay:
            for route, file in routes.items():
                status, content_type, body = get(replay.port, route)
                path = os.path.join(sample, file)
                expected = open(path, "rb").read() if os.path.isfile(path) else None
                if status != 200 or content_type != "application/json" or body != expected:
                    failures.append(f"replay {route}: {status} {content_type} {body[:200]!r}, "
                                    f"the capture holds {expected[:200] if expected else None!r}")
        print(f"recorded and replayed {len(routes)} routes, "
              f"{sum(len(get_body) for _, _, get_body in before.values())} bytes")

        # No exporter asked: no file, index.json says why, the replay has no route.
        unasked = os.path.join(work, "unasked")
        capture(binary, unasked, "none")
        with open(os.path.join(unasked, "index.json")) as f:
            missed = {entry["source"]: entry["reason"] for entry in json.load(f)["not_recorded"]}
        for route, file in routes.items():
            if os.path.exists(os.path.join(unasked, "samples", "0001", file)):
                failures.append(f"--exporter none: {file} written")
            if missed.get(f"exporter {route}") != "--exporter none":
                failures.append(f"--exporter none: not_recorded says {missed.get('exporter ' + route)!r}")
        with harness.Exporter(binary, ["--replay", unasked, "--no-collector.workload"]) as replay:
            for route in routes:
                status, _, body = get(replay.port, route)
                if status != 404:
                    failures.append(f"replay of a capture without {route}: {status} {body[:200]!r}")
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
