// The sandbox the unwinder worker enters before it reads a byte of its parent's requests, as
// systemd-coredump parses crashed programs: every ELF, CFI and DWARF byte the worker parses
// comes from a tenant, so a bug in libelf or libdw reachable from a hostile file must find a
// process that can do nothing but answer its parent. Layers, each independent of the others (a
// host that refuses one still gets the rest, and the worker says which it got):
//   uid          root's worker becomes nobody (65534): no file, process or capability of
//                root's is its own (an exporter that is not root keeps its own uid)
//   namespaces   a user, mount, network, IPC and UTS namespace of its own
//   empty_root   its root an empty read-only tmpfs (no /proc, no /dev, nothing to open)
//   capabilities none, in any set, the bounding and ambient sets emptied
//   no_new_privs no execve can give any back
//   rlimits      address space, CPU time, descriptors, file size and core dumps bounded
//   seccomp      an allow-list of the system calls parsing needs; open() fails with EACCES,
//                anything else not listed kills the worker (the parent restarts it)
#pragma once

#include <sys/types.h>

#include <string>

namespace rdmascope::sys {

struct UnwindSandboxLimits {
  // The worker maps the ELF files it parses (at most 1 GiB each, sys/untrusted_files.h) and
  // keeps the recently used ones (sys/elf_cache.h).
  unsigned long long address_space_bytes = 4ULL << 30;
  // A backstop only (the parent's per-request deadline is the real bound): a worker that has
  // used this much CPU in its life is killed by the kernel and restarted.
  unsigned long long cpu_seconds = 600;
  unsigned long long open_files = 1024;
};

// Enters every layer it can. "layer=1" or "layer=0 (why)" lines, in the order above. Never
// returns when a layer half applied leaves the process in a state it cannot vouch for (it
// _exit()s). `parent`: the pid that must still be the parent once the death signal is armed.
std::string EnterUnwindSandbox(pid_t parent, const UnwindSandboxLimits& limits = {});

// `rdmascope __unwind-worker PARENT_PID`: the socket is descriptor 3. Enters the sandbox, says
// so (kReady), then serves (sys/unwind_worker.h).
int UnwindWorkerMain(int argc, char** argv);

}  // namespace rdmascope::sys
