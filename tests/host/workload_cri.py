#!/usr/bin/env python3
"""Host tier: container names from the container runtime (issue 28, item 2). Programs holding
memory regions run in cgroup v2 directories of two containers of the kubelet's shape; a fake
CRI server (fake_cri_server.py) names the first. The exporter asks it through
librdmascope_grpc.so:

- the first container's process gets namespace, pod and container labels;
- the second gets them soon after the runtime starts listing it (a miss asks again, before
  the refresh interval);
- the runtime hanging (each call held for 60 s), then gone: every scrape still answers, with
  the names last known;
- without --collector.workload.cri-endpoint (none), the exporter never loads the library
  (/proc/PID/maps).

Each scrape is given 10 s before the test calls it hung: a guard, not a speed check (a scrape
here takes milliseconds; benchmarks measure)."""

import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "common"))
import cgroups  # noqa: E402
import harness  # noqa: E402
import workload_cgroups  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DEBIAN_PYTHON = "/usr/bin/python3"  # Debian's python3-grpcio is installed for it


def names(samples, pid):
    labels = workload_cgroups.workload_labels(samples, pid)
    if not isinstance(labels, dict):
        return labels
    return {k: labels[k] for k in ("namespace", "pod", "container", "pod_uid") if k in labels}


def scrape(exporter):
    """One scrape, or None when it takes more than 10 s (hung)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{exporter.port}/metrics", timeout=10) as r:
            return harness.parse(r.read().decode())
    except OSError as error:
        print(f"scrape failed: {error}")
        return None


def wait_for(exporter, pid, want, seconds=20):
    deadline = time.monotonic() + seconds
    got = None
    while time.monotonic() < deadline:
        samples = scrape(exporter)
        got = names(samples, pid) if samples is not None else "no answer"
        if got == want:
            break
        time.sleep(0.2)
    return got


def main(binary, workload, library):
    if os.geteuid() != 0:
        print("SKIP: BPF and cgroup directories need root")
        return harness.SKIP
    if subprocess.run([DEBIAN_PYTHON, "-c", "import grpc"], capture_output=True).returncode:
        print(f"FAIL: {DEBIAN_PYTHON} cannot import grpc: install python3-grpcio "
              "(packaging/install-deps.sh does)")
        return 1
    check = harness.Checker()
    mount, unmount = cgroups.mount_cgroup2()
    root = cgroups.Root(mount, f"rdmascope-cri-test-{os.getpid()}")
    base = root.base
    pods = [{"id": uuid.uuid4().hex * 2, "pod": f"llm-{i}", "namespace": "training",
             "uid": str(uuid.uuid4()), "container": "worker"} for i in range(2)]
    programs, server = [], None
    with tempfile.TemporaryDirectory(prefix="rdmascope-cri-") as d:
        socket_path = os.path.join(d, "cri.sock")
        listing = os.path.join(d, "containers.json")
        with open(listing, "w") as f:
            json.dump(pods[:1], f)
        try:
            server = subprocess.Popen([DEBIAN_PYTHON, os.path.join(HERE, "fake_cri_server.py"),
                                       socket_path, listing], stdout=subprocess.PIPE, text=True)
            if server.stdout.readline().strip() != "READY":
                print("FAIL: the fake CRI server did not start")
                return 1
            # The exporters' cgroup namespace is rooted at the test's directory (unshare --cgroup).
            root.enter()
            dirs = []
            for pod in pods:
                path = os.path.join(
                    base, "kubepods.slice", "kubepods-burstable.slice",
                    f"kubepods-burstable-pod{pod['uid'].replace('-', '_')}.slice",
                    f"cri-containerd-{pod['id']}.scope")
                os.makedirs(path)
                dirs.append(path)
            args = ["--collector.disable-defaults", "--collector.mr", "--collector.workload",
                    f"--probe.library={library}",
                    f"--collector.workload.cri-endpoint=unix://{socket_path}",
                    "--collector.workload.cri-timeout=500ms",
                    "--collector.workload.cri-refresh-interval=60s"]
            with harness.Exporter(binary, args, launcher=cgroups.UNSHARE_CGROUP) as exporter:
                first = workload_cgroups.Program(workload, library, dirs[0])
                programs.append(first)
                want_first = {"namespace": "training", "pod": "llm-0", "container": "worker",
                              "pod_uid": pods[0]["uid"]}
                check.expect("named by the runtime", wait_for(exporter, first.pid, want_first),
                             want_first)
                # A container started since the last answer (the runtime lists it before its
                # processes run): asked about within the miss interval (5 s), not the refresh
                # interval (60 s).
                with open(listing, "w") as f:
                    json.dump(pods, f)
                second = workload_cgroups.Program(workload, library, dirs[1])
                programs.append(second)
                want_second = {"namespace": "training", "pod": "llm-1", "container": "worker",
                               "pod_uid": pods[1]["uid"]}
                check.expect("named after a miss", wait_for(exporter, second.pid, want_second),
                             want_second)
                # One the runtime does not manage: its cgroup's labels only.
                foreign_uid = str(uuid.uuid4())
                foreign = os.path.join(
                    base, "kubepods.slice", "kubepods-burstable.slice",
                    f"kubepods-burstable-pod{foreign_uid.replace('-', '_')}.slice",
                    f"cri-containerd-{uuid.uuid4().hex * 2}.scope")
                os.makedirs(foreign)
                stranger = workload_cgroups.Program(workload, library, foreign)
                programs.append(stranger)
                calls_before = len(open(listing + ".calls").readlines())
                check.expect("not the runtime's: cgroup only", wait_for(
                    exporter, stranger.pid, {"pod_uid": foreign_uid}), {"pod_uid": foreign_uid})
                # Hung, then gone: scrapes answer with the last names.
                # The stranger's miss asked the runtime (a call, after which it is left alone).
                time.sleep(6)
                open(os.path.join(d, "HANG"), "w").close()
                check.expect("a miss asked the runtime",
                             len(open(listing + ".calls").readlines()) > calls_before, True)
                calls_before = len(open(listing + ".calls").readlines())
                # A container the runtime never named: its miss asks the hung runtime.
                unknown = os.path.join(os.path.dirname(dirs[0]),
                                       f"cri-containerd-{uuid.uuid4().hex * 2}.scope")
                os.makedirs(unknown)
                programs.append(workload_cgroups.Program(workload, library, unknown))
                # Scrapes while the refresher waits on the hung runtime (asked within the
                # miss interval, 5 s, for the new container).
                deadline, round_ = time.monotonic() + 20, 0
                while True:
                    samples = scrape(exporter)
                    check.expect(f"runtime hung: scrape {round_} answered", samples is not None,
                                 True)
                    if samples is not None:
                        check.expect(f"runtime hung: scrape {round_} names", names(
                            samples, first.pid), want_first)
                    asked = len(open(listing + ".calls").readlines()) > calls_before
                    if (asked and round_ >= 3) or time.monotonic() > deadline:
                        break
                    round_ += 1
                    time.sleep(1)
                check.expect("the hung runtime was asked", asked, True)
                server.terminate()
                server.wait(timeout=30)
                samples = scrape(exporter)
                check.expect("runtime gone: scrape answered", samples is not None, True)
                if samples is not None:
                    check.expect("runtime gone: last names kept", names(samples, second.pid),
                                 want_second)
                    check.expect("workload collector succeeded", harness.value(
                        samples, "rdmascope_collector_success", collector="workload"), 1.0)
                with open(f"/proc/{exporter.proc.pid}/maps") as maps:
                    check.expect("gRPC library mapped when an endpoint is set",
                                 "librdmascope_grpc.so" in maps.read(), True)
            with harness.Exporter(binary, ["--collector.disable-defaults", "--collector.mr",
                                           "--collector.workload",
                                           f"--probe.library={library}",
                                           "--collector.workload.cri-endpoint=none"],
                                  launcher=cgroups.UNSHARE_CGROUP) as plain:
                # Registered after this exporter's probes attached: exported, so described.
                late = workload_cgroups.Program(workload, library, dirs[0])
                programs.append(late)
                samples = scrape(plain)
                check.expect("cri-endpoint=none: cgroup labels only", names(
                    samples, late.pid), {"pod_uid": pods[0]["uid"]})
                with open(f"/proc/{plain.proc.pid}/maps") as maps:
                    check.expect("cri-endpoint=none: no gRPC library mapped",
                                 "librdmascope_grpc.so" in maps.read(), False)
        finally:
            for program in programs:
                program.stop()
            if server is not None and server.poll() is None:
                server.kill()
            root.close()
            unmount()
    return check.result()


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
