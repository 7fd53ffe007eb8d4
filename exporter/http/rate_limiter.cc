#include "http/rate_limiter.h"

#include <algorithm>

namespace rdmascope {

RateLimiter::RateLimiter(std::chrono::nanoseconds interval, int64_t burst)
    : tokens_per_second_(1.0 / std::chrono::duration<double>(interval).count()),
      burst_(burst),
      tokens_(static_cast<double>(burst)) {}

bool RateLimiter::Allow(Clock::time_point now) {
  std::lock_guard lock(mutex_);
  // advance(): tokens earned since the last allowed request, capped at the burst.
  double tokens = tokens_;
  if (started_ && now > last_) {
    tokens += std::chrono::duration<double>(now - last_).count() * tokens_per_second_;
  }
  tokens = std::min(tokens, static_cast<double>(burst_));
  tokens -= 1;
  // reserveN with no wait allowed: the wait for the missing part, in whole nanoseconds (Go
  // truncates it, so a shortfall under 1 ns still passes), must be zero.
  const double wait_ns = tokens < 0 ? -tokens / tokens_per_second_ * 1e9 : 0;
  if (burst_ < 1 || wait_ns >= 1.0) return false;
  tokens_ = tokens;
  last_ = now;
  started_ = true;
  return true;
}

}  // namespace rdmascope
