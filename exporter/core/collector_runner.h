// CollectorRunner: the single prometheus::Collectable behind /metrics. It runs every enabled
// collector, catches everything they throw, and adds the exporter's own health series
// (rdmascope_collector_success, rdmascope_collector_duration_seconds, rdmascope_build_info,
// process_*). prometheus-cpp's HTTP handler has no try/catch of its own.
#pragma once

#include <prometheus/collectable.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/collector.h"

namespace rdmascope {

struct NamedCollector {
  std::string name;
  std::unique_ptr<Collector> collector;
};

enum class CollectorHealth { kNeverRun, kOk, kNoData, kFailed };

struct CollectorState {
  std::string name;
  CollectorHealth health = CollectorHealth::kNeverRun;
  std::string detail;
  double duration_seconds = 0;
  size_t series = 0;
  std::chrono::system_clock::time_point last_run;
};

struct BuildInfo {
  std::string version;
  std::string revision;
};

class CollectorRunner : public prometheus::Collectable {
 public:
  CollectorRunner(std::vector<NamedCollector> collectors, BuildInfo build,
                  std::filesystem::path procfs);

  std::vector<prometheus::MetricFamily> Collect() const override;

  // A copy of the last outcome of every collector, for the landing page.
  std::vector<CollectorState> States() const;
  const BuildInfo& build() const { return build_; }
  DebugRoutes CollectDebugRoutes();
  // Series of the exporter's own parts that are not collectors (the capability broker),
  // added after process_*. Before the server starts.
  void AddSelfMetrics(std::function<void(MetricSet&)> source) {
    self_metrics_.push_back(std::move(source));
  }

 private:
  CollectorState RunOne(const NamedCollector& entry, EarlierFamilies earlier, MetricSet& out) const;

  std::vector<NamedCollector> collectors_;
  BuildInfo build_;
  std::filesystem::path procfs_;
  mutable std::mutex state_mutex_;
  mutable std::vector<CollectorState> states_;
  mutable std::vector<std::atomic<uint64_t>> duplicates_dropped_;
  std::vector<std::function<void(MetricSet&)>> self_metrics_;
};

const char* HealthName(CollectorHealth health);

}  // namespace rdmascope
