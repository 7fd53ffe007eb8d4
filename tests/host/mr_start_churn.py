#!/usr/bin/env python3
"""Host tier (issue 27): the exporter started 20 times while a program loops
ibv_reg_mr/ibv_dereg_mr (uprobes on the libibverbs stand-in; this host's kernel refuses the
fentry path). After each start the loop stops and the program holds 25 regions: exactly 25
must be outstanding, every time. Attaching the registration probes before the
deregistration ones (the order of the old entry-point table) left phantom regions whenever a
deregistration ran in between; the lab scenario mr_start_churn does the same on both paths
with the real stack."""

import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
import harness  # noqa: E402

STARTS, HOLD, SIZE = 20, 25, 8192


def main(binary, program, library):
    if os.geteuid() != 0:
        print("SKIP: BPF needs root")
        return 77
    env = {**os.environ, "LD_LIBRARY_PATH": os.path.dirname(library)}
    failures = []
    workdir = tempfile.mkdtemp(prefix="mr-start-churn-")
    for start in range(1, STARTS + 1):
        stop, ready = os.path.join(workdir, f"stop{start}"), os.path.join(workdir, f"ready{start}")
        churner = subprocess.Popen([program, str(HOLD), stop, ready], env=env,
                                   stdout=subprocess.PIPE, text=True)
        try:
            # Staggered: the attach meets the loop at another instant each time.
            time.sleep(0.05 + (start * 37 % 200) / 1000)
            with harness.Exporter(binary, ["--collector.disable-defaults", "--collector.mr",
                                           "--collector.mr.tracking=uprobes",
                                           f"--probe.library={library}"]) as exporter:
                time.sleep(0.2)  # the loop goes on with every probe attached
                open(stop, "w").close()
                deadline = time.monotonic() + 30
                while not os.path.exists(ready) and time.monotonic() < deadline:
                    time.sleep(0.02)
                pairs = churner.stdout.readline().split()[-1] if os.path.exists(ready) else "?"
                samples = harness.parse(exporter.metrics())
                pid = str(churner.pid)
                got = (harness.value(samples, "rdma_mr_outstanding_regions", pid=pid),
                       harness.value(samples, "rdma_mr_outstanding_bytes", pid=pid))
                regs = harness.value(samples, "rdma_mr_registrations_total", pid=pid)
                deregs = harness.value(samples, "rdma_mr_deregistrations_total", pid=pid)
                ok = got == (float(HOLD), float(HOLD * SIZE))
                print(("ok" if ok else "FAIL") + f": start {start}: outstanding {got}, "
                      f"registrations {regs}, deregistrations {deregs}, loop pairs {pairs}")
                if not ok:
                    failures.append(f"start {start}: outstanding {got}, want "
                                    f"({HOLD}, {HOLD * SIZE})")
        finally:
            churner.kill()
            churner.wait()
    if failures:
        print("FAIL:", "; ".join(failures))
        return 1
    print(f"PASS: {STARTS} starts during churn, {HOLD} regions outstanding after each")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
