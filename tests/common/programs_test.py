#!/usr/bin/env python3
"""Unit: programs.py sees the programs a test starts (Python, shell, CMake) and not the lists
that only look like commands, and tells a package a fresh bookworm plus install-deps.sh brings
from one neither brings: the check that would have caught `/usr/bin/time` (issue 36)."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import programs  # noqa: E402


def names(found, kind="program"):
    return sorted({name for _, name, k in found if k == kind})


class ScanPython(unittest.TestCase):
    def test_commands_through_wrappers(self):
        found = programs.scan_python(
            'import subprocess, yaml\n'
            'subprocess.run(["promtool", "check", "rules", path])\n'
            'subprocess.run(["ip", "netns", "exec", ns, "curl", "-s", url])\n'
            'run(["/usr/bin/time", "-v", binary])\n'
            'cmd = ["timeout", "5", "hey", "-n", "1"]\n'
            'subprocess.run(["env", "A=1", "unshare", "--net", "openssl", "x"])\n'
            'if shutil.which("chromium"): pass\n'
            'PROGRAMS = ["ibv_devinfo", "rdma"]\n')
        self.assertEqual(names(found), ["/usr/bin/time", "chromium", "curl", "env", "hey",
                                        "ibv_devinfo", "ip", "openssl", "promtool", "rdma",
                                        "timeout", "unshare"])
        self.assertEqual(names(found, "module"), ["subprocess", "yaml"])

    def test_lists_that_are_no_commands(self):
        found = programs.scan_python(
            'build(deb, root, include=["systemd", "curl"])\n'           # a keyword's names
            'SHAPES = {"systemd": ("system.slice/x.service", {"u": 1})}\n'  # a table's tuple
            'for collector in ("ethtool", "rdma"): pass\n'              # a loop's names
            'check(["GET", "/metrics"])\n'                              # an HTTP request line
            'run(["ip", "link"])  # programs: ignore\n')
        self.assertEqual(names(found), [])

    def test_relative_imports_are_the_tests_own(self):
        found = programs.scan_python("from . import harness\nfrom harness import run\n")
        self.assertEqual(names(found, "module"), ["harness"])


class ScanShell(unittest.TestCase):
    def test_command_positions(self):
        found = programs.scan_shell(
            '#!/usr/bin/env bash\n'
            'set -euo pipefail\n'
            'helper() { echo hi; }\n'
            'X=1 mmdebstrap --variant=apt bookworm "$dir"  # a comment naming curl\n'
            'if ! command -v qemu-system-x86_64 >/dev/null; then exit 1; fi\n'
            'out=$(git -C "$root" rev-parse HEAD) && tar -cf - . | gzip -9 > x\n'
            'cat <<EOF\nlintian is here only as text\nEOF\n'
            'sudo buildah \\\n  from scratch\n'
            'helper\n')
        self.assertEqual(names(found), ["buildah", "cat", "git", "gzip", "mmdebstrap",
                                        "qemu-system-x86_64", "sudo", "tar"])


class ScanCMake(unittest.TestCase):
    def test_commands_and_find_program(self):
        found = programs.scan_cmake(
            'add_test(NAME a COMMAND ${Python3_EXECUTABLE} x.py)\n'
            'add_test(NAME b COMMAND env A=1 sh run.sh)\n'
            'find_program(PROMTOOL promtool REQUIRED)\n'
            'find_program(CLANG NAMES clang-16 clang PATHS /usr/lib/llvm-16/bin)\n')
        self.assertEqual(names(found), ["clang", "clang-16", "env", "promtool"])


STATUS = """\
Package: coreutils
Status: install ok installed
Essential: yes
Depends: libc6

Package: libc6
Status: install ok installed

Package: apt
Status: install ok installed
Depends: libc6

Package: git
Status: install ok installed

Package: ca-certificates
Status: install ok installed

Package: prometheus
Status: install ok installed
Depends: adduser | passwd, libc6

Package: adduser
Status: install ok installed

Package: time
Status: install ok installed

Package: gawk
Status: install ok installed
Provides: awk
"""


class Installable(unittest.TestCase):
    def setUp(self):
        files = {"coreutils": ["/bin/cat"], "prometheus": ["/usr/bin/promtool"],
                 "time": ["/usr/bin/time"], "adduser": ["/usr/sbin/adduser"]}
        self.saved = programs.package_files
        programs.package_files = lambda package: files.get(package)

    def tearDown(self):
        programs.package_files = self.saved

    def check(self, declared, install_deps=(["prometheus"], [])):
        problems, _, _ = programs.check_installable(declared, {}, STATUS, install_deps)
        return problems

    def test_fresh_and_install_deps_and_their_dependencies(self):
        self.assertEqual(self.check({"cat": (["coreutils"], False),
                                     "promtool": (["prometheus"], False),
                                     "adduser": (["adduser"], False)}), [])

    def test_a_tool_installed_by_hand_is_not_enough(self):
        problems = self.check({"/usr/bin/time": (["time"], False)})
        self.assertEqual(len(problems), 1)
        self.assertIn("neither in a fresh bookworm", problems[0])
        self.assertEqual(self.check({"/usr/bin/time": (["time"], False)},
                                    (["prometheus", "time"], [])), [])

    def test_optional_is_not_required(self):
        self.assertEqual(self.check({"/usr/bin/time": (["time"], True)}), [])

    def test_package_must_ship_the_program(self):
        problems = self.check({"promtool": (["coreutils"], False)})
        self.assertEqual(len(problems), 1)
        self.assertIn("does not ship it", problems[0])

    def test_install_deps_must_have_run(self):
        problems = self.check({}, (["prometheus", "hey"], []))
        self.assertIn("run packaging/install-deps.sh first", problems[0])

    def test_install_deps_lists_are_read(self):
        required, conditional = programs.install_deps_packages()
        self.assertIn("time", required)
        self.assertIn("cmake", required)
        self.assertEqual(conditional, ["npm"])


class Manifest(unittest.TestCase):
    def test_the_real_manifest_parses(self):
        declared, modules = programs.read_manifest()
        self.assertEqual(declared["promtool"], (["prometheus"], False))
        self.assertEqual(declared["perf"], (["linux-perf"], True))
        self.assertIn("yaml", modules)

    def test_an_undeclared_program_in_a_source_fails_the_scan(self):
        declared, modules = programs.read_manifest()
        del declared["promtool"]
        problems = programs.check_scan(declared, modules, files=["tests/rules/check_rules.py"])
        self.assertTrue(any("runs promtool, not declared" in p for p in problems), problems)


if __name__ == "__main__":
    unittest.main(verbosity=2)
