#!/usr/bin/env python3
"""Injected faults in sysfs reads (issue 18 item 3), with libfiu: the exporter runs with
libfiu's POSIX preload (what `fiu-run -x` sets up; no code change) and `fiu-ctrl` makes
open(2), read(2), opendir(3) fail while it serves, unconditionally or at random, with a chosen
errno. libfiu's control thread is started by fiu_late_control.so once the exporter has dropped
its capabilities (it refuses to drop them while another thread exists; see that file).

For every fault, against the scrape taken before it (the fixture tree does not change):
- the exporter answers every scrape with 200 and does not die or hang;
- every rdma_* series it serves during the fault has the value it had before: a failed read
  is a missing series, never a made-up 0 (the one allowance: an _info series whose identity
  labels could not be read has them empty, docs/testing.md "Faults");
- an unreadable /sys/class/infiniband is a failed collection with its reason, not "no RDMA
  device on this host" (rdmascope_collector_no_data would be a false claim);
- once the fault stops, the next scrape has every series back, with the same values, and
  rdmascope_collector_success{collector="rdma"} is 1 again.

Usage: sysfs_faults.py RDMASCOPE_BINARY FIXTURES_DIR FIU_LATE_CONTROL_SO"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
import harness  # noqa: E402

EIO, EACCES, EMFILE = 5, 13, 24

# (what, libfiu remote-control command, whether the rdma collector must report a failure)
FAULTS = [
    ("every open() fails with EIO", f"enable name=posix/io/oc/open,failinfo={EIO}", False),
    ("every read() fails with EIO", f"enable name=posix/io/rw/read,failinfo={EIO}", False),
    ("a third of reads fail with EIO",
     f"enable_random name=posix/io/rw/read,probability=0.33,failinfo={EIO}", False),
    ("opendir() fails with EACCES", f"enable name=posix/io/dir/opendir,failinfo={EACCES}", True),
    ("opendir() fails with EMFILE", f"enable name=posix/io/dir/opendir,failinfo={EMFILE}", True),
]


def rdma_series(samples):
    return {key: value for key, value in samples.items() if key[0].startswith("rdma_")}


def blanked_info(key, value, baseline):
    """An _info series whose identity labels could not be read: the same series as one before,
    with some label values emptied (docs/testing.md, "Faults": a known gap, allowed)."""
    name, labels = key
    if not name.endswith("_info") or value != 1:
        return False
    labels = dict(labels)
    for (other_name, other_labels), other_value in baseline.items():
        other = dict(other_labels)
        if other_name == name and other_value == 1 and other.keys() == labels.keys() and all(
                labels[k] in ("", other[k]) for k in labels):
            return True
    return False


def show(key):
    name, labels = key
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels)) + "}"


FIU_LIBS = "/usr/lib/fiu"  # Debian's fiu-utils: fiu_run_preload.so, fiu_posix_preload.so


def fiu_env(control_so, fifo_base):
    return {"LD_PRELOAD": f"{FIU_LIBS}/fiu_run_preload.so {FIU_LIBS}/fiu_posix_preload.so "
                          f"{control_so}",
            "FIU_CTRL_FIFO": "", "FIU_ENABLE": "", "RDMASCOPE_FIU_FIFO": fifo_base}


def fiu_ctrl(fifo_base, pid, command):
    subprocess.run(["fiu-ctrl", "-f", fifo_base, "-c", command, str(pid)], check=True,
                   timeout=10)


def wait_control(exporter):
    """libfiu's control FIFO exists once the server started (fiu_late_control.so)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        match = re.search(r"fiu-late-control: (\w+)", exporter.read_log())
        if match:
            return match.group(1) == "ready"
        time.sleep(0.05)
    return False


def scrape(exporter, what, failures):
    status, body = exporter.get()
    if status != 200:
        failures.append(f"{what}: scrape answered HTTP {status}")
        return None
    return harness.parse(body)


def main(binary, fixtures, control_so):
    if shutil.which("fiu-ctrl") is None or not os.path.exists(f"{FIU_LIBS}/fiu_posix_preload.so"):
        print("SKIP: libfiu's preload libraries or fiu-ctrl missing (Debian package fiu-utils)")
        return harness.SKIP
    failures = []
    with tempfile.TemporaryDirectory(prefix="rdmascope-fault-sysfs-") as work:
        sysfs = os.path.join(work, "sys")
        fifo = os.path.join(work, "fiu-ctrl")
        harness.materialise_tree(os.path.join(fixtures, "sysfs", "rdma_hosts.tree"), sysfs)
        with harness.Exporter(binary, ["--collector.disable-defaults", "--collector.rdma",
                                       f"--path.sysfs={sysfs}"],
                              env=fiu_env(control_so, fifo)) as exporter:
            pid = exporter.proc.pid
            if not wait_control(exporter):
                print(exporter.read_log())
                print("FAIL: libfiu's remote control did not start")
                return 1
            before = scrape(exporter, "before any fault", failures)
            baseline = rdma_series(before or {})
            if len(baseline) < 50:
                failures.append(f"baseline scrape has {len(baseline)} rdma_* series")
            for what, command, must_fail in FAULTS:
                fiu_ctrl(fifo, pid, command)
                during = scrape(exporter, what, failures)
                fiu_ctrl(fifo, pid, "disable name=" + command.split("name=")[1].split(",")[0])
                if during is not None:
                    present = rdma_series(during)
                    changed = [f"{show(k)} = {v}, before {baseline.get(k)}"
                               for k, v in present.items()
                               if baseline.get(k) != v and not blanked_info(k, v, baseline)]
                    if changed:
                        failures.append(f"{what}: {len(changed)} series with a value not "
                                        f"read from sysfs, e.g. {changed[:3]}")
                    success = harness.value(during, "rdmascope_collector_success",
                                            collector="rdma")
                    no_data = harness.value(during, "rdmascope_collector_no_data",
                                            collector="rdma")
                    if must_fail and (success != 0 or no_data != 0):
                        failures.append(f"{what}: rdma collector success={success} "
                                        f"no_data={no_data}, want a failure (0, 0): the "
                                        f"devices are there, only unreadable")
                    print(f"{what}: {len(present)} of {len(baseline)} rdma_* series served, "
                          f"none invented; collector success={success} no_data={no_data}")
                after = scrape(exporter, f"after {what}", failures)
                if after is not None:
                    if rdma_series(after) != baseline:
                        failures.append(f"after {what}: series differ from before the fault")
                    if harness.value(after, "rdmascope_collector_success",
                                     collector="rdma") != 1:
                        failures.append(f"after {what}: rdma collector did not recover")
                if exporter.proc.poll() is not None:
                    failures.append(f"{what}: exporter died:\n{exporter.read_log()[-2000:]}")
                    break
            log = exporter.read_log()
            if failures:
                print(log[-3000:])
            else:
                reason = re.search(r".*cannot list \S*/class/infiniband: Permission denied.*", log)
                if reason:
                    print("ok: logged:", reason.group(0))
                else:
                    failures.append("no log line gives why /class/infiniband was not listed")
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3]))
