"""What a test needs of the machine, checked before the test starts (issue 25): a machine that
lacks it gets one line naming what is missing and how to get it, and the test fails (exit 1),
instead of a tool's error half-way through (`unshare: cannot change root filesystem
propagation: Invalid argument`) that reads like a defect of rdmascope.

    import machine
    machine.require("mount-namespace", "nspawn")

Standard library only."""

import os
import shutil
import sys

MOUNTINFO = "/proc/self/mountinfo"


def root_is_mount_point(mountinfo_text):
    """True when "/" is a mount point in the caller's view. The kernel lists only the mounts
    reachable from the caller's root (fs/proc_namespace.c show_mountinfo skips the others), so
    in a chroot whose directory is not itself a mount point no line has "/" as its mount point
    (field 5)."""
    for line in mountinfo_text.splitlines():
        fields = line.split()
        if len(fields) > 4 and fields[4] == "/":
            return True
    return False


def _read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def _mount_namespace(mountinfo_text):
    if shutil.which("unshare") is None:
        return "unshare(1) (util-linux)"
    if not root_is_mount_point(mountinfo_text):
        return ("/ as a mount point: this root is a directory of another file system (a chroot?), "
                "so `unshare --mount`, `ip netns exec`/`ip -n` and systemd-nspawn cannot make "
                "their mounts private; run in a machine or container whose root is a mount point "
                "(for a chroot: `mount --bind ROOT ROOT` before entering it)")
    return None


def _netns(mountinfo_text):
    if shutil.which("ip") is None:
        return "ip(8) (iproute2)"
    return _mount_namespace(mountinfo_text)


def _nspawn(mountinfo_text):
    if shutil.which("systemd-nspawn") is None:
        return "systemd-nspawn (packaging/install-deps.sh installs systemd-container)"
    return _mount_namespace(mountinfo_text)


def _mmdebstrap(mountinfo_text):
    if shutil.which("mmdebstrap") is None:
        return "mmdebstrap (packaging/install-deps.sh installs it)"
    return _mount_namespace(mountinfo_text)


CHECKS = {
    "mount-namespace": _mount_namespace,
    "netns": _netns,
    "nspawn": _nspawn,
    "mmdebstrap": _mmdebstrap,
}


def missing(*needs, mountinfo_text=None):
    """The first of `needs` this machine lacks, as a sentence; None when it has them all."""
    if mountinfo_text is None:
        mountinfo_text = _read(MOUNTINFO)
    for need in needs:
        if need not in CHECKS:
            raise ValueError(f"unknown machine requirement {need!r}")
        reason = CHECKS[need](mountinfo_text)
        if reason:
            return reason
    return None


def require(*needs):
    """Exits 1 with one line if the machine lacks any of `needs`."""
    reason = missing(*needs)
    if reason:
        print(f"FAIL: this machine lacks {reason}", flush=True)
        sys.exit(1)
