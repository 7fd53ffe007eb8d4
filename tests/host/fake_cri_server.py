#!/usr/bin/python3
"""A stand-in for a container runtime's CRI socket, for tests: runtime.v1.RuntimeService/
ListContainers on a unix socket, answering with the containers a JSON file lists (read again at
each call: [{"id", "pod", "namespace", "uid", "container"}]) as containerd's CRI plugin does,
with the kubelet's labels. While a file named HANG sits beside the JSON file, each call hangs
for 60 s first (a runtime that stopped answering).

Debian's python3-grpcio (so /usr/bin/python3), and no generated code: the messages are encoded
by hand (field numbers of k8s.io/cri-api's runtime/v1/api.proto).

Usage: fake_cri_server.py SOCKET CONTAINERS_JSON   (prints READY once listening; stops on
SIGTERM, at once, calls in flight or not). Each call is appended to CONTAINERS_JSON + ".calls"
(one line per call, as it arrives); each call answered also to CONTAINERS_JSON + ".timing": its
start (epoch seconds), the handler's wall and CPU seconds (reading the file and encoding the
answer; gRPC's own work not included), the containers listed and the response's bytes."""

import json
import os
import signal
import sys
import time
from concurrent import futures

import grpc


def varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field(number, payload):
    """A length-delimited field (string, bytes, message)."""
    if isinstance(payload, str):
        payload = payload.encode()
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def container(entry):
    labels = {
        "io.kubernetes.pod.name": entry["pod"],
        "io.kubernetes.pod.namespace": entry["namespace"],
        "io.kubernetes.pod.uid": entry["uid"],
        "io.kubernetes.container.name": entry["container"],
    }
    body = field(1, entry["id"]) + field(2, "sandbox-" + entry["id"][:12])
    body += field(3, field(1, entry["container"]) + varint(2 << 3 | 0) + varint(0))  # metadata
    body += varint(6 << 3 | 0) + varint(1)  # state: CONTAINER_RUNNING
    for key, value in labels.items():
        body += field(8, field(1, key) + field(2, value))
    return field(1, body)


def serve(socket_path, service, method, answer):
    """Serves one unary method on a unix socket, raw bytes in and out, until SIGTERM (gone at
    once, as a runtime or kubelet that dies: a call held by HANG would keep the interpreter, its
    worker thread, for the rest of its 60 s). Prints READY once listening."""
    handler = grpc.method_handlers_generic_handler(service, {
        method: grpc.unary_unary_rpc_method_handler(
            answer, request_deserializer=lambda raw: raw, response_serializer=lambda raw: raw),
    })
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port(f"unix://{socket_path}")
    server.start()
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    print("READY", flush=True)
    server.wait_for_termination()
    return 0


def main(socket_path, containers_json):
    hang_file = os.path.join(os.path.dirname(containers_json), "HANG")

    def list_containers(request, context):
        started = time.time()
        with open(containers_json + ".calls", "a") as calls:
            calls.write(f"{started} {len(request)}\n")
        if os.path.exists(hang_file):
            time.sleep(60)
        wall, cpu = time.perf_counter(), time.thread_time()
        with open(containers_json) as f:
            entries = json.load(f)
        answer = b"".join(container(entry) for entry in entries)
        wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
        with open(containers_json + ".timing", "a") as timing:
            timing.write(f"{started} {wall:.6f} {cpu:.6f} {len(entries)} {len(answer)}\n")
        return answer

    return serve(socket_path, "runtime.v1.RuntimeService", "ListContainers", list_containers)

if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
