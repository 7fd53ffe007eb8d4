#!/usr/bin/python3
"""A stand-in for the kubelet's PodResources socket, for tests: v1.PodResourcesLister/List on a
unix socket, answering with the devices a JSON file lists (read again at each call:
[{"pod", "namespace", "container", "resource", "device_ids": [...]}], one entry per container
and resource, entries of one pod grouped into its PodResources as the kubelet does). While a
file named HANG sits beside the JSON file, each call hangs for 60 s first (a kubelet that
stopped answering).

Debian's python3-grpcio (so /usr/bin/python3), and no generated code: the messages are encoded
by hand (field numbers of k8s.io/kubelet's pkg/apis/podresources/v1/api.proto), with the
helpers of fake_cri_server.py.

Usage: fake_kubelet_server.py SOCKET DEVICES_JSON   (prints READY once listening; stops on
SIGTERM, at once, calls in flight or not). Each call is appended to DEVICES_JSON + ".calls"."""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fake_cri_server import field, serve, varint  # noqa: E402


def pod_resources(name, namespace, entries):
    """PodResources{name=1, namespace=2, containers=3}; ContainerResources{name=1, devices=2,
    cpu_ids=3}; ContainerDevices{resource_name=1, device_ids=2, topology=3}."""
    containers = {}
    for entry in entries:
        containers.setdefault(entry["container"], []).append(entry)
    body = field(1, name) + field(2, namespace)
    for container, devices in containers.items():
        resources = field(1, container)
        for entry in devices:
            one = field(1, entry["resource"])
            for device_id in entry["device_ids"]:
                one += field(2, device_id)
            one += field(3, field(1, varint(1 << 3 | 0) + varint(0)))  # topology: NUMA node 0
            resources += field(2, one)
        resources += field(3, varint(4) + varint(5))  # cpu_ids, packed: CPUs 4 and 5
        body += field(3, resources)
    return field(1, body)


def main(socket_path, devices_json):
    hang_file = os.path.join(os.path.dirname(devices_json), "HANG")

    def list_pod_resources(request, context):
        with open(devices_json + ".calls", "a") as calls:
            calls.write(f"{time.time()} {len(request)}\n")
        if os.path.exists(hang_file):
            time.sleep(60)
        with open(devices_json) as f:
            entries = json.load(f)
        pods = {}
        for entry in entries:
            pods.setdefault((entry["pod"], entry["namespace"]), []).append(entry)
        return b"".join(pod_resources(name, namespace, grouped)
                        for (name, namespace), grouped in pods.items())

    return serve(socket_path, "v1.PodResourcesLister", "List", list_pod_resources)

if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
