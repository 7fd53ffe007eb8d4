#include "sys/unwind_client.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>

#include "core/log.h"
#include "sys/spawn_helper.h"

namespace rdmascope::sys {
namespace {

namespace wire = unwind_protocol;

std::string DescribeStatus(int status) {
  if (WIFSIGNALED(status)) {
    const int signal = WTERMSIG(status);
    const char* name = sigabbrev_np(signal);
    return std::string("killed by SIG") + (name != nullptr ? name : std::to_string(signal)) +
           (signal == SIGSYS ? " (a system call outside the seccomp allow-list)" : "");
  }
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  return "ended";
}

// "name=1" / "name=0 (why)" lines of the worker's kReady.
std::map<std::string, bool> ParseLayers(std::string_view text, std::string& refused) {
  std::map<std::string, bool> layers;
  while (!text.empty()) {
    const size_t end = std::min(text.find('\n'), text.size());
    const std::string_view line = text.substr(0, end);
    text.remove_prefix(std::min(end + 1, text.size()));
    const size_t equals = line.find('=');
    if (equals == std::string_view::npos || equals + 1 >= line.size() || layers.size() >= 16) {
      continue;
    }
    const std::string name(line.substr(0, std::min<size_t>(equals, 32)));
    layers[name] = line[equals + 1] == '1';
    if (line[equals + 1] != '1') {
      refused += (refused.empty() ? "" : "; ") + std::string(line.substr(0, 256));
    }
  }
  return layers;
}

}  // namespace

UnwindClient::UnwindClient(std::shared_ptr<ProcessAccess> access, UnwindClientOptions options)
    : broker_(std::move(access)), options_(std::move(options)), backoff_(options_.backoff) {}

UnwindClient::~UnwindClient() {
  std::lock_guard lock(mutex_);
  if (worker_ > 0) {
    close(socket_);  // the worker's Serve() sees the end and exits
    socket_ = -1;
    kill(-worker_, SIGKILL);
    ReapWithin(worker_, kReapWait);
    worker_ = -1;
  }
}

// Waits for `pid` to end, at most `wait`. Under a root exporter the SIGKILL before it is
// refused (the worker is nobody, the exporter has no CAP_KILL): the worker ends by its own
// watchdog (sys/unwind_worker.cc) or at the socket's end; one that does neither (its code
// subverted by a file it parsed) is left behind rather than waited for, and reaped later.
std::optional<int> UnwindClient::ReapWithin(pid_t pid, std::chrono::milliseconds wait) {
  const auto deadline = Clock::now() + wait;
  for (;;) {
    int status = 0;
    const pid_t reaped = waitpid(pid, &status, WNOHANG);
    if (reaped == pid || (reaped < 0 && errno == ECHILD)) return status;
    if (Clock::now() >= deadline) {
      lingering_.push_back(pid);
      log::Warn("unwinder worker did not end when stopped: left behind, reaped when it does",
                {{"pid", std::to_string(pid)}});
      return std::nullopt;
    }
    usleep(10'000);
  }
}

void UnwindClient::ReapLingering() {
  std::erase_if(lingering_, [](pid_t pid) {
    const pid_t reaped = waitpid(pid, nullptr, WNOHANG);
    return reaped == pid || (reaped < 0 && errno == ECHILD);
  });
}

bool UnwindClient::Start() {
  std::lock_guard lock(mutex_);
  std::string why;
  if (EnsureWorker(why)) return true;
  log::Warn("unwinder worker cannot start: registration stacks have no frames until it does",
            {{"err", why}});
  return false;
}

pid_t UnwindClient::worker_pid() const {
  std::lock_guard lock(mutex_);
  return worker_;
}

UnwindClientStats UnwindClient::stats() const {
  std::lock_guard lock(stats_mutex_);
  return stats_;
}

void UnwindClient::Count(const std::string& reason) {
  std::lock_guard lock(stats_mutex_);
  ++stats_.restarts[reason];
}

std::string UnwindClient::Stop(const std::string& reason) {
  if (worker_ <= 0) return "";
  Count(reason);
  if (socket_ >= 0) close(socket_);
  socket_ = -1;
  kill(-worker_, SIGKILL);
  const std::optional<int> status = ReapWithin(worker_, kReapWait);
  worker_ = -1;
  next_start_ = Clock::now() + backoff_;
  backoff_ = std::min(backoff_ * 2, options_.max_backoff);
  return status ? DescribeStatus(*status) : "did not end when stopped";
}

bool UnwindClient::EnsureWorker(std::string& why) {
  if (worker_ > 0) return true;
  ReapLingering();
  if (Clock::now() < next_start_) {
    why = "unwinder worker restarting";
    return false;
  }
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
    why = std::string("unwinder worker: socketpair: ") + std::strerror(errno);
    return false;
  }
  UniqueFd mine(pair[0]);
  UniqueFd theirs(pair[1]);
  std::vector<std::string> arguments = options_.arguments;
  arguments.push_back(std::to_string(getpid()));
  const auto pid = SpawnHelper(options_.program, std::move(arguments), theirs.get());
  theirs = UniqueFd();
  next_start_ = Clock::now() + backoff_;
  if (!pid) {
    Count("start_failed");
    backoff_ = std::min(backoff_ * 2, options_.max_backoff);
    why = "unwinder worker: " + pid.error();
    return false;
  }
  worker_ = *pid;
  socket_ = mine.release();
  {
    std::lock_guard stats_lock(stats_mutex_);
    ++stats_.starts;
  }
  // Its first message says which layers of the sandbox it entered.
  std::string failed;
  auto ready = Call(wire::Writer(wire::Type::kReady), wire::Type::kReady,
                    Clock::now() + options_.slack, failed, /*send=*/false);
  if (!ready) {
    why = "unwinder worker did not start: " + failed;
    return false;
  }
  wire::Reader reader(ready->body);
  const std::string text = reader.String(wire::kMaxName);
  std::string refused;
  auto layers = ParseLayers(text, refused);
  uint64_t starts = 0;
  {
    std::lock_guard stats_lock(stats_mutex_);
    stats_.sandbox = std::move(layers);
    starts = stats_.starts;
  }
  if (!refused.empty()) {
    log::Warn("unwinder worker runs without part of its sandbox",
              {{"pid", std::to_string(*pid)}, {"refused", refused}});
  } else if (starts == 1) {
    log::Info("unwinder worker started in its sandbox", {{"pid", std::to_string(*pid)}});
  }
  return true;
}

std::optional<wire::Message> UnwindClient::Call(const wire::Writer& request, wire::Type answer,
                                                Clock::time_point deadline, std::string& why,
                                                bool send) {
  if (send && !wire::Send(socket_, request)) {
    why = "unwinder worker gone";
    Stop("died");
    return std::nullopt;
  }
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      why = "unwinder worker overran its deadline (killed, restarted at the next stack)";
      Stop("deadline");
      return std::nullopt;
    }
    pollfd ready{.fd = socket_, .events = POLLIN, .revents = 0};
    const int polled = poll(&ready, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (polled < 0 && errno != EINTR) {
      why = std::string("unwinder worker: poll: ") + std::strerror(errno);
      Stop("protocol");
      return std::nullopt;
    }
    if (polled <= 0) continue;
    auto message = wire::Receive(socket_);
    if (!message) {
      why = "unwinder worker " + Stop("died");  // how it ended: a signal, an exit status
      return std::nullopt;
    }
    if (message->type == wire::Type::kAccess) {
      if (!broker_.Answer(socket_, *message)) {
        why = "unwinder worker asked what the protocol does not allow";
        Stop("protocol");
        return std::nullopt;
      }
      continue;
    }
    if (message->type != answer) {
      why = "unwinder worker answered out of turn";
      Stop("protocol");
      return std::nullopt;
    }
    backoff_ = options_.backoff;
    return std::move(*message);
  }
}

UnwoundStack UnwindClient::Unwind(const CapturedStack& captured, const UnwindLimits& limits) {
  const uint64_t ip = captured.regs[kDwarfRip];
  std::lock_guard lock(mutex_);
  std::string why;
  if (!EnsureWorker(why) || !SendRetain(why)) return {.pcs = {ip}, .stop_reason = why};
  wire::Writer request(wire::Type::kUnwind);
  request.Image(captured.image).U64(broker_.access().StartTicks(captured.image.tgid).value_or(0));
  for (const uint64_t reg : captured.regs) request.U64(reg);
  request.U32(static_cast<uint32_t>(std::min(limits.max_frames, wire::kMaxItems)))
      .U64(static_cast<uint64_t>(std::chrono::nanoseconds(limits.budget).count()))
      .Bytes(captured.stack.subspan(0, std::min(captured.stack.size(), wire::kMaxMessage / 2)));
  broker_.SetScope(captured.image);
  auto answer =
      Call(request, wire::Type::kUnwound, Clock::now() + limits.budget + options_.slack, why);
  // The request held a copy of the tenant's stack.
  explicit_bzero(const_cast<uint8_t*>(request.bytes().data()), request.bytes().size());
  if (!answer) return {.pcs = {ip}, .stop_reason = why};
  wire::Reader reader(answer->body);
  UnwoundStack out;
  const uint32_t count = reader.U32();
  if (count > wire::kMaxItems || count > limits.max_frames) {
    Stop("protocol");
    return {.pcs = {ip}, .stop_reason = "unwinder worker answered out of bounds"};
  }
  out.pcs.resize(count);
  for (uint64_t& pc : out.pcs) pc = reader.U64();
  const uint8_t method = reader.U8();
  out.truncated = reader.U8() != 0;
  out.stop_reason = reader.String(1024);
  const uint8_t outcome = reader.U8();
  if (!reader.done() || method > static_cast<uint8_t>(UnwindMethod::kFramePointer) ||
      outcome > static_cast<uint8_t>(kLastUnwindOutcome) || out.pcs.empty() || out.pcs[0] != ip) {
    Stop("protocol");
    return {.pcs = {ip}, .stop_reason = "unwinder worker answered out of bounds"};
  }
  out.method = static_cast<UnwindMethod>(method);
  out.outcome = static_cast<UnwindOutcome>(outcome);
  return out;
}

std::vector<Frame> UnwindClient::Symbolize(const ImageKey& image,
                                           std::span<const uint64_t> addresses,
                                           const SymbolizeOptions& options, std::string* missing) {
  std::vector<Frame> unnamed(addresses.size());
  std::string why;
  std::lock_guard lock(mutex_);
  if (addresses.size() > wire::kMaxItems) addresses = addresses.first(wire::kMaxItems);
  const Clock::time_point now = Clock::now();
  const auto budget = options.deadline > now ? options.deadline - now : Clock::duration::zero();
  if (!EnsureWorker(why) || !SendRetain(why)) {
    if (missing != nullptr) *missing = why;
    return unnamed;
  }
  wire::Writer request(wire::Type::kSymbolize);
  request.Image(image)
      .U64(broker_.access().StartTicks(image.tgid).value_or(0))
      .U8(options.first == FirstAddress::kInstructionPointer ? 1 : 0)
      .U8(options.inline_frames ? 1 : 0)
      .U64(static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(budget).count()))
      .U32(static_cast<uint32_t>(addresses.size()));
  for (const uint64_t address : addresses) request.U64(address);
  broker_.SetScope(image);
  auto answer = Call(request, wire::Type::kSymbols, now + budget + options_.slack, why);
  if (!answer) {
    if (missing != nullptr) *missing = why;
    return unnamed;
  }
  wire::Reader reader(answer->body);
  const uint32_t count = reader.U32();
  // Each address has its frame, and inline frames add some (bounded by the protocol).
  if (count < addresses.size() || count > wire::kMaxItems) {
    Stop("protocol");
    if (missing != nullptr) *missing = "unwinder worker answered out of bounds";
    return unnamed;
  }
  std::vector<Frame> frames(count);
  for (Frame& frame : frames) {
    frame.function = reader.String();
    frame.offset = reader.U64();
    frame.module = reader.String(1024);
    frame.inlined = reader.U8() != 0;
  }
  std::string said = reader.String(1024);
  if (!reader.done()) {
    Stop("protocol");
    if (missing != nullptr) *missing = "unwinder worker answered out of bounds";
    return unnamed;
  }
  if (missing != nullptr) *missing = std::move(said);
  return frames;
}

void UnwindClient::Retain(const std::vector<ImageKey>& live) {
  // Called under the MR stack sites' lock on a scrape: it must not wait for a request in
  // flight (up to its deadline). The live set goes with the next request instead.
  std::vector<uint32_t> live_pids;
  live_pids.reserve(live.size());
  for (const ImageKey& image : live) live_pids.push_back(image.tgid);
  broker_.access().Retain(live_pids);
  std::lock_guard lock(retain_mutex_);
  retain_ = live;
}

bool UnwindClient::SendRetain(std::string& why) {
  std::optional<std::vector<ImageKey>> live;
  {
    std::lock_guard lock(retain_mutex_);
    live.swap(retain_);
  }
  if (!live || worker_ <= 0) return worker_ > 0;  // a new worker has no session to drop
  wire::Writer request(wire::Type::kRetain);
  const size_t count = std::min(live->size(), wire::kMaxRetained);
  request.U32(static_cast<uint32_t>(count));
  for (size_t i = 0; i < count; ++i) request.Image((*live)[i]);
  broker_.SetScope({});  // no question is allowed
  return Call(request, wire::Type::kRetained, Clock::now() + options_.slack, why).has_value();
}

}  // namespace rdmascope::sys
