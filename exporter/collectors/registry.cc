#include "collectors/registry.h"

#include <array>

#include "collectors/ethtool.h"
#include "collectors/mr.h"
#include "collectors/rdma.h"

namespace rdmascope {
namespace {

std::unique_ptr<Collector> MakeEthtool(const ServeConfig& config) {
  return std::make_unique<EthtoolCollector>(
      config.ethtool, std::make_unique<SystemNetdevSource>(config.sysfs, config.ethtool.pfc));
}

std::unique_ptr<Collector> MakeRdma(const ServeConfig& config) {
  return std::make_unique<RdmaCollector>(config.rdma, config.sysfs,
                                         std::make_unique<VerbsPortMtuQuerier>());
}

std::unique_ptr<Collector> MakeMr(const ServeConfig& config) {
  return std::make_unique<MrCollector>(config.mr, config.procfs);
}

constexpr std::array<CollectorEntry, 3> kCollectors{{
    {"ethtool", "NIC statistics, RoCE health counters and NIC configuration (SIOCETHTOOL, DCB)",
     true, &MakeEthtool},
    {"rdma", "RDMA devices and ports from /sys/class/infiniband, MTU from libibverbs", true,
     &MakeRdma},
    {"mr", "RDMA memory registrations per process (eBPF uprobes on libibverbs)", true, &MakeMr},
}};

}  // namespace

std::span<const CollectorEntry> AllCollectors() { return kCollectors; }

}  // namespace rdmascope
