#include "http/slow_lane.h"

#include <utility>

namespace rdmascope {

SlowLane::SlowLane(int threads) {
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Run(); });
}

SlowLane::~SlowLane() {
  std::deque<std::function<void()>> dropped;
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
    dropped.swap(jobs_);
  }
  wake_.notify_all();
  for (std::thread& thread : threads_) thread.join();
  // `dropped` is destroyed here, outside the lock: a job's captures may take other locks.
}

void SlowLane::Submit(std::function<void()> job) {
  {
    std::lock_guard lock(mutex_);
    jobs_.push_back(std::move(job));
  }
  wake_.notify_one();
}

void SlowLane::Run() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
      if (stop_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

}  // namespace rdmascope
