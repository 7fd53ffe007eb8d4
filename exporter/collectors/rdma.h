// The rdma collector: RDMA devices and ports from /sys/class/infiniband (identity, NUMA node,
// state, rate, link layer, port counters with their saturation, every hw_counter as a counter
// or a gauge, the GID table), the active/max MTU from libibverbs and each port's netdev from
// RDMA netlink.
#pragma once

#include <atomic>
#include <expected>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>
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

using PortNetdevs = std::map<std::pair<std::string, uint32_t>, std::string>;

// Test seam: (device, port) -> netdev, for ports whose netdev is in this network namespace.
class PortNetdevSource {
 public:
  virtual ~PortNetdevSource() = default;
  // errno on failure (EPROTONOSUPPORT: no RDMA netlink in this kernel).
  virtual std::expected<PortNetdevs, int> Read() const = 0;
};

// nldev RDMA_NLDEV_CMD_PORT_GET (what `rdma link show` prints).
class NetlinkPortNetdevSource : public PortNetdevSource {
 public:
  std::expected<PortNetdevs, int> Read() const override;
};

void MapRdmaDevices(const std::vector<RdmaDevice>& devices, MetricSet& out);

class RdmaCollector : public Collector {
 public:
  // Port netdevs from RDMA netlink.
  RdmaCollector(const RdmaOptions& options, std::filesystem::path sysfs,
                std::unique_ptr<PortMtuQuerier> mtu);
  // netdevs may be null: every port's netdev label is then empty.
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
