// The contract between the framework and a collector.
//
// A collector reads one source (ethtool, sysfs, netlink, BPF maps...) and fills a MetricSet.
// It must be safe to call from several scrapes at once. It reports "no data" (nothing to
// collect on this host: not an error) through the result, and real failures by throwing;
// the framework (CollectorRunner) isolates both so that one collector never breaks a scrape.
#pragma once

#include <string>

#include "core/metric_set.h"

namespace rdmascope {

struct CollectResult {
  // True when the source does not exist on this host (no RDMA device, no netdev matched).
  bool no_data = false;
  // Shown on the landing page and logged: what is absent, or a count of what was seen.
  std::string detail;
};

class Collector {
 public:
  virtual ~Collector() = default;
  virtual CollectResult Collect(MetricSet& out) const = 0;
};

}  // namespace rdmascope
