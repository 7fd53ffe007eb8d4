// The rdma collector: RDMA devices and ports from /sys/class/infiniband (identity, NUMA node,
// state, rate, link layer, port counters with their saturation, every hw_counter as a counter
// or a gauge, the GID table), the active/max MTU from libibverbs, each port's netdev (RDMA
// netlink, or sysfs alone under --path.sysfs) and that netdev's admin state and carrier.
#pragma once

#include <atomic>
#include <expected>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "collectors/port_netdev.h"
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
  // Port netdevs from RDMA netlink when `sysfs` is /sys (the exporter's own namespace), from
  // sysfs alone otherwise (--path.sysfs=/host/sys: netlink answers for the exporter's network
  // namespace, which need not be the one that tree shows).
  RdmaCollector(const RdmaOptions& options, std::filesystem::path sysfs,
                std::unique_ptr<PortMtuQuerier> mtu);
  // netdevs may be null: every port's netdev label is then empty. When it fails (no RDMA
  // netlink), the netdevs come from sysfs (SysfsPortNetdevSource).
  RdmaCollector(const RdmaOptions& options, std::filesystem::path sysfs,
                std::unique_ptr<PortMtuQuerier> mtu, std::unique_ptr<PortNetdevSource> netdevs);
  CollectResult Collect(MetricSet& out) const override;

 private:
  void FillNetdevs(std::vector<RdmaDevice>& devices) const;
  NameFilter devices_;
  std::filesystem::path sysfs_;
  std::unique_ptr<PortMtuQuerier> mtu_;
  std::unique_ptr<PortNetdevSource> netdevs_;
  mutable std::atomic<bool> netdev_failure_logged_{false};
};

}  // namespace rdmascope
