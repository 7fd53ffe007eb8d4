#include "core/collector_runner.h"

#include <exception>
#include <set>
#include <unordered_map>

#include "core/log.h"
#include "core/process_metrics.h"

namespace rdmascope {
namespace {

// A series' identity within its family: its labels, in order.
std::string LabelKey(const prometheus::ClientMetric& metric) {
  std::string key;
  for (const auto& label : metric.label) {
    key += label.name;
    key += '\x1f';
    key += label.value;
    key += '\x1e';
  }
  return key;
}

using prometheus::MetricType;

constexpr MetricDesc kSuccess{"rdmascope_collector_success",
                              "1 if the collector's last run succeeded (or found nothing to "
                              "collect on this host), 0 if it failed.",
                              MetricType::Gauge};
constexpr MetricDesc kDuration{"rdmascope_collector_duration_seconds",
                               "Duration of the collector's last run.", MetricType::Gauge};
constexpr MetricDesc kNoData{"rdmascope_collector_no_data",
                             "1 if the collector found nothing to collect on this host (for "
                             "example no RDMA device), 0 otherwise.",
                             MetricType::Gauge};
constexpr MetricDesc kDuplicates{
    "rdmascope_collector_duplicate_series_dropped_total",
    "Series dropped because the collector produced the same series twice in one scrape "
    "(a driver repeating a counter name).",
    MetricType::Counter};
constexpr MetricDesc kBuildInfo{"rdmascope_build_info",
                                "A metric with a constant 1 labelled by the build's version "
                                "and revision.",
                                MetricType::Gauge};

}  // namespace

const char* HealthName(CollectorHealth health) {
  switch (health) {
    case CollectorHealth::kNeverRun:
      return "not run yet";
    case CollectorHealth::kOk:
      return "ok";
    case CollectorHealth::kNoData:
      return "no data";
    case CollectorHealth::kFailed:
      return "failed";
  }
  return "unknown";
}

CollectorRunner::CollectorRunner(std::vector<NamedCollector> collectors, BuildInfo build,
                                 std::filesystem::path procfs)
    : collectors_(std::move(collectors)),
      build_(std::move(build)),
      procfs_(std::move(procfs)),
      duplicates_dropped_(collectors_.size()) {
  for (const auto& entry : collectors_) states_.push_back({.name = entry.name});
}

CollectorState CollectorRunner::RunOne(const NamedCollector& entry, EarlierFamilies earlier,
                                       MetricSet& out) const {
  CollectorState state{.name = entry.name};
  state.last_run = std::chrono::system_clock::now();
  const auto start = std::chrono::steady_clock::now();
  try {
    const CollectResult result = entry.collector->CollectAfter(earlier, out);
    state.health = result.no_data ? CollectorHealth::kNoData : CollectorHealth::kOk;
    state.detail = result.detail;
  } catch (const std::exception& e) {
    state.health = CollectorHealth::kFailed;
    state.detail = e.what();
  } catch (...) {
    state.health = CollectorHealth::kFailed;
    state.detail = "unknown exception";
  }
  state.duration_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return state;
}

std::vector<prometheus::MetricFamily> CollectorRunner::Collect() const {
  std::vector<prometheus::MetricFamily> families;
  std::unordered_map<std::string, size_t> family_index;  // name -> position in families
  std::unordered_map<std::string, std::set<std::string>> merged_series;  // of shared families
  MetricSet health;
  for (size_t i = 0; i < collectors_.size(); ++i) {
    const NamedCollector& entry = collectors_[i];
    MetricSet out;
    CollectorState state = RunOne(entry, families, out);
    duplicates_dropped_[i] += out.dropped_duplicates();
    state.series = out.sample_count();
    if (state.health != CollectorHealth::kFailed) {
      // A failed collector contributes no partial data: half a device is worse than none.
      for (prometheus::MetricFamily& family : out.Take()) {
        // Collectors may share a family (rdmascope_probe_attached{probe=...}): one family in
        // the exposition, or Prometheus rejects the second TYPE line.
        const auto [it, fresh] = family_index.try_emplace(family.name, families.size());
        if (fresh) {
          families.push_back(std::move(family));
        } else if (families[it->second].type == family.type) {
          // Two collectors may also report one series (a CQ's capacity from the verbs probes
          // and from the preload library): the first one registered wins.
          auto& metrics = families[it->second].metric;
          std::set<std::string>& seen = merged_series[family.name];
          if (seen.empty()) {
            for (const auto& metric : metrics) seen.insert(LabelKey(metric));
          }
          for (auto& metric : family.metric) {
            if (seen.insert(LabelKey(metric)).second) {
              metrics.push_back(std::move(metric));
            } else {
              duplicates_dropped_[i] += 1;
            }
          }
        } else {
          duplicates_dropped_[i] += family.metric.size();
        }
      }
    }
    {
      std::lock_guard lock(state_mutex_);
      CollectorState& previous = states_[i];
      // Log transitions, not every scrape: a collector failing every 15 s must not flood.
      const bool changed = state.health != previous.health || state.detail != previous.detail;
      const log::Level level = !changed                                      ? log::Level::kDebug
                               : state.health == CollectorHealth::kFailed    ? log::Level::kError
                               : state.health == CollectorHealth::kNoData    ? log::Level::kInfo
                               : previous.health == CollectorHealth::kFailed ? log::Level::kInfo
                                                                             : log::Level::kDebug;
      if (log::Enabled(level)) {
        log::Write(level, "collector state",
                   {{"collector", entry.name},
                    {"state", HealthName(state.health)},
                    {"detail", state.detail}});
      }
      previous = state;
    }
    const std::initializer_list<Label> labels{{"collector", entry.name}};
    health.Add(kSuccess, labels, state.health == CollectorHealth::kFailed ? 0 : 1);
    health.Add(kNoData, labels, state.health == CollectorHealth::kNoData ? 1 : 0);
    health.Add(kDuration, labels, state.duration_seconds);
    health.Add(kDuplicates, labels, static_cast<double>(duplicates_dropped_[i].load()));
  }
  health.Add(kBuildInfo, {{"version", build_.version}, {"revision", build_.revision}}, 1);
  AddProcessMetrics(procfs_, health);
  for (const auto& source : self_metrics_) source(health);
  auto own = health.Take();
  std::move(own.begin(), own.end(), std::back_inserter(families));
  return families;
}

DebugRoutes CollectorRunner::CollectDebugRoutes() {
  DebugRoutes routes;
  for (auto& entry : collectors_) entry.collector->AddDebugRoutes(routes);
  return routes;
}

std::vector<CollectorState> CollectorRunner::States() const {
  std::lock_guard lock(state_mutex_);
  return states_;
}

}  // namespace rdmascope
