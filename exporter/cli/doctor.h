// `rdmascope doctor`: runs the collectors `serve` runs (same flags, one code path reading the
// host), twice --window apart for counter rates, evaluates every check over the result and
// prints findings with advice. docs/doctor.md.
#pragma once

#include <CLI/CLI.hpp>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cli/http_get.h"
#include "cli/serve_config.h"
#include "core/collector_runner.h"
#include "doctor/history.h"
#include "doctor/options.h"
#include "doctor/report.h"

namespace rdmascope {

// Registers doctor's own flags (--window, --format, --fail-on, --doctor.*) on `doctor`.
void AddDoctorFlags(CLI::App& doctor, doctor::DoctorOptions& options);

// After parsing: checks what CLI11 cannot (the CQ ratios' order). Throws CLI::ValidationError.
void FinishDoctorOptions(const doctor::DoctorOptions& options);

// The HTTP client options of `--PREFIX.*` (exporter, prometheus): its password and bearer token
// read from their files. Throws when a file cannot be read.
HttpClientOptions ClientOptions(const doctor::ClientAccess& access, const std::string& prefix);

// Text reports in colour: stdout is a terminal and NO_COLOR is unset.
bool DoctorColourWanted();

// Writes the report in --format to stdout (text: every skipped check in full with
// --show-skipped or `show_skipped`) and returns doctor's exit code for it.
int PrintDoctorReport(const std::vector<doctor::Finding>& findings,
                      const doctor::ReportContext& context, const doctor::DoctorOptions& options,
                      bool show_skipped);

// The address `doctor` tries when --exporter is not given: serve's default listen address.
inline constexpr const char* kDefaultExporterUrl = "http://127.0.0.1:9879";

// Why each collector's eBPF probes did not attach (absent: attached, or none), by name.
std::map<std::string, std::string> ProbeErrors(const std::vector<NamedCollector>& collectors);

// doctor inside `serve`: keeps the history (doctor/history.h) from a light internal tick, a
// collection at start and one a minute, and answers /doctor with the report over it: counter
// rates over the last `lookback_seconds` (since start when younger; with ?window=D, over a
// window observed live, D at most kMaxLiveWindowSeconds), trends over the kept hour.
// Thresholds are the defaults unless the query names them.
//
// A live window is no client's to choose freely (issue 37): one worker thread observes it, the
// requests that arrive meanwhile wait for that same observation, and its result answers every
// request for kLiveWindowReuseSeconds after it ends, whatever D each asked (the report's
// window_seconds says what was observed). The server runs /doctor on its slow lane, never on
// an HTTP thread (http/server.h).
class DoctorService {
 public:
  DoctorService(std::shared_ptr<const CollectorRunner> runner,
                std::map<std::string, std::string> probe_errors, double interval_seconds = 60,
                double lookback_seconds = doctor::kDefaultLookbackSeconds);
  ~DoctorService();  // stops the tick
  DoctorService(const DoctorService&) = delete;
  DoctorService& operator=(const DoctorService&) = delete;

  static constexpr double kMaxLiveWindowSeconds = 10;
  static constexpr double kLiveWindowReuseSeconds = 10;

  // Registers /doctor.
  void AddRoute(DebugRoutes& routes);
  // The JSON body of /doctor?QUERY. Throws std::invalid_argument on a bad ?window=.
  // JSON (schema_version 1), or the HTML page.
  std::string Report(std::string_view query, bool html = false);

 private:
  // Two collections a live window apart.
  struct LiveWindow {
    doctor::Snapshot before;
    doctor::Snapshot after;
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
  doctor::History history_;
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

// Returns the exit code: 0 ok/info, 1 warn (unless --fail-on=crit), 2 crit, 3 could not run.
int RunDoctor(const ServeConfig& config, const doctor::DoctorOptions& options);

}  // namespace rdmascope
