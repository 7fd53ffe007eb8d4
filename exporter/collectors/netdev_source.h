// Reads everything the ethtool collector needs about the host's network interfaces into a
// plain snapshot: the seam between the kernel (sysfs, SIOCETHTOOL, DCB netlink) and the
// mapping to metrics, so that the mapping is unit-tested without root or hardware.
#pragma once

#include <chrono>
#include <expected>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
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

// The real host: <sysfs>/class/net for names and NUMA node; ioctls and netlink in the
// exporter's network namespace for the rest.
//
// Stats, MTU, PFC and link errors are read at every scrape. What changes only by hand (driver
// and firmware version, coalescing, private flags, whether the interface has a parent device,
// its NUMA node) is read once per refresh interval and served from that reading in between,
// per interface name and ifindex: an interface that is new, or deleted and re-created (or
// renamed) under a name, is read at once.
class SystemNetdevSource : public NetdevSource {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  using OpenEthtool = std::function<std::expected<sys::Ethtool, int>()>;
  // `refresh_interval`: --collector.ethtool.refresh-interval, how old the settings that change
  // only by hand may be. `clock` and `open_ethtool` are injectable so that tests can play the
  // kernel and step over the refresh interval without sleeping.
  SystemNetdevSource(std::filesystem::path sysfs, bool query_pfc,
                     std::chrono::nanoseconds refresh_interval = std::chrono::seconds(60),
                     Clock clock = std::chrono::steady_clock::now,
                     OpenEthtool open_ethtool = sys::Ethtool::Open)
      : sysfs_(std::move(sysfs)),
        query_pfc_(query_pfc),
        refresh_interval_(refresh_interval),
        clock_(std::move(clock)),
        open_ethtool_(std::move(open_ethtool)) {}
  std::vector<NetdevSnapshot> Read(const NameFilter& devices) const override;

 private:
  // The settings of one interface as last read.
  struct Settings {
    int ifindex = 0;
    // The names of the last stats read (GetStats' `last_names`), kept across refreshes.
    std::string stat_names;
    std::optional<std::chrono::steady_clock::time_point> read_at;  // nullopt: read again
    bool physical = false;
    std::optional<int64_t> numa_node;
    std::optional<sys::DriverInfo> driver;
    std::optional<sys::CoalesceSettings> coalesce;
    std::optional<sys::PrivateFlags> private_flags;
  };

  std::filesystem::path sysfs_;
  bool query_pfc_;
  const std::chrono::nanoseconds refresh_interval_;
  Clock clock_;
  OpenEthtool open_ethtool_;
  mutable std::mutex mutex_;  // settings_
  mutable std::map<std::string, Settings, std::less<>> settings_;
};

}  // namespace rdmascope
