// The exporter's side of the sandboxed unwinder: a StackUnwinder whose parsing happens in a
// worker process (`rdmascope __unwind-worker`, sys/unwind_sandbox.h) and whose file access
// stays here (a LocalProcessAccess: the only code that opens a tenant's files, with the
// exporter's privileges, never parsing them). One request at a time, each with a wall-clock
// deadline: the request's own budget plus a slack for the worker's first files. A worker that
// overruns it, dies (a crash, the seccomp filter's kill) or breaks the protocol is killed and
// started again at the next request, after a back-off; the stack it was unwinding says why it
// has no frames, and the restart is counted (stats()).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "sys/dwarf_unwinder.h"
#include "sys/process_access.h"
#include "sys/unwind_broker.h"
#include "sys/unwind_protocol.h"

namespace rdmascope::sys {

struct UnwindClientOptions {
  // The worker's program and arguments (argv[0] first); the parent's pid is appended and the
  // socket is its descriptor 3. The exporter's own binary by default; tests use fakes.
  std::string program = "/proc/self/exe";
  std::vector<std::string> arguments = {"rdmascope", "__unwind-worker"};
  // Beyond a request's own budget: what a new worker's start, and its first files, may take.
  std::chrono::milliseconds slack{2000};
  // How long to wait before starting a worker again after one was killed or died (doubling up
  // to the maximum while they keep failing; a worker that answers resets it).
  std::chrono::milliseconds backoff{100};
  std::chrono::milliseconds max_backoff{10000};
};

struct UnwindClientStats {
  uint64_t starts = 0;  // workers started
  // Workers killed or lost, by reason: deadline, died, protocol; and starts that failed.
  std::map<std::string, uint64_t> restarts;
  // The last worker's sandbox layers (sys/unwind_sandbox.h): name -> entered.
  std::map<std::string, bool> sandbox;
};

class UnwindClient final : public StackUnwinder {
 public:
  UnwindClient(std::shared_ptr<ProcessAccess> access, UnwindClientOptions options = {});
  ~UnwindClient() override;
  UnwindClient(const UnwindClient&) = delete;
  UnwindClient& operator=(const UnwindClient&) = delete;

  UnwoundStack Unwind(const CapturedStack& captured, const UnwindLimits& limits) override;
  std::vector<Frame> Symbolize(const ImageKey& image, std::span<const uint64_t> addresses,
                               const SymbolizeOptions& options, std::string* missing) override;
  // Never waits for a request in flight: the live set is sent before the next request.
  void Retain(const std::vector<ImageKey>& live) override;

  // Starts the worker now rather than at the first request (false when it could not be).
  bool Start();
  UnwindClientStats stats() const;
  // -1 when none runs. Waits for the request in progress, if any (tests).
  pid_t worker_pid() const;

 private:
  using Clock = std::chrono::steady_clock;
  // Under mutex_. A running worker, started if need be; false (and `why`) when none can be.
  bool EnsureWorker(std::string& why);
  // Sends `request` and serves the worker's questions until its answer of type `answer`, or the
  // deadline. On any failure the worker is stopped (`reason` counted) and `why` says so.
  // `send` false: only wait (for the worker's first message).
  std::optional<unwind_protocol::Message> Call(const unwind_protocol::Writer& request,
                                               unwind_protocol::Type answer,
                                               Clock::time_point deadline, std::string& why,
                                               bool send = true);
  // Kills and reaps the worker, counts `reason`, backs off; how the worker ended.
  std::string Stop(const std::string& reason);
  // The worker's exit status once it has ended, waiting at most `wait`; nullopt (and kept in
  // lingering_) when it has not.
  std::optional<int> ReapWithin(pid_t pid, std::chrono::milliseconds wait);
  void ReapLingering();
  // Longer than the worker's watchdog outlives its parent's deadline (0.5 s).
  static constexpr std::chrono::milliseconds kReapWait{3000};

  UnwindBroker broker_;  // answers the worker's questions (under mutex_)
  const UnwindClientOptions options_;
  mutable std::mutex mutex_;  // one request at a time; everything below
  pid_t worker_ = -1;
  std::vector<pid_t> lingering_;  // stopped workers not yet ended (see ReapWithin)
  int socket_ = -1;
  Clock::time_point next_start_{};
  std::chrono::milliseconds backoff_;
  // Under mutex_: the live set Retain() left, if any. False (and `why`) when the worker was
  // lost doing it.
  bool SendRetain(std::string& why);
  std::mutex retain_mutex_;  // retain_ only
  std::optional<std::vector<ImageKey>> retain_;
  mutable std::mutex stats_mutex_;  // stats_ only: a scrape never waits for a request
  UnwindClientStats stats_;
  void Count(const std::string& reason);
};

}  // namespace rdmascope::sys
