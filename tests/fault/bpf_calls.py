#!/usr/bin/env python3
"""libbpf calls failing (issue 18 item 3): the exporter runs with tests/fault/bpf_faults.c
preloaded, which fails bpf_map_lookup_elem, bpf_map_get_next_key, the skeletons' load or the
probes' attach on demand (the words in the file RDMASCOPE_BPF_FAULTS names).

- Map reads failing while a process holds 5 regions: no rdma_mr_outstanding_regions for it
  and no rdma_mr_lost_total made up as 0 (before the fix the failed globals read served
  lost_total{reason="calls"} 0 and the failed walk "0 processes"); the mr collector says
  failed with the errno, and the log has it.
- The fault gone, the same exporter reports the 5 regions exactly again: it recovers.
- Load or attach failing at start: the exporter serves, rdmascope_probe_attached{probe="mr"}
  is 0 and the reason is logged; nothing crashes.

Usage: bpf_calls.py RDMASCOPE_BINARY MR_WORKLOAD LIBFAKEVERBS BPF_FAULTS_SO"""

import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
import harness  # noqa: E402
from fault_checks import BpfFaults, Checks  # noqa: E402

REGIONS = 5
SIZE = 4096


def start(workload, library):
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(library))
    proc = subprocess.Popen([workload, "1", str(REGIONS), str(SIZE), str(REGIONS), "0", "0"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)
    ready = proc.stdout.readline().split()
    if ready[:1] != ["READY"]:
        proc.kill()
        raise RuntimeError(f"workload did not start: {ready}")
    return proc, ready[1]


def main(binary, workload, library, shim):
    if os.geteuid() != 0:
        print("SKIP: eBPF probes need root")
        return harness.SKIP
    checks = Checks()
    expect = checks.expect
    args = ["--collector.disable-defaults", "--collector.mr", f"--probe.library={library}"]
    with BpfFaults(shim) as faults:
        fail, env = faults.set, faults.env
        with harness.Exporter(binary, args, env=env) as exporter:
            samples = harness.parse(exporter.metrics())
            if harness.value(samples, "rdmascope_probe_attached", probe="mr") != 1.0:
                print(exporter.read_log())
                print("SKIP: MR probes did not attach here")
                return harness.SKIP
            proc, pid = start(workload, library)
            try:
                samples = harness.parse(exporter.metrics())
                expect("outstanding regions, no fault",
                       harness.value(samples, "rdma_mr_outstanding_regions", pid=pid),
                       float(REGIONS))
                for words, why in (("lookup", "cannot walk the MR probes' process map"),
                                   ("next_key", "cannot walk the MR probes' process map")):
                    fail(words)
                    samples = harness.parse(exporter.metrics())
                    expect(f"{words} failing: no outstanding series",
                           harness.series(samples, "rdma_mr_outstanding_regions", pid=pid), {})
                    expect(f"{words} failing: no made-up lost_total",
                           harness.series(samples, "rdma_mr_lost_total", reason="calls"), {})
                    expect(f"{words} failing: mr collector failed",
                           harness.value(samples, "rdmascope_collector_success",
                                         collector="mr"), 0.0)
                    expect(f"{words} failing: reason logged", why in exporter.read_log(), True)
                    fail("")
                    samples = harness.parse(exporter.metrics())
                    expect(f"after {words}: outstanding regions again",
                           harness.value(samples, "rdma_mr_outstanding_regions", pid=pid),
                           float(REGIONS))
                    expect(f"after {words}: mr collector success",
                           harness.value(samples, "rdmascope_collector_success",
                                         collector="mr"), 1.0)
            finally:
                proc.stdin.close()
                proc.wait(timeout=20)
            if exporter.proc.poll() is not None:
                checks.fail("exporter died")

        for words in ("load", "attach"):
            fail(words)
            with harness.Exporter(binary, args, env=env) as exporter:
                samples = harness.parse(exporter.metrics())
                expect(f"{words} failing: probe not attached",
                       harness.value(samples, "rdmascope_probe_attached", probe="mr"), 0.0)
                expect(f"{words} failing: reason logged",
                       "mr probes not attached" in exporter.read_log(), True)
                expect(f"{words} failing: no outstanding series",
                       harness.series(samples, "rdma_mr_outstanding_regions"), {})
                if exporter.proc.poll() is not None:
                    checks.fail(f"exporter died with {words} failing")
    return checks.result()


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
