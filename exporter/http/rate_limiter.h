// The web config's rate_limit: exporter-toolkit's token bucket (web/tls_config.go Serve, with
// golang.org/x/time/rate): rate.NewLimiter(rate.Every(interval), burst), one Allow() per
// request, shared by every request and connection of the server.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>

namespace rdmascope {

class RateLimiter {
 public:
  using Clock = std::chrono::steady_clock;

  // One token every `interval` (> 0), at most `burst` held; the bucket starts full. A burst of
  // 0 or less refuses every request (as Go's limiter does: a request needs a whole token).
  RateLimiter(std::chrono::nanoseconds interval, int64_t burst);

  // x/time/rate's AllowN(now, 1): refills for the time since the last allowed request, then
  // takes a token if a whole one is there. A clock going backwards refills nothing.
  bool Allow(Clock::time_point now = Clock::now());

 private:
  const double tokens_per_second_;
  const int64_t burst_;
  std::mutex mutex_;
  double tokens_;
  Clock::time_point last_{};
  bool started_ = false;
};

}  // namespace rdmascope
