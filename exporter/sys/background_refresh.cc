#include "sys/background_refresh.h"

#include <utility>

#include "core/log.h"

namespace rdmascope::sys {

BackgroundRefresh::BackgroundRefresh(Options options, Steps steps)
    : options_(std::move(options)), steps_(std::move(steps)) {}

BackgroundRefresh::~BackgroundRefresh() {
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void BackgroundRefresh::StartLocked() {
  if (started_ || in_step()) return;
  started_ = true;
  thread_ = std::thread([this] { Run(); });
}

void BackgroundRefresh::MissLocked() {
  if (miss_ || in_step()) return;
  miss_ = true;
  changed_.notify_all();
}

BackgroundRefresh::Status BackgroundRefresh::status() const {
  const std::lock_guard lock(mutex_);
  return status_;
}

bool BackgroundRefresh::WaitForAttempts(uint64_t attempts,
                                        std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, timeout, [&] { return status_.attempts >= attempts; });
}

void BackgroundRefresh::Run() {
  std::unique_lock lock(mutex_);
  std::optional<Clock::time_point> last_attempt;
  while (!stopping_) {
    const Clock::time_point now = Clock::now();
    const bool due = !last_attempt || now - *last_attempt >= options_.refresh_interval ||
                     (miss_ && now - *last_attempt >= options_.miss_interval);
    if (!due) {
      const Clock::time_point next =
          *last_attempt + (miss_ ? options_.miss_interval : options_.refresh_interval);
      changed_.wait_until(lock, next);
      continue;
    }
    last_attempt = now;
    miss_ = false;
    AttemptLocked(lock);
  }
}

void BackgroundRefresh::FetchNow() {
  if (!in_step()) return;
  const std::lock_guard one_at_a_time(fetch_now_);
  std::unique_lock lock(mutex_);
  AttemptLocked(lock);
}

void BackgroundRefresh::AttemptLocked(std::unique_lock<std::mutex>& lock) {
  if (steps_.before) steps_.before();
  lock.unlock();
  const std::string error = steps_.fetch();
  lock.lock();
  ++status_.attempts;
  const bool ok = error.empty();
  steps_.after(ok);
  if (ok) {
    status_.last_success = Clock::now();
    if (!status_.last_error.empty()) {
      log::Info(options_.recovered_message, {{"endpoint", options_.endpoint}});
    }
  } else if (status_.last_error != error) {
    log::Warn(options_.failed_message, {{"endpoint", options_.endpoint}, {"err", error}});
  }
  status_.last_error = error;
  changed_.notify_all();
}

}  // namespace rdmascope::sys
