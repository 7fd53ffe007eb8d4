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
#include <string>
#include <vector>

#include "collectors/port_netdev.h"

namespace rdmascope {

struct LinkPort {
  std::string device;  // RDMA device; empty for an interface without one
  std::string port;    // its port number
  std::string netdev;  // the interface whose module is read; empty: none to read
  // An InfiniBand port: its module is the HCA firmware's (mlxlink, MAD), never ethtool's.
  bool native_ib = false;
  // Beyond --collector.link.max-netdevs: listed (source unavailable), not read.
  bool over_limit = false;
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
