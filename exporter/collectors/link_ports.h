// The ports whose optics the link collector reads: every RDMA port, with the interface it maps
// to (the rdma collector's port -> netdev mapping, collectors/port_netdev.h), then the physical
// interfaces (those with a parent device: class/net/NAME/device) no RDMA port maps to, whose
// modules are the host's other links. Labels as the rdma collector names them: `device` and
// `port` the RDMA port (empty for an interface without one), `netdev` its interface (empty on
// a native InfiniBand port and for an interface in another network namespace).
#pragma once

#include <atomic>
#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "collectors/port_netdev.h"

namespace rdmascope {

// An InfiniBand port's active width and per-lane speed, from its sysfs `rate` as the kernel
// prints it (drivers/infiniband/core/sysfs.c rate_show: "%d%s Gb/sec (%dX%s)", the lanes times
// the speed's rate per lane: SDR 2.5, DDR 5, QDR and FDR10 10, FDR 14, EDR 25, HDR 50, NDR
// 100, XDR 200 Gb/s; widths 1, 2, 4, 8, 12). Issue 40 item 5: the link as trained, compared
// with what the port reached before (rules) and with its sibling ports (doctor).
struct IbLinkRate {
  uint32_t width_lanes = 0;         // "4X" -> 4
  double lane_bits_per_second = 0;  // "400 Gb/sec (4X NDR)" -> 1e11
  auto operator<=>(const IbLinkRate&) const = default;
};

// "400 Gb/sec (4X NDR)" -> {4, 1e11}; nullopt for anything else (no width, a width of 0 or
// above 12, a rate that does not parse or is 0).
std::optional<IbLinkRate> ParseIbLinkRate(std::string_view text);

struct LinkPort {
  std::string device;  // RDMA device; empty for an interface without one
  std::string port;    // its port number
  std::string netdev;  // the interface whose module is read; empty: none to read
  // An InfiniBand port: its module is the HCA firmware's (mlxlink, MAD), never ethtool's.
  bool native_ib = false;
  // Beyond --collector.link.max-netdevs: listed (source unavailable), not read.
  bool over_limit = false;
  // An RDMA port's PMA counters (source="ib_counters"): whether counters/symbol_error exists
  // and parses (rxe and siw have no counters/). Unset for an interface without an RDMA port.
  std::optional<bool> ib_counters;
  // A native InfiniBand port that is up (ACTIVE or ACTIVE_DEFER, and LinkUp when known): its
  // width and lane speed. A down port prints a preset rate, so none then.
  std::optional<IbLinkRate> ib_rate;
  auto operator<=>(const LinkPort&) const = default;
};

class LinkPortSource {
 public:
  virtual ~LinkPortSource() = default;
  virtual std::vector<LinkPort> Read() const = 0;
};

// The host's ports through --path.sysfs (and RDMA netlink, as the rdma collector reads it):
// RDMA ports in (device, port) order, then the other physical interfaces by name. At most
// `max_netdevs` distinct interfaces are read (RDMA ports' first); the ports of those beyond
// the bound are listed with over_limit set, the other interfaces dropped (logged once).
class SystemLinkPorts : public LinkPortSource {
 public:
  SystemLinkPorts(std::filesystem::path sysfs, std::unique_ptr<PortNetdevSource> netdevs,
                  size_t max_netdevs);
  std::vector<LinkPort> Read() const override;

 private:
  std::filesystem::path sysfs_;
  std::unique_ptr<PortNetdevSource> netdevs_;
  size_t max_netdevs_;
  mutable std::atomic<bool> netlink_failure_logged_{false};
  mutable std::atomic<bool> limit_logged_{false};
};

}  // namespace rdmascope
