#!/usr/bin/env python3
"""Assembles the soft-RoCE lab guest: Debian's stock kernel (fetched with `apt-get download`,
cached) and an initramfs made of the host's own files: busybox-static, rdma-core with the rxe
provider, ibverbs-utils, perftest, iproute2's `rdma`, the freshly built rdmascope, every shared
library they need, the lab's init and scenarios. Deterministic: sorted entries, fixed mtimes.

Usage: build_guest.py --rdmascope BIN --out DIR [--cache DIR]
Writes DIR/vmlinuz and DIR/initrd.cpio.gz; prints nothing else on success."""

import argparse
import glob
import gzip
import hashlib
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# Load order that works with busybox insmod (no modprobe, no modules.dep): see the lab notes.
# veth: the soak's interface churn (scenarios/soak.sh).
MODULES = ["virtio_ring", "virtio", "virtio_pci_modern_dev", "virtio_pci_legacy_dev", "virtio_pci",
           "failover", "net_failover", "virtio_net", "crc32_generic", "udp_tunnel",
           "ip6_udp_tunnel", "ib_core", "ib_uverbs", "rdma_rxe", "veth"]

PROGRAMS = ["ibv_rc_pingpong", "ibv_srq_pingpong", "ibv_devinfo", "ibv_devices", "ib_write_bw",
            "ib_send_lat", "rdma"]
PROVIDER = "/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so"
PROVIDER_CONFIG = "/etc/libibverbs.d/rxe.driver"
# Loaded with dlopen, so ldd of the binary does not name them (docs/architecture.md): libcurl by
# `doctor --exporter`, libpfm4 while perf event names are resolved, libarchive by a .tar.gz
# capture.
RUNTIME_LIBRARIES = ["/lib/x86_64-linux-gnu/libcurl.so.4", "/lib/x86_64-linux-gnu/libpfm.so.4",
                     "/lib/x86_64-linux-gnu/libarchive.so.13"]
# Ours, found beside the binary: the pprof encoder `profile` loads.
PPROF_LIBRARY = "librdmascope_pprof.so"


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def kernel_package():
    """The versioned image package that linux-image-amd64 depends on."""
    out = run(["apt-cache", "depends", "linux-image-amd64"]).stdout
    match = re.search(r"Depends: (linux-image-[0-9][^\s]*-amd64)", out)
    if not match:
        raise SystemExit("cannot resolve linux-image-amd64 (run apt-get update?):\n" + out)
    return match.group(1)


def fetch_kernel(cache):
    os.makedirs(cache, exist_ok=True)
    package = kernel_package()
    debs = glob.glob(os.path.join(cache, package + "_*.deb"))
    if not debs:
        # apt drops privileges to _apt for downloads; let it write into the cache.
        subprocess.run(["chown", "_apt", cache], capture_output=True)
        run(["apt-get", "download", "-q", package], cwd=cache)
        debs = glob.glob(os.path.join(cache, package + "_*.deb"))
    deb = sorted(debs)[-1]
    extracted = os.path.join(cache, "extracted-" + os.path.basename(deb))
    if not os.path.isdir(extracted):
        tmp = extracted + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        run(["dpkg-deb", "-x", deb, tmp])
        os.rename(tmp, extracted)
    vmlinuz = sorted(glob.glob(os.path.join(extracted, "boot", "vmlinuz-*")))[-1]
    modules_dir = sorted(glob.glob(os.path.join(extracted, "lib", "modules", "*")))[-1]
    return vmlinuz, modules_dir


def shared_libraries(paths):
    """Every library `ldd` names for these files, with the dynamic loader."""
    libs = set()
    for path in paths:
        out = subprocess.run(["ldd", path], capture_output=True, text=True).stdout
        for line in out.splitlines():
            match = re.search(r"=> (/\S+)", line) or re.match(r"\s*(/\S+)", line)
            if match:
                libs.add(match.group(1))
    return libs


def copy(src, root, dest=None):
    dest = os.path.join(root, (dest or src).lstrip("/"))
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    shutil.copy2(os.path.realpath(src), dest)
    return dest


def stage(root, rdmascope, modules_dir, helpers=()):
    for d in ("bin", "sbin", "usr/bin", "usr/sbin", "proc", "sys", "dev", "tmp", "run", "etc",
              "root", "lib/modules", "scenarios", "sys/fs/bpf"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    copy("/bin/busybox", root)
    programs = [shutil.which(p) for p in PROGRAMS]
    missing = [p for p, path in zip(PROGRAMS, programs) if path is None]
    if missing:
        raise SystemExit(f"missing on the host: {missing} (run packaging/install-deps.sh)")
    for path in programs:
        copy(path, root, "/usr/bin/" + os.path.basename(path))
    copy(rdmascope, root, "/usr/bin/rdmascope")
    pprof = os.path.join(os.path.dirname(rdmascope), PPROF_LIBRARY)
    if not os.path.isfile(pprof):
        raise SystemExit(f"{pprof} is missing: build the whole tree, not only rdmascope")
    copy(pprof, root, "/usr/bin/" + PPROF_LIBRARY)
    missing = [lib for lib in RUNTIME_LIBRARIES if not os.path.exists(lib)]
    if missing:
        raise SystemExit(f"missing on the host: {missing} (run packaging/install-deps.sh)")
    for helper in helpers:
        copy(helper, root, "/usr/bin/" + os.path.basename(helper))
    copy(PROVIDER, root)
    copy(PROVIDER_CONFIG, root)
    # ldd names a library's dependencies, not the library: the run-time ones are added.
    for lib in sorted(set(RUNTIME_LIBRARIES) | shared_libraries(
            programs + [rdmascope, pprof, PROVIDER, *helpers, *RUNTIME_LIBRARIES])):
        copy(lib, root)
    # glibc resolves names through nsswitch; the guest has no users or hosts beyond these.
    with open(os.path.join(root, "etc/passwd"), "w") as f:
        f.write("root:x:0:0:root:/root:/bin/sh\n")
    with open(os.path.join(root, "etc/group"), "w") as f:
        f.write("root:x:0:\n")
    with open(os.path.join(root, "etc/hosts"), "w") as f:
        f.write("127.0.0.1 localhost\n")
    for module in MODULES:
        found = glob.glob(os.path.join(modules_dir, "kernel", "**", module + ".ko"),
                          recursive=True)
        if len(found) != 1:
            raise SystemExit(f"kernel module {module}: found {found}")
        copy(found[0], root, f"/lib/modules/{module}.ko")
    with open(os.path.join(root, "lib/modules/order"), "w") as f:
        f.write("\n".join(MODULES) + "\n")
    copy(os.path.join(HERE, "guest_init.sh"), root, "/init")
    os.chmod(os.path.join(root, "init"), 0o755)
    for script in sorted(glob.glob(os.path.join(HERE, "scenarios", "*.sh"))):
        copy(script, root, "/scenarios/" + os.path.basename(script))
    copy(os.path.join(HERE, "scenarios", "lib.sh"), root, "/scenarios/lib.sh")


def pack(root, out_path):
    """newc cpio of the tree, entries sorted, mtimes zeroed, gzip without a timestamp."""
    entries = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            entries.append(os.path.relpath(os.path.join(dirpath, name), root))
    for entry in entries:
        os.utime(os.path.join(root, entry), (0, 0), follow_symlinks=False)
    listing = ("\n".join(sorted(entries)) + "\n").encode()
    data = subprocess.run(["cpio", "-o", "-H", "newc", "--reproducible", "--quiet"], cwd=root,
                          input=listing, capture_output=True, check=True).stdout
    with open(out_path, "wb") as f:
        with gzip.GzipFile(fileobj=f, mode="wb", compresslevel=6, mtime=0) as gz:
            gz.write(data)
    return hashlib.sha256(data).hexdigest()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rdmascope", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--cache", default=None)
    parser.add_argument("--helper", action="append", default=[],
                        help="a scenario helper program to put on the guest's PATH")
    args = parser.parse_args()
    cache = args.cache or os.path.join(args.out, "cache")
    vmlinuz, modules_dir = fetch_kernel(cache)
    root = os.path.join(args.out, "rootfs")
    shutil.rmtree(root, ignore_errors=True)
    stage(root, os.path.abspath(args.rdmascope), modules_dir,
          [os.path.abspath(h) for h in args.helper])
    shutil.copy2(vmlinuz, os.path.join(args.out, "vmlinuz"))
    digest = pack(root, os.path.join(args.out, "initrd.cpio.gz"))
    print(f"guest: kernel {os.path.basename(vmlinuz)}, initramfs sha256 {digest[:16]}")


if __name__ == "__main__":
    sys.exit(main())
