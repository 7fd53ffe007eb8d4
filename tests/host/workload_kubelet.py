#!/usr/bin/env python3
"""Host tier: the devices of pods from the kubelet's PodResources API (issue 28, item 3). A
sysfs fixture (tests/fixtures/sysfs/pod_devices.tree) holds bus/pci/devices/ADDR/{infiniband,
net} and an auxiliary sub-function; a fake kubelet (fake_kubelet_server.py) hands them to pods.
The exporter asks it through librdmascope_grpc.so:

- the VF's RDMA device and netdev carry the pod, namespace, container and resource of the pod
  the kubelet names for its PCI address, and ids that name nothing here give no series;
- a device handed to another pod shows at the next refresh;
- the kubelet hanging (each call held for 60 s), then gone: every scrape still answers within
  the kubelet timeout, with the devices last known;
- with --collector.workload.kubelet-socket=none, no series and the library is never loaded.

No process and no probe is needed: the workload collector alone, over the fixture sysfs."""

import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
import harness  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "..", "fixtures", "sysfs", "pod_devices.tree")
DEBIAN_PYTHON = "/usr/bin/python3"  # Debian's python3-grpcio is installed for it
KUBELET_TIMEOUT = 1.0  # --collector.workload.kubelet-timeout


def scrape(exporter):
    """(samples, seconds), or (None, seconds) when it takes more than 10 s (hung)."""
    start = time.monotonic()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{exporter.port}/metrics", timeout=10) as r:
            return harness.parse(r.read().decode()), time.monotonic() - start
    except OSError as error:
        print(f"scrape failed: {error}")
        return None, time.monotonic() - start


def devices(samples):
    """Every rdma_device_workload_info series as a sorted list of label dicts."""
    if samples is None:
        return "no answer"
    found = harness.series(samples, "rdma_device_workload_info")
    return sorted((dict(labels) for labels in found), key=lambda d: sorted(d.items()))


def wait_for(exporter, want, seconds=20):
    deadline = time.monotonic() + seconds
    got = None
    while time.monotonic() < deadline:
        got = devices(scrape(exporter)[0])
        if got == want:
            break
        time.sleep(0.2)
    return got


def main(binary):
    if subprocess.run([DEBIAN_PYTHON, "-c", "import grpc"], capture_output=True).returncode:
        print(f"FAIL: {DEBIAN_PYTHON} cannot import grpc: install python3-grpcio "
              "(packaging/install-deps.sh does)")
        return 1
    check = harness.Checker()
    server = None
    with tempfile.TemporaryDirectory(prefix="rdmascope-kubelet-") as d:
        sysfs = os.path.join(d, "sys")
        harness.materialise_tree(FIXTURE, sysfs)
        socket_path = os.path.join(d, "kubelet.sock")
        listing = os.path.join(d, "devices.json")
        vf = {"pod": "llm-0", "namespace": "training", "container": "worker",
              "resource": "nvidia.com/sriov_rdma_vf",
              # The second is not on this host: no series.
              "device_ids": ["0000:3b:02.1", "0000:3b:02.5"]}
        shared = {"pod": "mpi-0", "namespace": "hpc", "container": "rank",
                  "resource": "rdma/hca_shared_devices_a", "device_ids": ["0"]}
        with open(listing, "w") as f:
            json.dump([vf, shared], f)
        common = ["--collector.disable-defaults", "--collector.workload",
                  f"--path.sysfs={sysfs}", "--collector.workload.cri-endpoint=none"]
        try:
            server = subprocess.Popen([DEBIAN_PYTHON, os.path.join(HERE, "fake_kubelet_server.py"),
                                       socket_path, listing], stdout=subprocess.PIPE, text=True)
            if server.stdout.readline().strip() != "READY":
                print("FAIL: the fake kubelet did not start")
                return 1
            args = common + [f"--collector.workload.kubelet-socket={socket_path}",
                             f"--collector.workload.kubelet-timeout={int(KUBELET_TIMEOUT * 1000)}ms",
                             "--collector.workload.kubelet-refresh-interval=1s"]
            with harness.Exporter(binary, args) as exporter:
                want_vf = [{"device": "mlx5_5", "netdev": "ens1f0v1", "pod": "llm-0",
                            "namespace": "training", "container": "worker",
                            "resource": "nvidia.com/sriov_rdma_vf"}]
                check.expect("the VF named by the kubelet", wait_for(exporter, want_vf), want_vf)
                # A sub-function handed to a second pod: shown at the next refresh (1 s).
                sf = {"pod": "llm-1", "namespace": "training", "container": "worker",
                      "resource": "nvidia.com/sriov_rdma_sf", "device_ids": ["mlx5_core.sf.4"]}
                with open(listing, "w") as f:
                    json.dump([vf, shared, sf], f)
                want_both = sorted(want_vf + [{
                    "device": "mlx5_9", "netdev": "enp59s0f0s4", "pod": "llm-1",
                    "namespace": "training", "container": "worker",
                    "resource": "nvidia.com/sriov_rdma_sf"}], key=lambda d: sorted(d.items()))
                check.expect("a device handed out since", wait_for(exporter, want_both),
                             want_both)
                status, landing = exporter.get("/")
                check.expect("the detail counts the ids that map nothing",
                             "2 device ids name no RDMA device or netdev here" in landing, True)
                status, body = exporter.get("/debug/workloads")
                kubelet = json.loads(body).get("kubelet", {}) if status == 200 else body
                check.expect("/debug/workloads: the kubelet's state",
                             (kubelet.get("endpoint", "").endswith(os.path.basename(socket_path)),
                              kubelet.get("container_resources"), "last_error" in kubelet)
                             if isinstance(kubelet, dict) else kubelet, (True, 3, False))
                # Hung: scrapes answer at once with the last answer, while the refresher waits
                # on the kubelet (asked every second).
                calls_before = len(open(listing + ".calls").readlines())
                open(os.path.join(d, "HANG"), "w").close()
                with open(listing, "w") as f:
                    json.dump([], f)  # what a hung kubelet would say, never heard
                deadline, round_ = time.monotonic() + 20, 0
                while True:
                    samples, seconds = scrape(exporter)
                    check.expect(f"kubelet hung: scrape {round_} within the timeout",
                                 seconds < KUBELET_TIMEOUT, True)
                    check.expect(f"kubelet hung: scrape {round_} devices", devices(samples),
                                 want_both)
                    asked = len(open(listing + ".calls").readlines()) > calls_before
                    if (asked and round_ >= 3) or time.monotonic() > deadline:
                        break
                    round_ += 1
                    time.sleep(1)
                check.expect("the hung kubelet was asked", asked, True)
                server.terminate()
                server.wait(timeout=30)
                time.sleep(2)  # the refresher meets a socket with nobody behind it
                samples, seconds = scrape(exporter)
                check.expect("kubelet gone: scrape within the timeout", seconds < KUBELET_TIMEOUT,
                             True)
                check.expect("kubelet gone: last devices kept", devices(samples), want_both)
                if samples is not None:
                    check.expect("workload collector succeeded", harness.value(
                        samples, "rdmascope_collector_success", collector="workload"), 1.0)
                with open(f"/proc/{exporter.proc.pid}/maps") as maps:
                    check.expect("gRPC library mapped when a kubelet socket is set",
                                 "librdmascope_grpc.so" in maps.read(), True)
            with harness.Exporter(binary, common + [
                    "--collector.workload.kubelet-socket=none"]) as plain:
                samples, _ = scrape(plain)
                check.expect("kubelet-socket=none: no device series", devices(samples), [])
                with open(f"/proc/{plain.proc.pid}/maps") as maps:
                    check.expect("kubelet-socket=none: no gRPC library mapped",
                                 "librdmascope_grpc.so" in maps.read(), False)
        finally:
            if server is not None and server.poll() is None:
                server.kill()
    return check.result()


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:2]))
