// doctor inside `serve`: the /doctor and /doctor.html routes, over a history the service keeps.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "core/collector.h"
#include "core/collector_runner.h"
#include "doctor/history.h"
#include "doctor/options.h"
#include "doctor/samples.h"

namespace rdmascope::doctor {

// doctor inside `serve`: keeps the history (doctor/history.h) from a light internal tick, a
// collection at start and one a minute, and answers /doctor with the report over it: counter
// rates over the last `lookback_seconds` (since start when younger; with ?window=D, over a
// window observed live, D at most kMaxLiveWindowSeconds (doctor/query.h)), trends over the kept
// hour. Thresholds are the defaults unless the query names them.
//
// A live window is no client's to choose freely (issue 37): one worker thread observes it, the
// requests that arrive meanwhile wait for that same observation, and its result answers every
// request for kLiveWindowReuseSeconds after it ends, whatever D each asked (the report's
// window_seconds says what was observed). The server runs /doctor on its slow lane, never on
// an HTTP thread (http/server.h).
class Service {
 public:
  Service(std::shared_ptr<const CollectorRunner> runner,
          std::map<std::string, std::string> probe_errors, double interval_seconds = 60,
          double lookback_seconds = kDefaultLookbackSeconds);
  ~Service();  // stops the tick
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  static constexpr double kLiveWindowReuseSeconds = 10;

  // Registers /doctor.
  void AddRoute(DebugRoutes& routes);
  // The JSON body of /doctor?QUERY. Throws std::invalid_argument on a bad ?window=.
  // JSON (schema_version 1), or the HTML page.
  std::string Report(std::string_view query, bool html = false);

 private:
  // Two collections a live window apart.
  struct LiveWindow {
    Snapshot before;
    Snapshot after;
    double ended_seconds = 0;  // monotonic
  };

  void Tick();
  // The live window worker: observes one window each time a request asks for one.
  void ObserveLiveWindows();
  // A live window of about `window_ns` (the one running, or one that ended less than
  // kLiveWindowReuseSeconds ago), waiting for it; null when the service stops.
  std::shared_ptr<const LiveWindow> SharedLiveWindow(uint64_t window_ns);

  std::shared_ptr<const CollectorRunner> runner_;
  std::map<std::string, std::string> probe_errors_;
  double interval_seconds_;
  History history_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
  // The live window worker's state, under mutex_.
  std::condition_variable live_wake_;   // the worker: a window is asked for, or stop
  std::condition_variable live_ended_;  // the requests: a window ended
  bool live_asked_ = false;
  uint64_t live_window_ns_ = 0;
  uint64_t live_generation_ = 0;  // windows ended so far
  std::shared_ptr<const LiveWindow> live_;
  std::thread live_thread_;
};

}  // namespace rdmascope::doctor
