#include "sys/unwind_sandbox.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/close_range.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/capability.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>

#include "sys/elf_cache.h"
#include "sys/spawn_helper.h"
#include "sys/unwind_protocol.h"
#include "sys/unwind_worker.h"

namespace rdmascope::sys {
namespace {

constexpr uid_t kNobody = 65534;
constexpr int kSocket = kHelperSocket;

std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

void Layer(std::string& out, const char* name, const std::string& refused) {
  out += name;
  out += refused.empty() ? "=1\n" : "=0 (" + refused + ")\n";
}

std::string BecomeNobody() {
  // Not root (the packaged service runs as user rdmascope): nothing of root's to shed.
  if (getuid() != 0 && geteuid() != 0) return "";
  // Groups first (setgroups needs CAP_SETGID, which setresuid takes away with the uid).
  if (setgroups(0, nullptr) != 0) return Errno("setgroups");
  if (setresgid(kNobody, kNobody, kNobody) != 0) return Errno("setresgid");
  if (setresuid(kNobody, kNobody, kNobody) != 0) _exit(4);  // groups gone, uid kept: stop
  return "";
}

std::string EnterNamespaces() {
  if (unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS) != 0) {
    // No user namespaces here: a sysctl (user.max_user_namespaces), a container runtime's
    // seccomp profile, systemd's RestrictNamespaces=.
    return Errno("unshare");
  }
  return "";
}

// An empty read-only tmpfs as the root, in the worker's own mount namespace. /proc is the
// mount point: every system the exporter runs on has one (mounting over it hides nothing the
// worker needs). Refused (systemd's SystemCallFilter= without @mount), the worker keeps the
// exporter's view of the file system, where the seccomp filter still refuses every open.
std::string EnterEmptyRoot(bool namespaces) {
  if (!namespaces) return "no mount namespace of its own";
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return Errno("mount");
  if (mount("rdmascope-unwind", "/proc", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
            "size=4k,nr_inodes=1,mode=0555") != 0) {
    return Errno("mount tmpfs");
  }
  if (mount(nullptr, "/proc", nullptr, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
            nullptr) != 0 ||
      chdir("/proc") != 0 || chroot(".") != 0 || chdir("/") != 0) {
    _exit(4);  // an empty root half made: the worker must not go on from there
  }
  return "";
}

std::string DropCapabilities() {
  for (cap_value_t cap = 0; cap <= CAP_LAST_CAP; ++cap) {
    if (prctl(PR_CAPBSET_READ, cap) > 0 && prctl(PR_CAPBSET_DROP, cap) != 0 && errno != EINVAL) {
      // Without CAP_SETPCAP (no user namespace, not root): the other sets below still go, and
      // no_new_privs keeps execve from using the bounding set.
      break;
    }
  }
  prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  cap_t none = cap_init();
  const int result = none != nullptr ? cap_set_proc(none) : -1;
  if (none != nullptr) cap_free(none);
  if (result != 0) _exit(4);
  return "";
}

std::string SetLimits(const UnwindSandboxLimits& limits) {
  // Never above the limits the worker inherited: lowering needs no privilege.
  const auto set = [](int resource, rlim_t value) {
    rlimit current{};
    if (getrlimit(resource, &current) == 0 && current.rlim_max < value) value = current.rlim_max;
    const rlimit limit{.rlim_cur = value, .rlim_max = value};
    return setrlimit(resource, &limit) == 0;
  };
  if (!set(RLIMIT_AS, limits.address_space_bytes) || !set(RLIMIT_CPU, limits.cpu_seconds) ||
      !set(RLIMIT_NOFILE, limits.open_files) || !set(RLIMIT_FSIZE, 0) || !set(RLIMIT_CORE, 0) ||
      !set(RLIMIT_NPROC, 0)) {
    return Errno("setrlimit");
  }
  return "";
}

// What parsing, the allocator, the protocol and the C++ runtime need: found by running the
// host, hostile and lab MR tests with SCMP_ACT_LOG as the default action (the kernel's audit
// log then names each call outside the list; docs/security.md).
// One action for each of `calls`, unconditional: nonzero when libseccomp refused one.
int AddRules(scmp_filter_ctx filter, uint32_t action, std::initializer_list<int> calls) {
  int failed = 0;
  for (const int call : calls) failed |= seccomp_rule_add(filter, action, call, 0);
  return failed;
}

std::string InstallSeccomp() {
  scmp_filter_ctx filter = seccomp_init(SCMP_ACT_KILL_PROCESS);
  if (filter == nullptr) return "seccomp_init failed";
  // I/O on the descriptors it was given, memory, time, the protocol, exit; tgkill and
  // rt_sigaction for abort(), whose signal is the crash the parent sees; sysinfo, read-only
  // counters glibc's qsort asks (sysconf _SC_PHYS_PAGES) before it allocates a merge buffer:
  // libdw sorts a separate debug file's address ranges with it (host_mr_exec_images: SIGSYS).
  int failed = AddRules(filter, SCMP_ACT_ALLOW, {SCMP_SYS(read),         SCMP_SYS(write),
                                                 SCMP_SYS(pread64),      SCMP_SYS(readv),
                                                 SCMP_SYS(writev),       SCMP_SYS(recvmsg),
                                                 SCMP_SYS(sendmsg),      SCMP_SYS(close),
                                                 SCMP_SYS(fstat),        SCMP_SYS(newfstatat),
                                                 SCMP_SYS(statx),        SCMP_SYS(lseek),
                                                 SCMP_SYS(fcntl),        SCMP_SYS(dup),
                                                 SCMP_SYS(munmap),       SCMP_SYS(mremap),
                                                 SCMP_SYS(madvise),      SCMP_SYS(brk),
                                                 SCMP_SYS(futex),        SCMP_SYS(clock_gettime),
                                                 SCMP_SYS(gettimeofday), SCMP_SYS(getpid),
                                                 SCMP_SYS(gettid),       SCMP_SYS(getrandom),
                                                 SCMP_SYS(rt_sigreturn), SCMP_SYS(rt_sigprocmask),
                                                 SCMP_SYS(rt_sigaction), SCMP_SYS(tgkill),
                                                 SCMP_SYS(sched_yield),  SCMP_SYS(setitimer),
                                                 SCMP_SYS(exit),         SCMP_SYS(exit_group),
                                                 SCMP_SYS(sysinfo)});
  // Memory, never executable: nothing the worker maps is code.
  for (const int call : {SCMP_SYS(mmap), SCMP_SYS(mprotect)}) {
    failed |= seccomp_rule_add(filter, SCMP_ACT_ALLOW, call, 1,
                               SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
  }
  // libdw and libelf open files by name in a few places (an alternate file, a split unit):
  // they fail as on a host without the file, rather than kill the worker.
  failed |= AddRules(filter, SCMP_ACT_ERRNO(EACCES),
                     {SCMP_SYS(open), SCMP_SYS(openat), SCMP_SYS(openat2)});
  // Names looked up without opening (libdwfl resolves a module's path with readlink, the one
  // such call the lab's tests made under SCMP_ACT_LOG): as in the empty root, nothing there.
  failed |=
      AddRules(filter, SCMP_ACT_ERRNO(ENOENT),
               {SCMP_SYS(readlink), SCMP_SYS(readlinkat), SCMP_SYS(stat), SCMP_SYS(lstat),
                SCMP_SYS(access), SCMP_SYS(faccessat), SCMP_SYS(faccessat2), SCMP_SYS(getcwd)});
  if (failed == 0) failed = seccomp_load(filter);
  seccomp_release(filter);
  if (failed != 0) _exit(4);  // everything else applied: refusing to run without the filter
  return "";
}

}  // namespace

std::string EnterUnwindSandbox(pid_t parent, const UnwindSandboxLimits& limits) {
  // Killed with the thread that started it; and if that already happened, not left running.
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(5);
  prctl(PR_SET_DUMPABLE, 0);  // no core dump, no ptrace by nobody of a tenant's stack bytes
  // Descriptors the exporter may have left open (none should be: they are O_CLOEXEC).
  syscall(SYS_close_range, kSocket + 1, ~0U, 0);
  std::string layers;
  Layer(layers, "uid", BecomeNobody());
  const std::string namespaces = EnterNamespaces();
  Layer(layers, "namespaces", namespaces);
  Layer(layers, "empty_root", EnterEmptyRoot(namespaces.empty()));
  Layer(layers, "capabilities", DropCapabilities());
  Layer(layers, "no_new_privs", prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 ? "" : Errno("prctl"));
  Layer(layers, "rlimits", SetLimits(limits));
  Layer(layers, "seccomp", InstallSeccomp());
  return layers;
}

int UnwindWorkerMain(int argc, char** argv) {
  if (argc != 3) return 2;
  char* end = nullptr;
  const long parent = std::strtol(argv[2], &end, 10);
  if (end == argv[2] || *end != '\0' || parent <= 0) return 2;
  if (!HelperSocketIsReady()) return 2;
  const std::string layers = EnterUnwindSandbox(static_cast<pid_t>(parent));
  if (!unwind_protocol::Send(
          kSocket, unwind_protocol::Writer(unwind_protocol::Type::kReady).String(layers))) {
    return 0;
  }
  SetMaxCopiedElfBytes(kMaxElfFileBytes);  // sys/elf_cache.h: RLIMIT_AS bounds the copies here
  UnwindWorker worker(kSocket);
  return worker.Serve();
}

}  // namespace rdmascope::sys
