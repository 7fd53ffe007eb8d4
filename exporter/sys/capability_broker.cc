#include "sys/capability_broker.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <set>

#include "core/log.h"
#include "core/sysfs.h"
#include "sys/debug_files.h"
#include "sys/process_access.h"
#include "sys/spawn_helper.h"
#include "sys/unwind_protocol.h"

namespace rdmascope::sys {
namespace {

namespace wire = unwind_protocol;
constexpr uid_t kNobody = 65534;

const char* OpName(BrokerOp op) {
  switch (op) {
    case BrokerOp::kMaps:
      return "maps";
    case BrokerOp::kOpenMapping:
      return "open_mapping";
    case BrokerOp::kOpenInRoot:
      return "open_in_root";
    case BrokerOp::kNamespaces:
      return "namespaces";
    case BrokerOp::kUverbsHolders:
      return "uverbs_holders";
  }
  return "unknown";
}

std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// ---- the broker's side ----

void Layer(std::string& out, const char* name, const std::string& refused) {
  out += name;
  out += refused.empty() ? "=1\n" : "=0 (" + refused + ")\n";
}

// Needs CAP_SETPCAP (root): done first, while the broker still has it. Without it (an
// exporter started as another user with ambient capabilities) the bounding set stays, as it
// does for serve (core/capabilities.h): no_new_privs keeps any execve from using it.
void ReduceBoundingSet(const caps::CapabilitySet& keep) {
  for (cap_value_t cap = 0; cap <= CAP_LAST_CAP; ++cap) {
    if (keep.contains(cap) || prctl(PR_CAPBSET_READ, cap) <= 0) continue;
    if (prctl(PR_CAPBSET_DROP, cap) != 0) return;
  }
}

// Root's broker becomes nobody and keeps its permitted set across the change (PR_SET_KEEPCAPS;
// the effective set is emptied by it and raised again below).
std::string BecomeNobody() {
  if (getuid() != 0 && geteuid() != 0) return "";
  if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0) return Errno("PR_SET_KEEPCAPS");
  if (setgroups(0, nullptr) != 0) return Errno("setgroups");
  if (setresgid(kNobody, kNobody, kNobody) != 0) return Errno("setresgid");
  if (setresuid(kNobody, kNobody, kNobody) != 0) _exit(4);  // groups gone, uid kept: stop
  prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0);
  return "";
}

// Permitted = effective = `keep` (of what is held), nothing inheritable or ambient. The
// capabilities now held, by name.
std::string KeepOnly(const caps::CapabilitySet& keep, std::string& held) {
  prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  cap_t current = cap_get_proc();
  if (current == nullptr) _exit(4);
  std::vector<cap_value_t> values;
  for (const caps::Capability cap : keep) {
    cap_flag_value_t permitted = CAP_CLEAR;
    if (cap_get_flag(current, cap, CAP_PERMITTED, &permitted) == 0 && permitted == CAP_SET) {
      values.push_back(cap);
    }
  }
  cap_free(current);
  cap_t next = cap_init();
  if (next == nullptr) _exit(4);
  const int count = static_cast<int>(values.size());
  if (count > 0 && (cap_set_flag(next, CAP_PERMITTED, count, values.data(), CAP_SET) != 0 ||
                    cap_set_flag(next, CAP_EFFECTIVE, count, values.data(), CAP_SET) != 0)) {
    _exit(4);
  }
  const int result = cap_set_proc(next);
  cap_free(next);
  if (result != 0) _exit(4);  // still holding what it was started with: must not serve
  // Fewer than asked when serve was started without some: "held=" says so, serve logs it.
  held = caps::Names(caps::CapabilitySet(values.begin(), values.end()));
  return "";
}

std::string SetLimits() {
  const auto set = [](int resource, rlim_t value) {
    rlimit current{};
    if (getrlimit(resource, &current) == 0 && current.rlim_max < value) value = current.rlim_max;
    const rlimit limit{.rlim_cur = value, .rlim_max = value};
    return setrlimit(resource, &limit) == 0;
  };
  // Descriptors: /proc, one process's directory, a file and its reopening at most at a time.
  if (!set(RLIMIT_NPROC, 0) || !set(RLIMIT_FSIZE, 0) || !set(RLIMIT_CORE, 0) ||
      !set(RLIMIT_NOFILE, 64)) {
    return Errno("setrlimit");
  }
  return "";
}

int Allow(scmp_filter_ctx filter, std::initializer_list<int> calls) {
  int failed = 0;
  for (const int call : calls) failed |= seccomp_rule_add(filter, SCMP_ACT_ALLOW, call, 0);
  return failed;
}

std::string InstallSeccomp() {
  scmp_filter_ctx filter = seccomp_init(SCMP_ACT_ERRNO(EPERM));
  if (filter == nullptr) return "seccomp_init failed";
  int failed = Allow(filter, {SCMP_SYS(read),           SCMP_SYS(write),
                              SCMP_SYS(pread64),        SCMP_SYS(recvmsg),
                              SCMP_SYS(sendmsg),        SCMP_SYS(close),
                              SCMP_SYS(fstat),          SCMP_SYS(newfstatat),
                              SCMP_SYS(statx),          SCMP_SYS(lseek),
                              SCMP_SYS(fcntl),          SCMP_SYS(getdents64),
                              SCMP_SYS(readlink),       SCMP_SYS(readlinkat),
                              SCMP_SYS(openat2),        SCMP_SYS(mmap),
                              SCMP_SYS(munmap),         SCMP_SYS(mremap),
                              SCMP_SYS(madvise),        SCMP_SYS(brk),
                              SCMP_SYS(mprotect),       SCMP_SYS(futex),
                              SCMP_SYS(clock_gettime),  SCMP_SYS(gettimeofday),
                              SCMP_SYS(getpid),         SCMP_SYS(gettid),
                              SCMP_SYS(getrandom),      SCMP_SYS(rt_sigreturn),
                              SCMP_SYS(rt_sigprocmask), SCMP_SYS(rt_sigaction),
                              SCMP_SYS(tgkill),         SCMP_SYS(exit),
                              SCMP_SYS(exit_group)});
  // Opens for reading only (O_PATH included): no O_WRONLY, O_RDWR, O_CREAT, O_TRUNC or
  // O_APPEND. openat2(2) passes its flags in a structure seccomp cannot read: it is used with
  // O_PATH only (sys/untrusted_files.cc), and a file found so is reopened through openat.
  const scmp_datum_t kWrites = O_ACCMODE | O_CREAT | O_TRUNC | O_APPEND;
  failed |= seccomp_rule_add(filter, SCMP_ACT_ALLOW, SCMP_SYS(openat), 1,
                             SCMP_A2(SCMP_CMP_MASKED_EQ, kWrites, 0));
  failed |= seccomp_rule_add(filter, SCMP_ACT_ALLOW, SCMP_SYS(open), 1,
                             SCMP_A1(SCMP_CMP_MASKED_EQ, kWrites, 0));
  if (failed == 0) failed = seccomp_load(filter);
  seccomp_release(filter);
  return failed == 0 ? "" : std::string("seccomp: ") + std::strerror(-failed);
}

std::string Confine(pid_t parent, const caps::CapabilitySet& keep, std::string& held) {
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(5);
  syscall(SYS_close_range, kHelperSocket + 1, ~0U, 0);
  std::string layers;
  ReduceBoundingSet(keep);
  Layer(layers, "uid", BecomeNobody());
  Layer(layers, "capabilities", KeepOnly(keep, held));
  Layer(layers, "no_new_privs", prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 ? "" : Errno("prctl"));
  // After the uid change, which made the process dumpable again (kernel/cred.c commit_creds).
  Layer(layers, "dumpable", prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0 ? "" : Errno("prctl"));
  Layer(layers, "rlimits", SetLimits());
  Layer(layers, "seccomp", InstallSeccomp());
  return layers;
}

wire::Writer Status(int error, std::string_view why) {
  wire::Writer out(wire::Type::kBrokerReply);
  out.U32(static_cast<uint32_t>(error)).String(why.substr(0, wire::kMaxName));
  return out;
}

bool ValidPid(uint32_t pid) { return pid != 0 && pid <= INT_MAX; }

// The process's maps, read now by the broker itself: it opens a file only when the process
// maps it as code (or it is a debug file of such a file), whatever `serve` asked.
std::vector<MappedFile> CodeFiles(DirectProcfs& procfs, uint32_t pid) {
  auto maps = procfs.Maps(pid, kMaxMapsBytes);
  if (!maps) return {};
  std::vector<MappedFile> all = ParseMappedFiles(*maps);
  std::set<std::pair<dev_t, uint64_t>> code;
  for (const MappedFile& file : all) {
    if (file.executable) code.insert({file.device, file.inode});
  }
  std::erase_if(all, [&](const MappedFile& file) {
    return !code.contains({file.device, file.inode});
  });
  return all;
}

// One request; the reply and the descriptor that goes with it (if any).
wire::Writer Answer(DirectProcfs& procfs, const wire::Message& message, UniqueFd& fd) {
  if (message.type != wire::Type::kBrokerRequest) return Status(EINVAL, "not a request");
  wire::Reader in(message.body);
  const auto op = static_cast<BrokerOp>(in.U32());
  switch (op) {
    case BrokerOp::kMaps: {
      const uint32_t pid = in.U32();
      if (!in.done()) break;
      auto maps = procfs.OpenMaps(pid);
      if (!maps) return Status(maps.error(), std::strerror(maps.error()));
      fd = std::move(*maps);
      return Status(0, "");
    }
    case BrokerOp::kOpenMapping: {
      const uint32_t pid = in.U32();
      MappedFile mapping{.start = in.U64(), .end = in.U64(), .offset = in.U64()};
      mapping.device = static_cast<dev_t>(in.U64());
      mapping.inode = in.U64();
      mapping.path = in.String();
      if (!in.done() || !ValidPid(pid)) break;
      const auto code = CodeFiles(procfs, pid);
      const bool mapped = std::any_of(code.begin(), code.end(), [&](const MappedFile& file) {
        return file.start == mapping.start && file.end == mapping.end &&
               file.offset == mapping.offset && file.device == mapping.device &&
               file.inode == mapping.inode && file.path == mapping.path;
      });
      if (!mapped) return Status(EACCES, "not a file the process maps as code");
      auto opened = procfs.OpenMapping(pid, mapping);
      if (!opened) return Status(EACCES, opened.error());
      fd = std::move(opened->fd);
      return Status(0, "");
    }
    case BrokerOp::kOpenInRoot: {
      const uint32_t pid = in.U32();
      const std::string path = in.String();
      if (!in.done() || !ValidPid(pid)) break;
      if (!IsDebugFileCandidate(path, CodeFiles(procfs, pid))) {
        return Status(EACCES, "not a debug file of a file the process maps as code");
      }
      auto opened = procfs.OpenInRoot(pid, path);
      if (!opened) return Status(EACCES, opened.error());
      fd = std::move(opened->fd);
      return Status(0, "");
    }
    case BrokerOp::kNamespaces: {
      const uint8_t kind = in.U8();
      const uint32_t count = in.U32();
      if (!in.ok() || (kind != 1 && kind != 2) || count > wire::kMaxItems) break;
      std::vector<uint32_t> pids(count);
      for (uint32_t& pid : pids) pid = in.U32();
      if (!in.done()) break;
      const auto links = procfs.Namespaces(static_cast<NamespaceKind>(kind), pids);
      wire::Writer out = Status(0, "");
      out.U32(static_cast<uint32_t>(links.size()));
      for (const auto& link : links) out.U8(link ? 1 : 0).String(link ? link->substr(0, 64) : "");
      return out;
    }
    case BrokerOp::kUverbsHolders: {
      if (!in.done()) break;
      auto holders = procfs.UverbsHolders();
      if (!holders) return Status(EIO, holders.error());
      size_t pairs = 0;
      for (const auto& [pid, names] : *holders) pairs += names.size();
      wire::Writer out = Status(0, "");
      out.U32(static_cast<uint32_t>(pairs));
      for (const auto& [pid, names] : *holders) {
        for (const std::string& name : names) out.U32(pid).String(name.substr(0, 64));
      }
      return out;
    }
  }
  return Status(EINVAL, "malformed request");
}

}  // namespace

caps::CapabilitySet BrokerCapabilities() { return {CAP_SYS_PTRACE, CAP_DAC_READ_SEARCH}; }

namespace {

bool MayHold(const caps::CapabilitySet& keep) {
  const caps::CapabilitySet allowed = BrokerCapabilities();
  return std::includes(allowed.begin(), allowed.end(), keep.begin(), keep.end());
}

}  // namespace

int CapabilityBrokerMain(int argc, char** argv) {
  if (argc != 4 || !HelperSocketIsReady()) return 2;
  char* end = nullptr;
  const long parent = std::strtol(argv[2], &end, 10);
  if (end == argv[2] || *end != '\0' || parent <= 0) return 2;
  const auto keep = caps::ParseKeepList(argv[3]);
  if (!keep || !MayHold(*keep)) return 2;
  std::string held;
  const std::string layers = Confine(static_cast<pid_t>(parent), *keep, held);
  if (!wire::Send(kHelperSocket,
                  wire::Writer(wire::Type::kReady).String(layers + "held=" + held))) {
    return 0;
  }
  DirectProcfs procfs("/proc");
  for (;;) {
    auto message = wire::Receive(kHelperSocket);
    if (!message) return 0;  // serve is gone, or broke the protocol: nothing more to answer
    UniqueFd fd;
    const wire::Writer reply = Answer(procfs, *message, fd);
    if (!wire::Send(kHelperSocket, reply, fd.get())) return 0;
  }
}

// ---- serve's side ----

struct CapabilityBroker::Reply {
  wire::Message message;
  int error = 0;       // the broker's errno, 0 when it answered
  std::string why;     // its words when it did not
  size_t payload = 0;  // where the answer starts in message.body
};

namespace {

wire::Writer Request(BrokerOp op) {
  wire::Writer request(wire::Type::kBrokerRequest);
  request.U32(static_cast<uint32_t>(op));
  return request;
}

}  // namespace

std::expected<std::shared_ptr<CapabilityBroker>, std::string> CapabilityBroker::Start(
    const std::string& program, const caps::CapabilitySet& keep,
    std::chrono::milliseconds timeout) {
  if (!MayHold(keep)) {
    return std::unexpected("the broker holds only " + caps::Names(BrokerCapabilities()));
  }
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
    return std::unexpected(Errno("socketpair"));
  }
  UniqueFd mine(pair[0]);
  UniqueFd theirs(pair[1]);
  auto pid = SpawnHelper(
      program, {"rdmascope", "__capability-broker", std::to_string(getpid()), caps::Names(keep)},
      theirs.get());
  theirs = UniqueFd();
  if (!pid) return std::unexpected(pid.error());
  std::shared_ptr<CapabilityBroker> broker(
      new CapabilityBroker(*pid, mine.release(), std::string(), timeout));
  pollfd ready{.fd = broker->socket_, .events = POLLIN, .revents = 0};
  if (poll(&ready, 1, static_cast<int>(timeout.count())) != 1) {
    return std::unexpected("the capability broker did not start within " +
                           std::to_string(timeout.count()) + " ms");
  }
  auto message = wire::Receive(broker->socket_);
  if (!message || message->type != wire::Type::kReady) {
    return std::unexpected("the capability broker did not start: " +
                           (message ? std::string("unexpected message") : message.error()));
  }
  wire::Reader reader(message->body);
  std::string layers = reader.String(wire::kMaxName);
  if (!reader.done()) return std::unexpected("the capability broker's first message is malformed");
  // "name=1" / "name=0 (why)" lines, then "held=...".
  for (std::string_view rest = layers; !rest.empty();) {
    const std::string_view line = rest.substr(0, rest.find('\n'));
    rest.remove_prefix(std::min(rest.size(), line.size() + 1));
    const size_t equals = line.find('=');
    if (equals == std::string_view::npos || broker->confinement_.size() >= 16) continue;
    const std::string name(line.substr(0, std::min<size_t>(equals, 32)));
    if (name == "held") {
      broker->held_ = std::string(line.substr(equals + 1, 256));
    } else {
      broker->confinement_[name] = line.substr(equals + 1).starts_with("1");
    }
  }
  broker->layers_ = std::move(layers);
  broker->stats_.up = true;
  return broker;
}

CapabilityBroker::CapabilityBroker(pid_t pid, int socket, std::string layers,
                                   std::chrono::milliseconds timeout)
    : pid_(pid), socket_(socket), layers_(std::move(layers)), timeout_(timeout) {}

CapabilityBroker::~CapabilityBroker() {
  std::lock_guard lock(mutex_);
  StopLocked("");
}

void CapabilityBroker::StopLocked(const std::string& why) {
  if (socket_ >= 0) close(socket_);  // a broker that still reads sees the end and exits
  socket_ = -1;
  if (pid_ > 0) {
    // Refused under a root exporter (the broker is nobody; serve keeps no CAP_KILL): never wait
    // for it unbounded, on a scrape's thread. One that does not end is left, and reaped by
    // the kernel's init when serve exits (PR_SET_PDEATHSIG ends it then).
    kill(pid_, SIGKILL);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (waitpid(pid_, nullptr, WNOHANG) == 0 && std::chrono::steady_clock::now() < deadline) {
      usleep(10'000);
    }
  }
  if (stats_.up && !why.empty()) {
    log::Error(
        "capability broker stopped: other users' processes are read no more (restart "
        "rdmascope to start it again)",
        {{"pid", std::to_string(pid_)}, {"err", why}});
  }
  pid_ = -1;
  stats_.up = false;
}

CapabilityBrokerStats CapabilityBroker::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

std::expected<CapabilityBroker::Reply, std::string> CapabilityBroker::Ask(
    BrokerOp op, const wire::Writer& request) {
  std::lock_guard lock(mutex_);
  ++stats_.requests[OpName(op)];
  const auto fail = [&](const std::string& why) -> std::expected<Reply, std::string> {
    ++stats_.failed;
    StopLocked(why);
    return std::unexpected("capability broker: " + why);
  };
  if (socket_ < 0) {
    ++stats_.failed;
    return std::unexpected("capability broker: not running");
  }
  if (!wire::Send(socket_, request)) return fail("cannot send (gone)");
  pollfd ready{.fd = socket_, .events = POLLIN, .revents = 0};
  int polled;
  do {
    polled = poll(&ready, 1, static_cast<int>(timeout_.count()));
  } while (polled < 0 && errno == EINTR);
  if (polled != 1) return fail("no answer within " + std::to_string(timeout_.count()) + " ms");
  auto message = wire::Receive(socket_);
  if (!message) return fail(message.error());
  if (message->type != wire::Type::kBrokerReply) return fail("unexpected message");
  Reply reply{.message = std::move(*message)};
  wire::Reader status(reply.message.body);
  reply.error = static_cast<int>(status.U32());
  reply.why = status.String();
  if (!status.ok() || reply.error < 0) return fail("malformed answer");
  reply.payload = reply.message.body.size() - status.remaining();
  return reply;
}

std::expected<std::string, int> CapabilityBroker::Maps(uint32_t pid, size_t max_bytes) {
  auto reply = Ask(BrokerOp::kMaps, Request(BrokerOp::kMaps).U32(pid));
  if (!reply) return std::unexpected(ENOTCONN);
  if (reply->error != 0) return std::unexpected(reply->error);
  if (!reply->message.fd.valid()) return std::unexpected(EPROTO);
  return sysfs::ReadFdChecked(reply->message.fd.get(), max_bytes);
}

// The broker checked the file (regular, bounded, the mapped inode); fstat here fills in what
// OpenedFile says of it.
std::expected<OpenedFile, std::string> CapabilityBroker::Opened(Reply reply) {
  if (reply.error != 0) return std::unexpected(reply.why);
  OpenedFile opened{.fd = std::move(reply.message.fd)};
  if (!opened.fd.valid() || fstat(opened.fd.get(), &opened.status) != 0 ||
      !S_ISREG(opened.status.st_mode)) {
    return std::unexpected("capability broker: no regular file in its answer");
  }
  opened.only_root_can_write = OnlyRootCanWrite(opened.status);
  return opened;
}

std::expected<OpenedFile, std::string> CapabilityBroker::OpenMapping(uint32_t pid,
                                                                     const MappedFile& mapping) {
  auto request = Request(BrokerOp::kOpenMapping);
  request.U32(pid)
      .U64(mapping.start)
      .U64(mapping.end)
      .U64(mapping.offset)
      .U64(mapping.device)
      .U64(mapping.inode)
      .String(mapping.path);
  auto reply = Ask(BrokerOp::kOpenMapping, request);
  if (!reply) return std::unexpected(reply.error());
  return Opened(std::move(*reply));
}

std::expected<OpenedFile, std::string> CapabilityBroker::OpenInRoot(uint32_t pid,
                                                                    std::string_view path) {
  if (path.size() > wire::kMaxName) return std::unexpected("path too long");
  auto reply = Ask(BrokerOp::kOpenInRoot, Request(BrokerOp::kOpenInRoot).U32(pid).String(path));
  if (!reply) return std::unexpected(reply.error());
  return Opened(std::move(*reply));
}

std::vector<std::optional<std::string>> CapabilityBroker::Namespaces(
    NamespaceKind kind, std::span<const uint32_t> pids) {
  std::vector<std::optional<std::string>> links;
  links.reserve(pids.size());
  for (size_t at = 0; at < pids.size(); at += wire::kMaxItems) {
    const auto chunk = pids.subspan(at, std::min(wire::kMaxItems, pids.size() - at));
    auto request = Request(BrokerOp::kNamespaces);
    request.U8(static_cast<uint8_t>(kind)).U32(static_cast<uint32_t>(chunk.size()));
    for (const uint32_t pid : chunk) request.U32(pid);
    auto reply = Ask(BrokerOp::kNamespaces, request);
    wire::Reader in(reply ? std::span<const uint8_t>(reply->message.body).subspan(reply->payload)
                          : std::span<const uint8_t>());
    const uint32_t count = reply && reply->error == 0 ? in.U32() : 0;
    for (size_t i = 0; i < chunk.size(); ++i) {
      const bool present = i < count && in.U8() != 0;
      std::string link = i < count ? in.String(64) : std::string();
      links.push_back(present && in.ok() ? std::optional(std::move(link)) : std::nullopt);
    }
  }
  return links;
}

std::expected<UverbsHolderMap, std::string> CapabilityBroker::UverbsHolders() {
  auto reply = Ask(BrokerOp::kUverbsHolders, Request(BrokerOp::kUverbsHolders));
  if (!reply) return std::unexpected(reply.error());
  if (reply->error != 0) return std::unexpected(reply->why);
  wire::Reader in(std::span<const uint8_t>(reply->message.body).subspan(reply->payload));
  const uint32_t count = in.U32();
  UverbsHolderMap holders;
  for (uint32_t i = 0; i < count && i < kMaxUverbsHolders && in.ok(); ++i) {
    const uint32_t pid = in.U32();
    std::string name = in.String(64);
    if (in.ok()) holders[pid].insert(std::move(name));
  }
  if (!in.done()) return std::unexpected("capability broker: malformed answer");
  return holders;
}

}  // namespace rdmascope::sys
