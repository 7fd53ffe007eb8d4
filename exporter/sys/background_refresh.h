// A thread that keeps an answer from a slow or unreliable source (the container runtime's CRI
// socket, the kubelet's PodResources socket) fresh, so that a scrape never waits for the
// source: readers take the last answer under the lock, the thread asks the source every
// `refresh_interval`, and sooner (at most once per `miss_interval`) after a reader met
// something the last answer did not know (Miss). A source that hangs costs this thread its
// timeout; one that fails or is gone leaves the last answer in place (the owner's `after`
// step decides what a failure keeps).
//
// Nothing starts before StartLocked (the first lookup, i.e. the first scrape): `serve` drops
// its capabilities while it has one thread only, and the gRPC library starts threads of its own.
//
// A refresh interval of 0 is "in step with the collections" (`capture` and `--replay`, where
// each sample holds the answer it was collected with, docs/capture.md): no thread; the owner
// calls FetchNow once per collection, which asks the source on the collecting thread.
//
// The owner's data is guarded by this object's lock (Lock()): the `before` and `after` steps
// run with it held, `fetch` without it, so readers are never blocked by a call in flight.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace rdmascope::sys {

class BackgroundRefresh {
 public:
  using Clock = std::chrono::steady_clock;

  struct Options {
    std::chrono::milliseconds refresh_interval{30000};
    std::chrono::milliseconds miss_interval{5000};
    // Logged when an attempt fails after one that did not fail the same way, and when the
    // source answers again after a failure (with `endpoint` and, for failures, `err`).
    std::string failed_message = "source did not answer; its last answer is kept";
    std::string recovered_message = "source answers again";
    std::string endpoint;
  };

  struct Steps {
    // With the lock held, before each fetch (e.g. take the misses this attempt answers).
    std::function<void()> before;
    // Without the lock, on the refresher's thread: asks the source and keeps the answer where
    // only this thread and `after` look. Empty when it succeeded, else why it did not.
    std::function<std::string()> fetch;
    // With the lock held, after each fetch: `ok` publishes the answer, else the last one stays.
    std::function<void(bool ok)> after;
  };

  struct Status {
    std::optional<Clock::time_point> last_success;
    std::string last_error;  // of the last attempt; empty when it succeeded
    uint64_t attempts = 0;
  };

  BackgroundRefresh(Options options, Steps steps);
  // Stops the thread; a fetch in flight is waited for (it is bounded by its own timeout).
  ~BackgroundRefresh();
  BackgroundRefresh(const BackgroundRefresh&) = delete;
  BackgroundRefresh& operator=(const BackgroundRefresh&) = delete;

  // The lock that guards the owner's data and this object's state.
  std::unique_lock<std::mutex> Lock() const { return std::unique_lock(mutex_); }

  // With Lock() held: starts the thread, once (the first fetch is made at once).
  void StartLocked();
  // With Lock() held: a reader met what the last answer did not know; ask again once the
  // miss interval since the last attempt has passed. Once per attempt, however many misses.
  void MissLocked();
  // With Lock() held.
  const Status& StatusLocked() const { return status_; }

  // Refresh interval 0: no thread, FetchNow at each collection.
  bool in_step() const { return options_.refresh_interval.count() == 0; }
  // Without Lock() held: one attempt now, on this thread (in step only; else nothing). Two
  // collections at once attempt one after the other.
  void FetchNow();

  Status status() const;
  // Waits until `attempts` attempts in all were made (tests).
  bool WaitForAttempts(uint64_t attempts, std::chrono::milliseconds timeout) const;

 private:
  void Run();
  // One attempt: `before`, `fetch` with `lock` released, `after`, the status. `lock` is held.
  void AttemptLocked(std::unique_lock<std::mutex>& lock);

  const Options options_;
  const Steps steps_;
  mutable std::mutex mutex_;
  std::mutex fetch_now_;  // one FetchNow at a time: `fetch` keeps its answer in one place
  mutable std::condition_variable changed_;
  Status status_;
  bool started_ = false;
  bool stopping_ = false;
  bool miss_ = false;
  std::thread thread_;
};

}  // namespace rdmascope::sys
