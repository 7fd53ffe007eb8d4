"""A fresh Debian bookworm root file system with the .deb installed by apt, as a user would
install it on a new machine (mmdebstrap from Debian's mirror; RDMASCOPE_MIRROR overrides it).
Shared by deb_chroot.py (commands run chrooted) and deb_systemd.py (the tree booted with
systemd-nspawn)."""

import os
import shutil
import subprocess

# mmdebstrap of a small tree takes about a minute; a slow mirror gets five.
BUILD_TIMEOUT = 300


def mirrors():
    mirror = os.environ.get("RDMASCOPE_MIRROR", "http://deb.debian.org/debian")
    security = mirror.rsplit("/debian", 1)[0] + "/debian-security"
    return [f"deb {mirror} bookworm main", f"deb {mirror} bookworm-updates main",
            f"deb {security} bookworm-security main"]


def package_version(deb):
    return subprocess.run(["dpkg-deb", "--field", deb, "Version"], capture_output=True,
                          text=True, check=True).stdout.strip()


def build(deb, root, include=()):
    """(Re)creates `root`: bookworm's apt variant, the .deb and `include` (package names).
    apt resolves the package's dependencies from the mirror, as `apt install ./x.deb` does,
    and runs its postinst (user, unit enabled)."""
    remove(root)
    os.makedirs(os.path.dirname(os.path.abspath(root)), exist_ok=True)
    # file-mirror-automount: dpkg runs chrooted and must see the .deb (mmdebstrap(1)).
    subprocess.run(["mmdebstrap", "--variant=apt", "--mode=root", "--format=directory",
                    "--hook-dir=/usr/share/mmdebstrap/hooks/file-mirror-automount",
                    f"--include={os.path.abspath(deb)}",
                    *[f"--include={name}" for name in include], "bookworm", root,
                    *mirrors()], check=True, timeout=BUILD_TIMEOUT)


def remove(root):
    """Deletes the tree, after detaching anything still mounted below it (a test that was
    killed half-way), so that rmtree never descends into a host file system."""
    root = os.path.abspath(root)
    with open("/proc/self/mountinfo") as mountinfo:
        mounts = [line.split()[4] for line in mountinfo]
    for mount in sorted((m for m in mounts if m == root or m.startswith(root + "/")),
                        key=len, reverse=True):
        subprocess.run(["umount", "--lazy", "--recursive", mount], capture_output=True)
    shutil.rmtree(root, ignore_errors=True)
