// The slow lane: the few threads that run the costly routes (/doctor, /doctor.html, /debug/*)
// away from libmicrohttpd's threads. A libmicrohttpd thread serves every connection it
// accepted from one epoll loop, so a request that blocks it (a collection, doctor's live
// window) stalls the scrapes and health probes queued on the same thread; the server suspends
// such a request's connection instead (MHD_suspend_connection) and resumes it when the lane
// has its answer. How many costly requests may wait is the handler's to say (HttpHandler::
// AdmitCostly): the lane only runs what it is given, in order.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace rdmascope {

class SlowLane {
 public:
  explicit SlowLane(int threads);
  // Drops the jobs not started (destroying them: what they own is released) and waits for the
  // running ones to return.
  ~SlowLane();
  SlowLane(const SlowLane&) = delete;
  SlowLane& operator=(const SlowLane&) = delete;

  // Runs `job` on a lane thread, after the jobs submitted before it. A job must not throw.
  void Submit(std::function<void()> job);

 private:
  void Run();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace rdmascope
