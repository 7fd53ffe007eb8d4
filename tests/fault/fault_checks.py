"""What the fault tests share: the checks they print and count, and the control file of the
libbpf failure shim (tests/fault/bpf_faults.c, LD_PRELOADed into the exporter)."""

import os
import tempfile


class Checks:
    """expect() prints "ok"/"FAIL" per check and keeps the failures; result() prints them and
    gives the exit status."""

    def __init__(self):
        self.failures = []

    def expect(self, what, got, want):
        print(("ok" if got == want else "FAIL") + f": {what}: {got}" +
              ("" if got == want else f", want {want}"))
        if got != want:
            self.failures.append(what)

    def fail(self, what):
        self.failures.append(what)

    def result(self):
        for failure in self.failures:
            print("FAIL:", failure)
        return 1 if self.failures else 0


class BpfFaults:
    """The shim's control file: set("next_key@3") makes the named libbpf calls fail from now on
    (words as bpf_faults.c reads them), set("") stops. env is what the exporter needs."""

    def __init__(self, shim):
        control = tempfile.NamedTemporaryFile(prefix="rdmascope-bpf-faults-", mode="w",
                                              delete=False)
        control.close()
        self.path = control.name
        self.env = {"LD_PRELOAD": shim, "RDMASCOPE_BPF_FAULTS": self.path}

    def set(self, words):
        with open(self.path, "w") as f:
            f.write(words)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        os.unlink(self.path)
