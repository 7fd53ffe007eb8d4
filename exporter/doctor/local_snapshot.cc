#include "doctor/local_snapshot.h"

#include <unistd.h>

#include <chrono>
#include <ctime>
#include <optional>
#include <thread>

#include "core/capture.h"
#include "core/log.h"
#include "doctor/checks.h"

namespace rdmascope::doctor {

double MonotonicSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

std::string NowRfc3339() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buffer;
}

std::map<std::string, std::string> ProbeErrors(const std::vector<NamedCollector>& collectors) {
  std::map<std::string, std::string> errors;
  for (const NamedCollector& entry : collectors) {
    if (std::string error = entry.collector->ProbeError(); !error.empty()) {
      errors[entry.name] = std::move(error);
    }
  }
  return errors;
}

Snapshot CollectSnapshot(const CollectorRunner& runner,
                         const std::map<std::string, std::string>& probe_errors) {
  auto families = runner.Collect();
  // Replaying (serve --replay's /doctor): the time the capture took the sample this
  // collection replayed, so that rates are over the capture's window, not over the time
  // between two requests to the replay (found by e2e_link_captures: a pre-FEC BER of 2e-7
  // read as 1e-5, critical). The collection chose its sample: asked after it.
  const capture::Session* session = capture::Active();
  const auto replayed = session != nullptr ? session->sample_seconds() : std::nullopt;
  return SnapshotOf(runner, families, probe_errors, replayed.value_or(MonotonicSeconds()));
}

Snapshot CollectSnapshot(const CollectorRunner& runner,
                         const std::map<std::string, std::string>& probe_errors, double seconds) {
  return SnapshotOf(runner, runner.Collect(), probe_errors, seconds);
}

Snapshot SnapshotOf(const CollectorRunner& runner,
                    const std::vector<prometheus::MetricFamily>& families,
                    const std::map<std::string, std::string>& probe_errors, double seconds) {
  std::map<std::string, CollectorOutcome> outcomes;
  for (const CollectorState& state : runner.States()) {
    CollectorOutcome& outcome = outcomes[state.name];
    outcome.failed = state.health == CollectorHealth::kFailed;
    outcome.no_data = state.health == CollectorHealth::kNoData;
    outcome.detail = state.detail;
    if (const auto it = probe_errors.find(state.name); it != probe_errors.end()) {
      outcome.probe_error = it->second;
    }
  }
  return Snapshot(families, seconds, std::move(outcomes));
}

ParsedReport ReportHere(const CollectorRunner& runner,
                        const std::map<std::string, std::string>& probe_errors,
                        const DoctorOptions& options) {
  std::optional<Snapshot> before;
  if (options.window_ns > 0) {
    before = CollectSnapshot(runner, probe_errors);
    log::Info("doctor: observing counters",
              {{"window_seconds", std::to_string(static_cast<double>(options.window_ns) / 1e9)}});
    std::this_thread::sleep_for(std::chrono::nanoseconds(options.window_ns));
  }
  const Snapshot now = CollectSnapshot(runner, probe_errors);
  ParsedReport report;
  report.findings = RunChecks(now, before ? &*before : nullptr, options);
  SortFindings(report.findings);
  report.context = {.host = HostName(),
                    .generated = NowRfc3339(),
                    .window_seconds = static_cast<double>(options.window_ns) / 1e9,
                    .window_kind = before ? kWindowLive : kWindowNone};
  return report;
}

}  // namespace rdmascope::doctor
