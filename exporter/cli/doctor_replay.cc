#include "cli/doctor_replay.h"

#include <map>
#include <memory>
#include <stdexcept>
#include <string>

#include "collectors/build.h"
#include "collectors/capture_config.h"
#include "core/capture.h"
#include "core/capture_index.h"
#include "core/collector_runner.h"
#include "core/log.h"
#include "core/version.h"
#include "doctor/local_snapshot.h"
#include "doctor/replay_report.h"

namespace rdmascope {
namespace {

// Installs a capture as the host boundary for as long as it lives; uninstalls it before the
// session goes, so that nothing reads through a dangling boundary.
class InstalledReplay {
 public:
  explicit InstalledReplay(std::unique_ptr<capture::Session> session)
      : session_(std::move(session)) {
    capture::Install(session_.get());
  }
  ~InstalledReplay() { capture::Install(nullptr); }
  InstalledReplay(const InstalledReplay&) = delete;
  InstalledReplay& operator=(const InstalledReplay&) = delete;
  capture::Session& session() { return *session_; }

 private:
  std::unique_ptr<capture::Session> session_;
};

// One capture through the collectors: sample 1 (unless --window 0s) and the last one.
doctor::ReplayedHost ReplayOne(const ServeConfig& base, const std::string& path,
                               const doctor::DoctorOptions& options) {
  auto reader = capture::Reader::Open(path);
  if (!reader) throw std::runtime_error("--replay " + path + ": " + reader.error());
  auto facts = capture::ReadIndexFacts(reader->index_text());
  if (!facts) throw std::runtime_error("--replay " + path + ": " + facts.error());
  const size_t samples = reader->sample_count();
  if (facts->sample_seconds.size() != samples) {
    throw std::runtime_error("--replay " + path + ": index.json's sample times do not match");
  }
  ServeConfig config = base;
  config.replay = path;
  ConfigureForReplay(config, facts->collectors);
  InstalledReplay replay(capture::Session::Replaying(capture::Layout(config.sysfs, config.procfs),
                                                     std::move(*reader)));
  // Built while the capture is installed: device lists and PMUs come from its first sample.
  std::vector<NamedCollector> collectors = BuildCollectors(config);
  const auto probe_errors = doctor::ProbeErrors(collectors);
  CollectorRunner runner(std::move(collectors), BuildInfo{kVersion, kRevision}, config.procfs);
  // --window 0s: the last sample alone, no rates.
  const bool rates = samples > 1 && !(options.window_set && options.window_ns == 0);
  doctor::ReplayedHost host{.name = facts->hostname.empty() ? path : facts->hostname,
                            .generated = facts->sample_times.back(),
                            .before = std::nullopt,
                            .now = doctor::Snapshot(doctor::SeriesByName{}, 0),
                            .redaction_key_id = !facts->redacted ? ""
                                                : facts->redaction_key_id.empty()
                                                    ? "(a key the index does not name)"
                                                    : facts->redaction_key_id};
  // Every sample in order, as `serve --replay`'s scrapes: a collector that keeps state across
  // collections (a counter's reset, a process that appeared) sees what it saw live.
  for (size_t sample = 1; sample <= samples; ++sample) {
    replay.session().NextSample();
    const double seconds = facts->sample_seconds[sample - 1];
    if (sample == samples) {
      host.now = doctor::CollectSnapshot(runner, probe_errors, seconds);
    } else if (sample == 1 && rates) {
      host.before = doctor::CollectSnapshot(runner, probe_errors, seconds);
    } else {
      runner.Collect();
    }
  }
  log::Info("doctor: capture replayed", {{"path", path},
                                         {"host", host.name},
                                         {"samples", std::to_string(samples)},
                                         {"kernel", facts->kernel_release}});
  return host;
}

}  // namespace

doctor::ParsedReport ReportFromCaptures(const ServeConfig& config,
                                        const doctor::DoctorOptions& options) {
  std::vector<doctor::ReplayedHost> hosts;
  for (const std::string& path : options.replay) {
    hosts.push_back(ReplayOne(config, path, options));
  }
  // Two captures of one host name (two captures of it, or names hidden alike): told apart by
  // their paths, then by their place on the command line, so that neither hides the other in
  // a fleet report.
  for (const bool by_place : {false, true}) {
    std::map<std::string, size_t> named;
    for (const doctor::ReplayedHost& host : hosts) ++named[host.name];
    for (size_t i = 0; i < hosts.size(); ++i) {
      if (named[hosts[i].name] < 2) continue;
      hosts[i].name += by_place ? " #" + std::to_string(i + 1) : " (" + options.replay[i] + ")";
    }
  }
  return doctor::ReportFromReplays(std::move(hosts), options);
}

}  // namespace rdmascope
