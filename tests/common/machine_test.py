#!/usr/bin/env python3
"""Unit: machine.py tells a machine whose root is a mount point from a chroot that is not one
(mountinfo lines as the kernel prints them in each), names the tool that is missing, and
require() fails with exactly one line."""

import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import machine  # noqa: E402

# A VM's root file system, as /proc/self/mountinfo lists it.
MACHINE = """\
22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
23 22 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
24 22 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:2 - sysfs sysfs rw
"""
# The same machine seen from `chroot /var/tmp/tree` after mounting /proc and /sys there: the
# tree's own directory is no mount point, so the kernel skips the root's line.
CHROOT = """\
91 22 0:21 / /proc rw,relatime - proc proc rw
92 22 0:22 / /sys rw,nosuid,nodev,noexec,relatime - sysfs sysfs rw
"""
# The tree bind-mounted on itself before the chroot (packaging/fresh-check.sh does this).
CHROOT_BOUND = """\
90 22 254:0 /var/tmp/tree / rw,relatime - ext4 /dev/vda rw
91 90 0:21 / /proc rw,relatime - proc proc rw
"""


class RootMountPoint(unittest.TestCase):
    def test_machine(self):
        self.assertTrue(machine.root_is_mount_point(MACHINE))

    def test_chroot_without_its_own_mount(self):
        self.assertFalse(machine.root_is_mount_point(CHROOT))
        self.assertFalse(machine.root_is_mount_point(""))

    def test_chroot_bound_on_itself(self):
        self.assertTrue(machine.root_is_mount_point(CHROOT_BOUND))

    def test_this_process(self):
        with open("/proc/self/mountinfo") as f:
            text = f.read()
        self.assertEqual(machine.missing("mount-namespace") is None,
                         machine.root_is_mount_point(text) and
                         machine.shutil.which("unshare") is not None)


class Missing(unittest.TestCase):
    def test_sentence_names_the_mount_point(self):
        reason = machine.missing("netns", mountinfo_text=CHROOT)
        if machine.shutil.which("ip") is None:
            self.assertIn("iproute2", reason)
        else:
            self.assertIn("/ as a mount point", reason)
            self.assertIn("mount --bind ROOT ROOT", reason)

    def test_all_present(self):
        old = os.environ["PATH"]
        with tempfile.TemporaryDirectory() as tools:
            for tool in ("ip", "unshare", "systemd-nspawn", "mmdebstrap"):
                path = os.path.join(tools, tool)
                with open(path, "w") as f:
                    f.write("#!/bin/sh\n")
                os.chmod(path, 0o755)
            os.environ["PATH"] = tools
            try:
                self.assertIsNone(machine.missing("netns", "nspawn", "mmdebstrap",
                                                  mountinfo_text=MACHINE))
            finally:
                os.environ["PATH"] = old

    def test_tool_missing(self):
        old = os.environ["PATH"]
        with tempfile.TemporaryDirectory() as empty:
            os.environ["PATH"] = empty
            try:
                self.assertIn("systemd-container",
                              machine.missing("nspawn", mountinfo_text=MACHINE))
                self.assertIn("util-linux",
                              machine.missing("mount-namespace", mountinfo_text=MACHINE))
            finally:
                os.environ["PATH"] = old

    def test_unknown_requirement(self):
        with self.assertRaises(ValueError):
            machine.missing("a-gpu", mountinfo_text=MACHINE)


class Require(unittest.TestCase):
    def test_one_line_and_exit_1(self):
        with tempfile.TemporaryDirectory() as empty:
            run = subprocess.run(
                [sys.executable, "-c", "import machine; machine.require('nspawn'); print('ran')"],
                cwd=os.path.dirname(os.path.abspath(__file__)), capture_output=True, text=True,
                env={**os.environ, "PATH": empty, "PYTHONPATH": os.path.dirname(
                    os.path.abspath(__file__))})
        self.assertEqual(run.returncode, 1)
        self.assertEqual(len(run.stdout.splitlines()), 1, run.stdout)
        self.assertTrue(run.stdout.startswith("FAIL: this machine lacks systemd-nspawn"))
        self.assertNotIn("ran", run.stdout)


if __name__ == "__main__":
    unittest.main()
