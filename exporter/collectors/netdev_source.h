// Reads everything the ethtool collector needs about the host's network interfaces into a
// plain snapshot: the seam between the kernel (sysfs, SIOCETHTOOL, DCB netlink) and the
// mapping to metrics, so that the mapping is unit-tested without root or hardware.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/name_filter.h"
#include "sys/dcb_netlink.h"
#include "sys/ethtool_ioctl.h"

namespace rdmascope {

struct NetdevSnapshot {
  std::string name;
  std::optional<sys::DriverInfo> driver;
  std::optional<sys::EthtoolStats> stats;
  std::optional<sys::CoalesceSettings> coalesce;
  std::optional<sys::PrivateFlags> private_flags;
  std::optional<sys::PfcConfig> pfc;
  std::optional<int64_t> mtu;
  std::optional<int64_t> numa_node;
  // The kernel's standard link statistics, <sysfs>/class/net/<name>/statistics/rx_<error>_errors
  // (struct rtnl_link_stats64, filled by every driver's ndo_get_stats64): error "crc", "frame",
  // "fifo", "missed" -> value. Only the files that could be read.
  std::vector<std::pair<std::string, uint64_t>> link_errors;
};

class NetdevSource {
 public:
  virtual ~NetdevSource() = default;
  // Interfaces whose name the filter allows. A device that vanishes half-way is returned
  // with what was read before, or not at all; never an error.
  virtual std::vector<NetdevSnapshot> Read(const NameFilter& devices) const = 0;
};

// The real host: <sysfs>/class/net for names, MTU and NUMA node; ioctls and netlink in the
// exporter's network namespace for the rest.
class SystemNetdevSource : public NetdevSource {
 public:
  SystemNetdevSource(std::filesystem::path sysfs, bool query_pfc)
      : sysfs_(std::move(sysfs)), query_pfc_(query_pfc) {}
  std::vector<NetdevSnapshot> Read(const NameFilter& devices) const override;

 private:
  std::filesystem::path sysfs_;
  bool query_pfc_;
};

}  // namespace rdmascope
