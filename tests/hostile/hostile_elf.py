#!/usr/bin/env python3
"""Hostile tier (issue 37, items 2 and 3): hostile ELF files fed to the real unwinder.

A process registers memory once through each of several copies of one library
(hostile_elf_lib, -O2 -g, no frame pointers), each copy rewritten as a tenant could:
  fifo_up      stripped, .gnu_debuglink "../fifo"            (a FIFO beside its directory)
  watchdog     stripped, .gnu_debuglink "../../dev/watchdog" (a FIFO standing for the device)
  absolute     stripped, .gnu_debuglink "/<tmp>/absolute_fifo"
  truncated    .debug_info and .symtab pointing past the end of the file
  bad_shoff    the section header table past the end of the file
  zlib_huge    SHF_COMPRESSED .debug_info claiming 1 TiB once inflated
  zdebug_huge  GNU .zdebug_info claiming 1 TiB (when objcopy still writes zlib-gnu)
  cyclic       hand-written DWARF: an inlined subroutine whose abstract origin is itself
The MR probes capture each registration's stack and the stack thread unwinds and symbolizes
it with those files. Before issue 37 libdwfl opened the debuglinks as paths in the exporter's
namespace (open(O_RDONLY) on a FIFO blocks for good): the stack thread hung, and with it
/debug/mr/stacks. Asserted: no FIFO is ever opened (its reader count; strace of the exporter
when strace is installed), /metrics answers within 3 s throughout and /debug/mr/stacks within
5 s, a benign process's stack keeps its names, and the refused files are said to be refused."""

import errno
import json
import os
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "e2e"))
import harness  # noqa: E402

SIZE = 65536
SCRAPE_LIMIT = 3.0
STACKS_LIMIT = 5.0


# --- ELF64 little-endian editing --------------------------------------------------------
def sections(data):
    """{name: (header offset, sh_offset, sh_size)} of an ELF64 file."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [shoff + i * shentsize for i in range(shnum)]
    strtab_offset, = struct.unpack_from("<Q", data, headers[shstrndx] + 24)
    out = {}
    for header in headers:
        name_offset, = struct.unpack_from("<I", data, header)
        offset, size = struct.unpack_from("<QQ", data, header + 24)
        end = data.index(b"\0", strtab_offset + name_offset)
        out[data[strtab_offset + name_offset:end].decode()] = (header, offset, size)
    return out


def symbol(data, name):
    """(value, size) of a .symtab symbol."""
    table = sections(data)
    _, symtab, symtab_size = table[".symtab"]
    _, strtab, _ = table[".strtab"]
    for entry in range(symtab, symtab + symtab_size, 24):
        name_offset, = struct.unpack_from("<I", data, entry)
        value, size = struct.unpack_from("<QQ", data, entry + 8)
        end = data.index(b"\0", strtab + name_offset)
        if data[strtab + name_offset:end].decode() == name:
            return value, size
    raise KeyError(name)


def patch(path, edit):
    data = bytearray(open(path, "rb").read())
    edit(data)
    with open(path, "wb") as f:
        f.write(data)


def objcopy(*args):
    subprocess.run(["objcopy", *args], check=True, capture_output=True)


def debuglink_section(directory, name):
    """.gnu_debuglink contents: the name, NUL, padding to 4, a CRC (any: never checked)."""
    raw = name.encode() + b"\0"
    raw += b"\0" * (-len(raw) % 4) + struct.pack("<I", 0x12345678)
    path = os.path.join(directory, "debuglink.bin")
    with open(path, "wb") as f:
        f.write(raw)
    return path


def with_debuglink(library, out, directory, name):
    objcopy("--strip-all", "--add-section", ".gnu_debuglink=" + debuglink_section(directory, name),
            library, out)


def truncated(library, out):
    shutil.copy(library, out)

    def edit(data):
        table = sections(data)
        header, _, _ = table[".debug_info"]
        struct.pack_into("<Q", data, header + 32, 1 << 40)  # sh_size far past the end
        header, _, _ = table[".symtab"]
        struct.pack_into("<Q", data, header + 24, len(data) - 8)  # sh_offset at the end
    patch(out, edit)


def bad_shoff(library, out):
    shutil.copy(library, out)
    patch(out, lambda data: struct.pack_into("<Q", data, 0x28, len(data) + 4096))


def zlib_huge(library, out):
    objcopy("--compress-debug-sections=zlib-gabi", library, out)

    def edit(data):
        _, offset, _ = sections(data)[".debug_info"]
        struct.pack_into("<Q", data, offset + 8, 1 << 40)  # Elf64_Chdr.ch_size
    patch(out, edit)


def zdebug_huge(library, out):
    objcopy("--compress-debug-sections=zlib-gnu", library, out)

    def edit(data):
        _, offset, _ = sections(data)[".zdebug_info"]
        assert data[offset:offset + 4] == b"ZLIB"
        struct.pack_into(">Q", data, offset + 4, 1 << 40)
    patch(out, edit)


def cyclic(library, out, directory):
    """One CU over the library's two functions: a subprogram, inside it an inlined subroutine
    whose DW_AT_abstract_origin is itself (libdw's dwarf_attr_integrate follows such chains)."""
    data = open(library, "rb").read()
    starts = [symbol(data, name) for name in ("hostile_inner", "hostile_register")]
    low = min(value for value, _ in starts)
    high = max(value + size for value, size in starts)
    abbrev = bytes([
        1, 0x11, 1, 0x11, 0x01, 0x12, 0x07, 0, 0,        # compile_unit: low_pc addr, high_pc data8
        2, 0x2E, 1, 0x03, 0x08, 0x11, 0x01, 0x12, 0x07, 0, 0,  # subprogram: name string
        3, 0x1D, 0, 0x31, 0x13, 0x11, 0x01, 0x12, 0x07, 0, 0,  # inlined: abstract_origin ref4
        0])
    body = struct.pack("<HIB", 4, 0, 8)                   # DWARF 4, abbrev 0, 8-byte addresses
    body += bytes([1]) + struct.pack("<QQ", low, high - low)
    body += bytes([2]) + b"outer\0" + struct.pack("<QQ", low, high - low)
    self_offset = 4 + len(body)                           # from the unit's start
    body += bytes([3]) + struct.pack("<IQQ", self_offset, low, high - low)
    body += bytes([0, 0])
    info = struct.pack("<I", len(body)) + body
    files = {}
    for name, contents in ((".debug_info", info), (".debug_abbrev", abbrev)):
        files[name] = os.path.join(directory, name.strip(".") + ".bin")
        with open(files[name], "wb") as f:
            f.write(contents)
    objcopy("--remove-section=.debug_*", "--add-section", ".debug_info=" + files[".debug_info"],
            "--add-section", ".debug_abbrev=" + files[".debug_abbrev"], library, out)


# --- The test -----------------------------------------------------------------------------
def fifo_has_reader(path):
    """Whether some process has the FIFO open for reading (or is blocked opening it): a
    non-blocking open for writing succeeds only then (fs/pipe.c fifo_open, ENXIO)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as err:
        if err.errno == errno.ENXIO:
            return False
        raise
    os.close(fd)
    return True


def unwind_workers(parent):
    """The exporter's sandboxed unwinder workers (`rdmascope __unwind-worker`)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                argv = cmdline.read().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if ppid == parent and len(argv) > 1 and argv[1] == b"__unwind-worker":
            found.append(int(entry))
    return found


def status_fields(pid, names):
    fields = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            name, _, value = line.partition(":")
            if name in names:
                fields[name] = value.split()[0] if value.split() else ""
    return fields


def timed_get(exporter, path, limit, slowest):
    start = time.monotonic()
    status, body = exporter.get(path, timeout=limit + 5)
    took = time.monotonic() - start
    slowest[path.split("?")[0]] = max(slowest.get(path.split("?")[0], 0), took)
    return status, body, took


def names(stack):
    return [frame["function"].split("+")[0] for frame in stack["frames"]]


def main(binary, host, library, fakeverbs):
    if os.geteuid() != 0:
        print("SKIP: BPF needs root")
        return 77
    check = harness.Checker()
    work = tempfile.mkdtemp(prefix="rdmascope-hostile-elf-")
    os.chmod(work, 0o755)
    processes = []
    strace = None
    try:
        fifos = [os.path.join(work, "fifo"), os.path.join(work, "dev", "watchdog"),
                 os.path.join(work, "absolute_fifo")]
        os.makedirs(os.path.join(work, "dev"))
        for fifo in fifos:
            os.mkfifo(fifo, 0o666)
        a = os.path.join(work, "a")
        b = os.path.join(a, "b")
        os.makedirs(b)
        variants = {
            "fifo_up": os.path.join(a, "libhostile_fifo_up.so"),
            "watchdog": os.path.join(b, "libhostile_watchdog.so"),
            "absolute": os.path.join(a, "libhostile_absolute.so"),
            "truncated": os.path.join(a, "libhostile_truncated.so"),
            "bad_shoff": os.path.join(a, "libhostile_bad_shoff.so"),
            "zlib_huge": os.path.join(a, "libhostile_zlib_huge.so"),
            "zdebug_huge": os.path.join(a, "libhostile_zdebug_huge.so"),
            "cyclic": os.path.join(a, "libhostile_cyclic.so"),
        }
        with_debuglink(library, variants["fifo_up"], work, "../fifo")
        with_debuglink(library, variants["watchdog"], work, "../../dev/watchdog")
        with_debuglink(library, variants["absolute"], work, fifos[2])
        truncated(library, variants["truncated"])
        bad_shoff(library, variants["bad_shoff"])
        zlib_huge(library, variants["zlib_huge"])
        try:
            zdebug_huge(library, variants["zdebug_huge"])
        except (subprocess.CalledProcessError, KeyError, AssertionError):
            print("note: objcopy writes no zlib-gnu sections here: zdebug_huge left out")
            del variants["zdebug_huge"]
        cyclic(library, variants["cyclic"], work)
        benign = os.path.join(work, "libbenign.so")
        shutil.copy(library, benign)

        env = {**os.environ, "LD_LIBRARY_PATH": os.path.dirname(fakeverbs)}
        with harness.Exporter(binary, ["--collector.disable-defaults", "--collector.mr",
                                       "--collector.mr.tracking=uprobes",
                                       f"--probe.library={fakeverbs}"]) as exporter:
            trace_log = os.path.join(work, "strace.log")
            # The ELF files are parsed by the sandboxed worker (started with the MR probes):
            # as the kernel sees it, no capability, no_new_privs, a seccomp filter, nobody.
            workers = unwind_workers(exporter.proc.pid)
            check.expect("one unwinder worker", len(workers), 1)
            for worker in workers:
                check.expect("the worker's sandbox (/proc/PID/status)",
                             status_fields(worker, {"Seccomp", "NoNewPrivs", "CapEff", "CapPrm",
                                                    "Uid"}),
                             {"Seccomp": "2", "NoNewPrivs": "1", "CapEff": "0000000000000000",
                              "CapPrm": "0000000000000000", "Uid": "65534"})
            if shutil.which("strace"):
                # The exporter and its worker: what either opens, or tries to.
                strace = subprocess.Popen(
                    ["strace", "-f", "-qq", "-e", "trace=open,openat,openat2", "-o", trace_log,
                     "-p", str(exporter.proc.pid)] +
                    [arg for worker in workers for arg in ("-p", str(worker))],
                    stderr=subprocess.DEVNULL)
                time.sleep(1.0)  # attached to every thread
            else:
                print("note: strace not installed: the FIFOs' reader counts only")
            slowest = {}
            exporter.metrics()  # the first collection starts the stack thread
            hostile = subprocess.Popen([host, str(SIZE), *variants.values()], env=env,
                                       stdout=subprocess.PIPE, text=True)
            processes.append(hostile)
            good = subprocess.Popen([host, str(SIZE), benign], env=env, stdout=subprocess.PIPE,
                                    text=True)
            processes.append(good)
            for proc in (hostile, good):
                if proc.stdout.readline().strip() != "ready":
                    raise RuntimeError("a host program did not get ready")
            # Every sample unwound (and symbolized) by the stack thread, /metrics answering
            # throughout.
            deadline = time.monotonic() + 30
            reader_seen = set()
            while True:
                status, body, took = timed_get(exporter, "/metrics", SCRAPE_LIMIT, slowest)
                samples = harness.parse(body)
                sent = harness.value(samples, "rdmascope_mr_stack_samples_total", result="sent")
                done = harness.value(samples, "rdmascope_mr_stacks_unwound_total")
                reader_seen |= {fifo for fifo in fifos if fifo_has_reader(fifo)}
                if (sent and sent == done) or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            check.expect("every sample unwound", sent is not None and sent == done, True)
            layers = {dict(labels)["layer"]: value for labels, value in
                      harness.series(samples, "rdmascope_mr_unwind_worker_sandbox").items()}
            check.expect("the worker's sandbox layers (/metrics)", layers,
                         {layer: 1.0 for layer in ("uid", "namespaces", "empty_root",
                                                   "capabilities",
                                                   "no_new_privs", "rlimits", "seccomp")})
            restarts = {dict(labels)["reason"]: value for labels, value in
                        harness.series(samples,
                                       "rdmascope_mr_unwind_worker_restarts_total").items()}
            print(f"unwinder worker restarts: {restarts}")
            status, body, _ = timed_get(exporter, f"/debug/mr/stacks?pid={hostile.pid}&top=100",
                                        STACKS_LIMIT, slowest)
            check.expect("/debug/mr/stacks for the hostile process", status, 200)
            stacks = json.loads(body)["processes"][0]["stacks"] if status == 200 else []
            status, body, _ = timed_get(exporter, f"/debug/mr/stacks?pid={good.pid}",
                                        STACKS_LIMIT, slowest)
            good_stacks = json.loads(body)["processes"][0]["stacks"] if status == 200 else []
            reader_seen |= {fifo for fifo in fifos if fifo_has_reader(fifo)}
            for _ in range(3):
                timed_get(exporter, "/metrics", SCRAPE_LIMIT, slowest)
            check.expect("the exporter is running", exporter.proc.poll(), None)
            if strace:
                strace.terminate()
                strace.wait(timeout=10)
                # Any open naming a FIFO: its path, or a path ending as a debuglink's does.
                endings = ('/fifo"', '/watchdog"', '/absolute_fifo"')
                opened = [line.strip() for line in open(trace_log, errors="replace")
                          if any(fifo in line for fifo in fifos) or
                          any(ending in line for ending in endings)]
                check.expect("FIFOs opened (strace)", opened, [])
                debuginfod = [line for line in open(trace_log, errors="replace")
                              if "debuginfod" in line]
                check.expect("debuginfod consulted (strace)", debuginfod, [])

        for stack in stacks:
            print(f"hostile stack: {names(stack)} unwind={stack['unwind']!r} "
                  f"stop={stack.get('unwind_stop', '')!r} "
                  f"missing={stack.get('symbols_missing', '')!r}")
        for stack in good_stacks:
            print(f"benign stack: {names(stack)} unwind={stack['unwind']!r}")
        check.expect("FIFOs with a reader", sorted(reader_seen), [])
        check.expect("one stack per hostile library", len(stacks), len(variants))
        check.expect("every hostile stack starts at the registration",
                     all(stack["frames"] for stack in stacks), True)
        refused = [s for s in stacks if "file refused" in s.get("symbols_missing", "") +
                   s.get("unwind_stop", "")]
        check.expect("the compressed bombs said to be refused",
                     any("inflates to more than" in s.get("symbols_missing", "") +
                         s.get("unwind_stop", "") for s in refused), True)
        good_names = names(good_stacks[0]) if good_stacks else []
        check.expect("the benign stack named through the library",
                     [n for n in good_names if n in ("hostile_inner", "hostile_register", "main")],
                     ["hostile_inner", "hostile_register", "main"])
        check.expect("the benign stack unwound with", good_stacks[0]["unwind"] if good_stacks
                     else None, "dwarf")
        print(f"slowest answers: " + ", ".join(f"{path} {took:.2f} s"
                                               for path, took in slowest.items()))
        check.expect("/metrics within 3 s", slowest.get("/metrics", 99) < SCRAPE_LIMIT, True)
        check.expect("/debug/mr/stacks within 5 s",
                     slowest.get("/debug/mr/stacks", 99) < STACKS_LIMIT, True)
    finally:
        if strace and strace.poll() is None:
            strace.kill()
        for proc in processes:
            proc.kill()
            proc.wait()
        # A blocked open of a FIFO would keep the exporter's thread stuck: unblock it.
        for fifo in (os.path.join(work, "fifo"), os.path.join(work, "dev", "watchdog"),
                     os.path.join(work, "absolute_fifo")):
            try:
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass
        shutil.rmtree(work, ignore_errors=True)
    return check.result()


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
