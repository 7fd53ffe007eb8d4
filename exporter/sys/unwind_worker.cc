#include "sys/unwind_worker.h"

#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "sys/unwind_protocol.h"

namespace rdmascope::sys {
namespace {

namespace wire = unwind_protocol;
using Clock = std::chrono::steady_clock;

}  // namespace

// The parent answers each of ProcessAccess's calls, and each module's debug-file question. A
// broken socket means the parent is gone or wants the worker gone: the worker exits (nothing it
// could answer would be read).
class UnwindWorker::ParentAccess final : public ProcessAccess, public DebugFileSource {
 public:
  explicit ParentAccess(int socket) : socket_(socket) {}

  // The parent sends, with each request, the start time of its process as it sees it now (0:
  // gone or unknown): the worker then asks nothing to know whether its session is still that
  // process's, which is most unwinds' only question (a round trip each).
  void Hint(uint32_t pid, uint64_t start_ticks) {
    hint_pid_ = pid;
    hint_ticks_ = start_ticks;
  }

  std::optional<uint64_t> StartTicks(uint32_t pid) override {
    if (pid == hint_pid_ && hint_ticks_ != 0) return hint_ticks_;
    wire::Message reply = Ask(wire::Writer(wire::Type::kAccess)
                                  .U32(static_cast<uint32_t>(wire::AccessOp::kStartTicks))
                                  .U32(pid));
    wire::Reader reader(reply.body);
    const uint64_t ticks = reader.U64();
    if (!reader.done()) Fail();
    return ticks == 0 ? std::nullopt : std::optional<uint64_t>(ticks);
  }

  bool StillRunning(uint32_t pid, uint64_t start_ticks) override {
    if (pid == hint_pid_ && hint_ticks_ != 0) return start_ticks == hint_ticks_;
    wire::Message reply = Ask(wire::Writer(wire::Type::kAccess)
                                  .U32(static_cast<uint32_t>(wire::AccessOp::kStillRunning))
                                  .U32(pid)
                                  .U64(start_ticks));
    wire::Reader reader(reply.body);
    const bool running = reader.U8() != 0;
    if (!reader.done()) Fail();
    return running;
  }

  std::expected<std::string, int> Maps(const ImageKey& image) override {
    wire::Message reply = Ask(wire::Writer(wire::Type::kAccess)
                                  .U32(static_cast<uint32_t>(wire::AccessOp::kMaps))
                                  .Image(image));
    wire::Reader reader(reply.body);
    const auto error = static_cast<int>(reader.U32());
    if (!reader.done()) Fail();
    if (error != 0) return std::unexpected(error);
    if (!reply.fd.valid()) return std::unexpected(EPROTO);
    auto text = wire::TextFromFd(reply.fd.get(), kMaxMapsBytes);
    if (!text) return std::unexpected(EIO);
    return std::move(*text);
  }

  std::expected<OpenedFile, std::string> OpenMapping(uint32_t pid,
                                                     const MappedFile& mapping) override {
    return Opened(Ask(wire::Writer(wire::Type::kAccess)
                          .U32(static_cast<uint32_t>(wire::AccessOp::kOpenMapping))
                          .U32(pid)
                          .U64(mapping.start)
                          .U64(mapping.end)
                          .U64(mapping.offset)
                          .U64(mapping.device)
                          .U64(mapping.inode)
                          .String(mapping.path)));
  }

  // The parent opens no path of the worker's choosing: debug files come by OpenDebugFile.
  std::expected<OpenedFile, std::string> OpenInRoot(uint32_t, std::string_view) override {
    return std::unexpected("a file by path: the parent opens only a mapped file's debug files");
  }

  // All of the module's candidates in one round trip: the parent computes them from the same
  // three things (sys/debug_files.h) and answers with the first it could open.
  std::expected<FoundDebugFile, std::string> OpenDebugFile(uint32_t pid,
                                                           const DebugFileQuery& query,
                                                           size_t first) override {
    if (query.build_id.size() > wire::kMaxBuildId || query.debuglink.size() > wire::kMaxDebuglink ||
        query.mapped_path.size() > wire::kMaxName || first >= kMaxDebugFileCandidates) {
      return std::unexpected("no debug file candidate");  // none the parent would compute
    }
    wire::Message reply = Ask(wire::Writer(wire::Type::kAccess)
                                  .U32(static_cast<uint32_t>(wire::AccessOp::kOpenDebugFile))
                                  .U32(pid)
                                  .String(query.mapped_path)
                                  .Bytes(query.build_id)
                                  .String(query.debuglink)
                                  .U32(static_cast<uint32_t>(first)));
    wire::Reader reader(reply.body);
    std::string error = reader.String();
    const uint32_t index = reader.U32();
    const uint8_t only_root = error.empty() ? reader.U8() : 0;
    if (!reader.done() || only_root > 1) Fail();
    if (!error.empty()) return std::unexpected(std::move(error));
    if (index < first || index >= kMaxDebugFileCandidates) Fail();
    auto file = Checked(std::move(reply.fd), only_root == 1);
    if (!file) return std::unexpected(file.error());
    return FoundDebugFile{.index = index, .file = std::move(*file)};
  }

 private:
  [[noreturn]] static void Fail() { _exit(3); }

  wire::Message Ask(const wire::Writer& question) {
    if (!wire::Send(socket_, question)) Fail();
    auto reply = wire::Receive(socket_);
    if (!reply || reply->type != wire::Type::kAccessReply) Fail();
    return std::move(*reply);
  }

  static std::expected<OpenedFile, std::string> Opened(wire::Message reply) {
    wire::Reader reader(reply.body);
    std::string error = reader.String();
    const uint8_t only_root = error.empty() ? reader.U8() : 0;
    if (!reader.done() || only_root > 1) Fail();
    if (!error.empty()) return std::unexpected(std::move(error));
    return Checked(std::move(reply.fd), only_root == 1);
  }

  // The parent opened and checked the file (regular, bounded, the mapped inode) and said
  // whether only root can write it (its fstat sees the real owner; this one, through the user
  // namespace, sees the overflow uid); fstat here gives the status the ELF cache keys it by.
  static std::expected<OpenedFile, std::string> Checked(UniqueFd fd, bool only_root_can_write) {
    OpenedFile file;
    file.fd = std::move(fd);
    file.only_root_can_write = only_root_can_write;
    if (!file.fd.valid() || fstat(file.fd.get(), &file.status) != 0 ||
        !S_ISREG(file.status.st_mode)) {
      return std::unexpected("no regular file from the parent");
    }
    return file;
  }

  const int socket_;
  uint32_t hint_pid_ = 0;
  uint64_t hint_ticks_ = 0;
};

namespace {

std::chrono::nanoseconds Budget(uint64_t nanoseconds) {
  // At most a minute: the parent's deadline ends the request long before.
  return std::chrono::nanoseconds(std::min<uint64_t>(nanoseconds, 60'000'000'000ULL));
}

// The worker's own deadline, a little after its parent's (the request's budget plus its 2 s of
// slack, sys/unwind_client.h): SIGALRM's default action ends a parse that never returns. The
// parent kills a worker that overruns, but under a root exporter it cannot: the worker is nobody
// by then and the exporter holds no CAP_KILL (kernel/signal.c kill_ok_by_cred), so without
// this its waitpid() would wait for RLIMIT_CPU.
void ArmWatchdog(std::chrono::nanoseconds budget) {
  const auto deadline = std::chrono::duration_cast<std::chrono::microseconds>(
      budget + std::chrono::milliseconds(2500));
  itimerval timer{};
  timer.it_value.tv_sec = static_cast<time_t>(deadline.count() / 1'000'000);
  timer.it_value.tv_usec = static_cast<suseconds_t>(deadline.count() % 1'000'000);
  setitimer(ITIMER_REAL, &timer, nullptr);
}

void DisarmWatchdog() {
  const itimerval none{};
  setitimer(ITIMER_REAL, &none, nullptr);
}

}  // namespace

UnwindWorker::UnwindWorker(int socket)
    : socket_(socket),
      parent_(std::make_shared<ParentAccess>(socket)),
      unwinder_(parent_, std::make_shared<ElfCache>(), parent_) {}

bool UnwindWorker::Handle(wire::Message& request) {
  wire::Reader reader(request.body);
  switch (request.type) {
    case wire::Type::kUnwind: {
      CapturedStack captured;
      captured.image = reader.Image();
      parent_->Hint(captured.image.tgid, reader.U64());
      for (uint64_t& reg : captured.regs) reg = reader.U64();
      const uint32_t max_frames = reader.U32();
      const std::chrono::nanoseconds budget = Budget(reader.U64());
      ArmWatchdog(budget);
      const UnwindLimits limits{
          .max_frames = std::min<size_t>(max_frames, wire::kMaxItems),
          .budget = std::chrono::duration_cast<std::chrono::microseconds>(budget)};
      captured.stack = reader.Bytes(wire::kMaxMessage);
      if (!reader.done()) return false;
      const UnwoundStack unwound = unwinder_.Unwind(captured, limits);
      // The tenant's stack bytes are not kept past their use.
      explicit_bzero(request.body.data(), request.body.size());
      wire::Writer reply(wire::Type::kUnwound);
      reply.U32(static_cast<uint32_t>(std::min(unwound.pcs.size(), wire::kMaxItems)));
      for (size_t i = 0; i < unwound.pcs.size() && i < wire::kMaxItems; ++i)
        reply.U64(unwound.pcs[i]);
      reply.U8(static_cast<uint8_t>(unwound.method))
          .U8(unwound.truncated ? 1 : 0)
          .String(unwound.stop_reason)
          .U8(static_cast<uint8_t>(unwound.outcome));
      return wire::Send(socket_, reply);
    }
    case wire::Type::kSymbolize: {
      const ImageKey image = reader.Image();
      parent_->Hint(image.tgid, reader.U64());
      SymbolizeOptions options;
      options.first =
          reader.U8() != 0 ? FirstAddress::kInstructionPointer : FirstAddress::kReturnAddress;
      options.inline_frames = reader.U8() != 0;
      const std::chrono::nanoseconds budget = Budget(reader.U64());
      ArmWatchdog(budget);
      options.deadline = Clock::now() + budget;
      const uint32_t count = reader.U32();
      if (count > wire::kMaxItems) return false;
      std::vector<uint64_t> addresses(count);
      for (uint64_t& address : addresses) address = reader.U64();
      if (!reader.done()) return false;
      std::string missing;
      const std::vector<Frame> frames = unwinder_.Symbolize(image, addresses, options, &missing);
      wire::Writer reply(wire::Type::kSymbols);
      const size_t kept = std::min(frames.size(), wire::kMaxItems);
      reply.U32(static_cast<uint32_t>(kept));
      for (size_t i = 0; i < kept; ++i) {
        reply.String(frames[i].function)
            .U64(frames[i].offset)
            .String(frames[i].module)
            .U8(frames[i].inlined ? 1 : 0);
      }
      reply.String(missing);
      return wire::Send(socket_, reply);
    }
    case wire::Type::kRetain: {
      ArmWatchdog(std::chrono::nanoseconds(0));
      const uint32_t count = reader.U32();
      if (count > wire::kMaxRetained) return false;
      std::vector<ImageKey> images(count);
      for (ImageKey& image : images) image = reader.Image();
      if (!reader.done()) return false;
      unwinder_.Retain(images);
      return wire::Send(socket_, wire::Writer(wire::Type::kRetained));
    }
    default:
      return false;
  }
}

int UnwindWorker::Serve() {
  for (;;) {
    auto request = wire::Receive(socket_);
    if (!request) return 0;  // the parent closed the socket: done
    if (!Handle(*request)) return 2;
    DisarmWatchdog();
  }
}

}  // namespace rdmascope::sys
