#include "doctor/service.h"

#include <chrono>
#include <exception>
#include <stdexcept>

#include "core/log.h"
#include "doctor/checks.h"
#include "doctor/local_snapshot.h"
#include "doctor/query.h"

namespace rdmascope::doctor {

Service::Service(std::shared_ptr<const CollectorRunner> runner,
                 std::map<std::string, std::string> probe_errors, double interval_seconds,
                 double lookback_seconds)
    : runner_(std::move(runner)),
      probe_errors_(std::move(probe_errors)),
      interval_seconds_(interval_seconds),
      history_(60, interval_seconds, 2048, lookback_seconds) {
  // The first snapshot is taken before /doctor is served: counter rates always have a start.
  history_.Offer(CollectSnapshot(*runner_, probe_errors_));
  thread_ = std::thread([this] { Tick(); });
  live_thread_ = std::thread([this] { ObserveLiveWindows(); });
}

Service::~Service() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  live_wake_.notify_all();
  live_ended_.notify_all();
  thread_.join();
  live_thread_.join();
}

void Service::ObserveLiveWindows() {
  std::unique_lock lock(mutex_);
  for (;;) {
    live_wake_.wait(lock, [this] { return stop_ || live_asked_; });
    if (stop_) return;
    const uint64_t window_ns = live_window_ns_;
    lock.unlock();
    std::shared_ptr<LiveWindow> window;
    try {
      Snapshot before = CollectSnapshot(*runner_, probe_errors_);
      lock.lock();
      // Interrupted by the service stopping: a shutdown waits for no window.
      const bool stopping =
          live_wake_.wait_for(lock, std::chrono::nanoseconds(window_ns), [this] { return stop_; });
      lock.unlock();
      if (!stopping) {
        Snapshot after = CollectSnapshot(*runner_, probe_errors_);
        history_.Offer(after);
        window = std::make_shared<LiveWindow>(
            LiveWindow{std::move(before), std::move(after), MonotonicSeconds()});
      }
    } catch (const std::exception& e) {  // the runner catches collectors; a last guard
      log::Warn("doctor live window: collection failed", {{"err", e.what()}});
    }
    lock.lock();
    live_ = std::move(window);  // null after a failure: the waiting requests get an error
    live_asked_ = false;
    ++live_generation_;
    live_ended_.notify_all();
  }
}

std::shared_ptr<const Service::LiveWindow> Service::SharedLiveWindow(uint64_t window_ns) {
  std::unique_lock lock(mutex_);
  if (live_ && !live_asked_ &&
      MonotonicSeconds() - live_->ended_seconds < kLiveWindowReuseSeconds) {
    return live_;
  }
  if (!live_asked_) {  // else the one running is shared, whatever window it observes
    live_asked_ = true;
    live_window_ns_ = window_ns;
    live_wake_.notify_one();
  }
  const uint64_t generation = live_generation_;
  live_ended_.wait(lock, [&] { return stop_ || live_generation_ != generation; });
  if (stop_ || !live_) return nullptr;
  return live_;
}

void Service::Tick() {
  std::unique_lock lock(mutex_);
  for (;;) {
    if (wake_.wait_for(lock, std::chrono::duration<double>(interval_seconds_),
                       [this] { return stop_; })) {
      return;
    }
    lock.unlock();
    try {
      history_.Offer(CollectSnapshot(*runner_, probe_errors_));
    } catch (const std::exception& e) {  // the runner catches collectors; this is a last guard
      log::Warn("doctor history: collection failed", {{"err", e.what()}});
    }
    lock.lock();
  }
}

void Service::AddRoute(DebugRoutes& routes) {
  routes["/doctor"] = [this](std::string_view query) { return Report(query, false); };
  // The same report for people: what /doctor answers a browser (http/handler.cc).
  routes["/doctor.html"] = [this](std::string_view query) { return Report(query, true); };
}

std::string Service::Report(std::string_view query, bool html) {
  // ?window=D: counters observed live over D (the request waits for it); absent: rates over
  // the kept counters of the last lookback (since start when younger). Thresholds as the
  // --doctor.* flags without the prefix (doctor/query.h).
  const auto [window_ns, options] = ParseDoctorQuery(query);
  const auto view = history_.View();
  std::shared_ptr<const LiveWindow> live;
  std::optional<Snapshot> collected;
  if (window_ns && *window_ns > 0) {
    live = SharedLiveWindow(*window_ns);
    if (!live) throw std::runtime_error("the live window was not observed (see the log)");
  } else {
    collected = CollectSnapshot(*runner_, probe_errors_);
    history_.Offer(*collected);
  }
  Snapshot now = live ? live->after : *collected;
  const Snapshot* live_before = live ? &live->before : nullptr;
  const Snapshot* before = live_before ? live_before
                           : window_ns ? nullptr
                                       : view->CounterBase(now.seconds());
  const char* kind = live_before              ? kWindowLive
                     : before == nullptr      ? kWindowNone
                     : view->IsStart(*before) ? kWindowSinceStart
                                              : kWindowLookback;
  now.set_history(view);
  std::vector<Finding> findings = RunChecks(now, before, options);
  SortFindings(findings);
  const ReportContext context{
      .host = HostName(),
      .generated = NowRfc3339(),
      .window_seconds = before == nullptr ? 0 : now.seconds() - before->seconds(),
      .window_kind = kind};
  return html ? RenderHtml(findings, context) : RenderJson(findings, context);
}

}  // namespace rdmascope::doctor
