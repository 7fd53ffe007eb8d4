// The rdma collector: RDMA devices and ports from /sys/class/infiniband (identity, NUMA node,
// state, rate, link layer, netdev, port counters, every hw_counter, the GID table) and the
// active/max MTU from libibverbs.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "collectors/rdma_sysfs.h"
#include "collectors/verbs_ports.h"
#include "core/collector.h"
#include "core/name_filter.h"

namespace rdmascope {

struct RdmaOptions {
  std::string device_include;
  std::string device_exclude;
};

void MapRdmaDevices(const std::vector<RdmaDevice>& devices, MetricSet& out);

class RdmaCollector : public Collector {
 public:
  RdmaCollector(const RdmaOptions& options, std::filesystem::path sysfs,
                std::unique_ptr<PortMtuQuerier> mtu);
  CollectResult Collect(MetricSet& out) const override;

 private:
  NameFilter devices_;
  std::filesystem::path sysfs_;
  std::unique_ptr<PortMtuQuerier> mtu_;
};

}  // namespace rdmascope
