#!/usr/bin/env python3
"""Host tier (issue 39): the container runtime's and the kubelet's answers in a capture. A fake
CRI server and a fake kubelet (fake_cri_server.py, fake_kubelet_server.py) answer
`rdmascope capture` over the pod devices sysfs fixture, through librdmascope_grpc.so; the
kubelet hands a second device out between the two samples. Then:

- each sample holds grpc/cri.json and grpc/podresources.json as those servers answered then
  (the refresher in step with the samples: a fresh answer per sample);
- `serve --replay` gives, scrape by scrape, the rdma_device_workload_info series a live `serve`
  gave for the same answers, and /debug/workloads counts the runtime's containers;
- under strace, the replay connects to neither socket and never opens librdmascope_grpc.so,
  while the same strace of the live exporter sees the kubelet's connect and the library's open
  (so the check can fail).

No process and no probe is needed: the workload collector alone, as host_workload_kubelet."""

import json
import os
import re
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
CONTAINERS = [{"id": "ab" * 32, "pod": "llm-0", "namespace": "training",
               "uid": "11111111-2222-3333-4444-555555555555", "container": "worker"},
              {"id": "cd" * 32, "pod": "llm-1", "namespace": "training",
               "uid": "66666666-7777-8888-9999-000000000000", "container": "worker"}]
VF = {"pod": "llm-0", "namespace": "training", "container": "worker",
      "resource": "nvidia.com/sriov_rdma_vf", "device_ids": ["0000:3b:02.1"]}
SF = {"pod": "llm-1", "namespace": "training", "container": "worker",
      "resource": "nvidia.com/sriov_rdma_sf", "device_ids": ["mlx5_core.sf.4"]}


def devices(exporter):
    """Every rdma_device_workload_info series as a sorted list of label dicts."""
    with urllib.request.urlopen(f"http://127.0.0.1:{exporter.port}/metrics", timeout=10) as r:
        samples = harness.parse(r.read().decode())
    found = harness.series(samples, "rdma_device_workload_info")
    return sorted((dict(labels) for labels in found), key=lambda d: sorted(d.items()))


def wait_in_log(path, pattern, proc, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(path, encoding="utf-8", errors="replace") as f:
            if re.search(pattern, f.read()):
                return True
        if proc.poll() is not None:
            return False
        time.sleep(0.05)
    return False


def start(script, socket_path, listing):
    server = subprocess.Popen([DEBIAN_PYTHON, os.path.join(HERE, script), socket_path, listing],
                              stdout=subprocess.PIPE, text=True)
    if server.stdout.readline().strip() != "READY":
        raise RuntimeError(f"{script} did not start")
    return server


def traced(trace, sockets):
    """(connects to `sockets`, opens of the gRPC library) in an strace output file."""
    with open(trace, errors="replace") as f:
        lines = f.readlines()
    connects = [line for line in lines if "connect(" in line
                and any(socket in line for socket in sockets)]
    library = [line for line in lines if re.search(r"\bopen(at2?)?\(", line)
               and "librdmascope_grpc.so" in line and "ENOENT" not in line]
    return connects, library, len(lines)


def main(binary):
    if subprocess.run([DEBIAN_PYTHON, "-c", "import grpc"], capture_output=True).returncode:
        print(f"FAIL: {DEBIAN_PYTHON} cannot import grpc: install python3-grpcio "
              "(packaging/install-deps.sh does)")
        return 1
    if subprocess.run(["strace", "-V"], capture_output=True).returncode != 0:
        print("SKIP: needs strace")
        return harness.SKIP
    check = harness.Checker()
    servers = []
    with tempfile.TemporaryDirectory(prefix="rdmascope-capture-grpc-") as d:
        sysfs = os.path.join(d, "sys")
        harness.materialise_tree(FIXTURE, sysfs)
        cri_socket, kubelet_socket = os.path.join(d, "cri.sock"), os.path.join(d, "kubelet.sock")
        containers, pod_devices = os.path.join(d, "containers.json"), os.path.join(d, "dev.json")
        with open(containers, "w") as f:
            json.dump(CONTAINERS, f)
        with open(pod_devices, "w") as f:
            json.dump([VF], f)
        common = ["--collector.disable-defaults", "--collector.workload", f"--path.sysfs={sysfs}",
                  f"--collector.workload.cri-endpoint=unix://{cri_socket}",
                  f"--collector.workload.kubelet-socket={kubelet_socket}"]
        try:
            servers.append(start("fake_cri_server.py", cri_socket, containers))
            servers.append(start("fake_kubelet_server.py", kubelet_socket, pod_devices))

            # Live: the series each answer gives, with the same strace as the replay's below.
            live_trace = os.path.join(d, "live.strace")
            launcher = ["strace", "-f", "-qq", "-e", "trace=connect,open,openat,openat2", "-o"]
            with harness.Exporter(binary, common + [
                    "--collector.workload.kubelet-refresh-interval=1s"],
                    launcher=launcher + [live_trace]) as live:
                # The first scrapes do not wait for the kubelet: until its first answer, none.
                deadline, live_vf = time.monotonic() + 20, []
                while time.monotonic() < deadline and not live_vf:
                    live_vf = devices(live)
                    time.sleep(0.2)
                with open(pod_devices, "w") as f:
                    json.dump([VF, SF], f)
                deadline, live_both = time.monotonic() + 20, live_vf
                while time.monotonic() < deadline and len(live_both) < 2:
                    live_both = devices(live)
                    time.sleep(0.2)
                # --redact, the live exporter's /debug/workloads kept too: no name, id or path
                # of the host's survives in any file of the capture.
                redacted = os.path.join(d, "redacted")
                run = subprocess.run([binary, "capture", "--output", redacted, "--samples", "1",
                                      "--redact", "--exporter", f"http://127.0.0.1:{live.port}",
                                      *common], capture_output=True, text=True, timeout=120)
                check.expect("redacted capture exit", run.returncode, 0)
            check.expect("live: the VF's pod", [s["pod"] for s in live_vf], ["llm-0"])
            check.expect("live: both devices", sorted(s["pod"] for s in live_both),
                         ["llm-0", "llm-1"])
            connects, library, _ = traced(live_trace, (cri_socket, kubelet_socket))
            # Live, the runtime is asked at the first lookup of a container, and no process is
            # exported here: the kubelet's socket shows the strace sees connects.
            check.expect("live (the check can fail): connects to the kubelet's socket",
                         any(kubelet_socket in c for c in connects), True)
            check.expect("live (the check can fail): the gRPC library opened", bool(library),
                         True)

            # The capture: the VF in sample 1, both devices in sample 2.
            with open(pod_devices, "w") as f:
                json.dump([VF], f)
            capture = os.path.join(d, "capture")
            log_path = os.path.join(d, "capture.log")
            with open(log_path, "w") as log:
                proc = subprocess.Popen([binary, "capture", "--output", capture, "--samples", "2",
                                         "--interval", "3s", "--exporter", "none", *common],
                                        stdout=log, stderr=subprocess.STDOUT)
            recorded_1 = wait_in_log(log_path, r'msg="sample recorded" sample=1', proc)
            with open(pod_devices, "w") as f:
                json.dump([VF, SF], f)
            check.expect("capture exit", proc.wait(timeout=120), 0)
            check.expect("sample 1 recorded before the kubelet's change", recorded_1, True)
            print(open(log_path).read())
        finally:
            for server in servers:
                server.terminate()
                server.wait(timeout=30)

        def sample_file(n, name):
            with open(os.path.join(capture, "samples", f"000{n}", "grpc", name)) as f:
                return json.load(f)

        for n in (1, 2):
            cri = sample_file(n, "cri.json")
            check.expect(f"sample {n}: grpc/cri.json lists the runtime's containers",
                         sorted(c["pod"] for c in cri.get("containers", [])), ["llm-0", "llm-1"])
        check.expect("sample 1: grpc/podresources.json the VF only",
                     [e["pod"] for e in sample_file(1, "podresources.json")["pod_devices"]],
                     ["llm-0"])
        check.expect("sample 2: grpc/podresources.json both (a fresh answer per sample)",
                     [e["pod"] for e in sample_file(2, "podresources.json")["pod_devices"]],
                     ["llm-0", "llm-1"])
        originals = ["llm-0", "llm-1", "training", "worker", d] + [
            value for c in CONTAINERS for value in (c["id"], c["uid"])]
        kept, survivors = [], []
        for top, _, files in os.walk(redacted):
            for name in files:
                with open(os.path.join(top, name), "rb") as f:
                    text = f.read().decode(errors="replace")
                kept.append(os.path.relpath(os.path.join(top, name), redacted))
                survivors += [f"{name}: {o}" for o in originals if o in text]
        check.expect("redacted: grpc/*.json and exporter/debug/workloads.json kept",
                     all(f"samples/0001/{name}" in kept for name in (
                         "grpc/cri.json", "grpc/podresources.json",
                         "exporter/debug/workloads.json")), True)
        check.expect("redacted: no original name, id or path in any file", survivors, [])
        with open(os.path.join(capture, "index.json")) as f:
            index = json.load(f)
        check.expect("index: no workload source missed",
                     [m for m in index.get("not_recorded", [])
                      if str(m.get("source", "")).startswith("workload")], [])

        # The servers are gone: a replay that asked them would fail, and strace would see it.
        replay_trace = os.path.join(d, "replay.strace")
        with harness.Exporter(binary, ["--replay", capture],
                              launcher=launcher + [replay_trace]) as replay:
            replayed = [devices(replay), devices(replay), devices(replay)]
            status, body = replay.get("/debug/workloads")
        check.expect("replay sample 1 = live with the VF only", replayed[0], live_vf)
        check.expect("replay sample 2 = live with both devices", replayed[1], live_both)
        check.expect("replay: the last sample repeats", replayed[2], live_both)
        state = json.loads(body) if status == 200 else {}
        check.expect("replay /debug/workloads: the runtime's containers, no error",
                     (state.get("container_runtime", {}).get("containers"),
                      "last_error" in state.get("container_runtime", {}),
                      state.get("kubelet", {}).get("container_resources")), (2, False, 2))
        connects, library, calls = traced(replay_trace, (cri_socket, kubelet_socket))
        check.expect("replay under strace: no connect to either socket", connects, [])
        check.expect("replay under strace: librdmascope_grpc.so never opened", library, [])
        print(f"strace of the replay: {calls} calls")
        check.expect("strace saw the replay's opens", calls > 20, True)
    return check.result()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
