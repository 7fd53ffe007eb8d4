// Which network interface carries an RDMA port, and that interface's administrative state and
// carrier. On RoCE and iWARP the port's own state cannot tell a pulled cable from an operator's
// `ip link set down`: mlx4, mlx5, bnxt_re, irdma, mana and ocrdma report DOWN + Disabled
// (phys_state 3) whenever the netdev is not running *or* has no carrier (e.g. bnxt_re
// `bnxt_re_query_port`, mlx5 `mlx5_query_port_roce`: `netif_running && netif_carrier_ok`).
// The netdev's IFF_UP says which of the two it is (docs/metrics.md, RdmaPortDown).
#pragma once

#include <cstdint>
#include <expected>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>

namespace rdmascope {

using PortNetdevs = std::map<std::pair<std::string, uint32_t>, std::string>;

// Test seam: (device, port) -> netdev, for ports whose netdev is in this network namespace.
class PortNetdevSource {
 public:
  virtual ~PortNetdevSource() = default;
  // errno on failure (EPROTONOSUPPORT: no RDMA netlink in this kernel).
  virtual std::expected<PortNetdevs, int> Read() const = 0;
};

// nldev RDMA_NLDEV_CMD_PORT_GET (what `rdma link show` prints): the exporter's own network
// namespace, which is the one its /sys shows.
class NetlinkPortNetdevSource : public PortNetdevSource {
 public:
  std::expected<PortNetdevs, int> Read() const override;
};

// From sysfs alone, as a container with the host's /sys mounted (--path.sysfs) sees it: a
// port's netdev is the interface of its default GID (ports/N/gid_attrs/ndevs/0, set from the
// port's own netdev by roce_gid_mgmt.c) when that interface is also one of the device's
// (DEVICE/device/net/NAME): the GID table names interfaces of every network namespace (a pod's
// eth0 beside the host's), while device/net lists only those of the namespace the sysfs mount
// belongs to. Devices without a parent netdev directory (rxe, siw, a bond under mlx5 LAG) get
// none. Never fails: a device it cannot read has no entry.
class SysfsPortNetdevSource : public PortNetdevSource {
 public:
  explicit SysfsPortNetdevSource(std::filesystem::path sysfs) : sysfs_(std::move(sysfs)) {}
  std::expected<PortNetdevs, int> Read() const override;

 private:
  std::filesystem::path sysfs_;
};

struct NetdevLinkState {
  std::optional<bool> admin_up;  // IFF_UP in class/net/NAME/flags
  // class/net/NAME/carrier; the kernel refuses the read (EINVAL) while the interface is
  // administratively down (net/core/net-sysfs.c carrier_show: netif_running), so none then.
  std::optional<bool> carrier;
};

// Reads <sysfs>/class/net/<netdev>/{flags,carrier}. A name that is not a plain interface name
// (empty, ".", "..", a '/') reads nothing.
NetdevLinkState ReadNetdevLinkState(const std::filesystem::path& sysfs, const std::string& netdev);

}  // namespace rdmascope
