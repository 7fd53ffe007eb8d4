"""A process named as a test chooses that registers memory: how the hostile-name tests
(host/hostile_comm.py, hostile/hostile_comm_output.py) put a name in front of the exporter.

The child renames itself with prctl(PR_SET_NAME), the kernel's comm (at most 15 bytes:
include/linux/sched.h TASK_COMM_LEN) that bpf_get_current_comm() copies into the mr probes'
records, then registers one 8 KiB region through the libibverbs stand-in (tests/host/fakeverbs)
and holds it until stopped. The name goes as hex: any byte, a newline or invalid UTF-8 included,
reaches prctl unchanged.

    with named_registrar.NamedRegistrar(library, b"\\x1b[1m") as child:
        if child.ready:
            ...  # child.pid holds one region under that comm

Standard library only."""

import subprocess
import sys

# The child: renames itself, registers one region through the stand-in, waits for stdin.
CHILD = r"""
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
PR_SET_NAME = 15
if libc.prctl(PR_SET_NAME, ctypes.c_char_p(bytes.fromhex(sys.argv[2])), 0, 0, 0) != 0:
    sys.exit("prctl failed")
verbs = ctypes.CDLL(sys.argv[1])
verbs.ibv_reg_mr.restype = ctypes.c_void_p
verbs.ibv_reg_mr.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
buf = ctypes.create_string_buffer(8192)
if not verbs.ibv_reg_mr(None, buf, 8192, 1):
    sys.exit("ibv_reg_mr failed")
print("READY", flush=True)
sys.stdin.readline()
"""


class NamedRegistrar:
    """The child started and waited for: `ready` is True once it registered under `name`
    (bytes). preexec_fn: passed to Popen (cgroups.joiner: start it in a cgroup)."""

    def __init__(self, library, name, preexec_fn=None):
        self.name = name
        self.proc = subprocess.Popen([sys.executable, "-c", CHILD, library, name.hex()],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     preexec_fn=preexec_fn)
        self.pid = self.proc.pid
        self.ready = self.proc.stdout.readline().strip() == "READY"

    def kernel_comm(self):
        """The name as the kernel keeps it (/proc/PID/comm, without its newline)."""
        with open(f"/proc/{self.pid}/comm", "rb") as f:
            return f.read()[:-1]

    def stop(self):
        """Lets the child exit and waits for it (once; again does nothing)."""
        if self.proc.returncode is None:
            self.proc.communicate("x\n", timeout=30)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False
