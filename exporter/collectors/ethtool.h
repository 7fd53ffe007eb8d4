// The ethtool collector: NIC statistics (`ethtool -S`), vendor-neutral RoCE health counters,
// and NIC configuration (MTU, interrupt coalescing, NUMA node, PFC), per network interface.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "collectors/netdev_source.h"
#include "core/collector.h"
#include "core/name_filter.h"

namespace rdmascope {

enum class QueueStatsMode {
  kRaw,    // every stat as rdma_ethtool_stat, exactly as `ethtool -S` prints it
  kLabel,  // per-queue stats as rdma_ethtool_queue_stat{queue="N"}
  kSum,    // per-queue stats summed over queues as rdma_ethtool_queue_stat_sum
};

struct EthtoolOptions {
  std::string device_include;
  std::string device_exclude;
  std::string stat_include;
  std::string stat_exclude;
  QueueStatsMode queue_stats = QueueStatsMode::kRaw;
  bool pfc = true;
  // --collector.ethtool.refresh-interval: how old driver info, coalescing, private flags and
  // NUMA node may be; 0 reads them at every scrape. Stats and MTU are read at every scrape.
  std::chrono::nanoseconds refresh_interval = std::chrono::seconds(60);
};

// Maps snapshots to metrics; `stats` filters raw stat names. Exposed for tests.
void MapNetdevs(const std::vector<NetdevSnapshot>& netdevs, const NameFilter& stats,
                QueueStatsMode mode, MetricSet& out);

class EthtoolCollector : public Collector {
 public:
  EthtoolCollector(const EthtoolOptions& options, std::unique_ptr<NetdevSource> source);
  CollectResult Collect(MetricSet& out) const override;

 private:
  NameFilter devices_;
  NameFilter stats_;
  QueueStatsMode mode_;
  std::unique_ptr<NetdevSource> source_;
};

}  // namespace rdmascope
