#include "collectors/link_ports.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "collectors/rdma_sysfs.h"
#include "core/log.h"
#include "core/sysfs.h"

namespace rdmascope {

std::optional<IbLinkRate> ParseIbLinkRate(std::string_view text) {
  const auto bytes = ParseRateBytesPerSecond(text);
  if (!bytes || *bytes <= 0) return std::nullopt;
  const auto open = text.find('(');
  const auto x = text.find('X', open);
  if (open == std::string_view::npos || x == std::string_view::npos) return std::nullopt;
  const auto width = sysfs::ParseUnsigned(text.substr(open + 1, x - open - 1));
  // ib_width_enum_to_int: 1, 2, 4, 8 or 12 lanes.
  if (!width || *width == 0 || *width > 12) return std::nullopt;
  return IbLinkRate{.width_lanes = static_cast<uint32_t>(*width),
                    .lane_bits_per_second = *bytes * 8 / static_cast<double>(*width)};
}

namespace {

// The port's PMA counters answer: counters/symbol_error (IBA PortCounters, through the MAD
// layer or the driver's process_mad; drivers/infiniband/core/sysfs.c) exists and parses.
bool IbCountersReadable(const std::filesystem::path& port_dir) {
  const auto text = sysfs::ReadAttribute(port_dir / "counters" / "symbol_error");
  return text && sysfs::ParseUnsigned(*text).has_value();
}

// As the rdma collector (collectors/rdma_sysfs.h PortIsUp): ACTIVE (4) or ACTIVE_DEFER (5),
// and physical state LinkUp (5) when the port tells it.
bool PortDirIsUp(const std::filesystem::path& port_dir) {
  const auto state = sysfs::ReadAttribute(port_dir / "state");
  const auto parsed = state ? ParseNumberedState(*state) : std::nullopt;
  if (!parsed || (parsed->first != 4 && parsed->first != 5)) return false;
  const auto phys = sysfs::ReadAttribute(port_dir / "phys_state");
  const auto phys_parsed = phys ? ParseNumberedState(*phys) : std::nullopt;
  return !phys_parsed || phys_parsed->first == 5;
}

}  // namespace

SystemLinkPorts::SystemLinkPorts(std::filesystem::path sysfs,
                                 std::unique_ptr<PortNetdevSource> netdevs, size_t max_netdevs)
    : sysfs_(std::move(sysfs)), netdevs_(std::move(netdevs)), max_netdevs_(max_netdevs) {}

std::vector<LinkPort> SystemLinkPorts::Read() const {
  namespace fs = std::filesystem;
  // As the rdma collector: RDMA netlink names the interface in this namespace; without it,
  // sysfs alone (never an interface of another namespace).
  std::expected<PortNetdevs, int> mapping = netdevs_ ? netdevs_->Read() : PortNetdevs{};
  if (!mapping) {
    if (!netlink_failure_logged_.exchange(true)) {
      log::Warn("link: RDMA netlink port dump failed: port netdevs from sysfs only",
                {{"err", std::strerror(mapping.error())}});
    }
    mapping = SysfsPortNetdevSource(sysfs_).Read();
  }
  std::vector<LinkPort> ports;
  std::set<std::string> netdevs;  // the interfaces admitted for reading
  // True when `netdev` is (now) one of those read: the first max_netdevs_ met.
  const auto admit = [&](const std::string& netdev) {
    if (netdevs.contains(netdev)) return true;
    if (netdevs.size() >= max_netdevs_) return false;
    netdevs.insert(netdev);
    return true;
  };
  bool over = false;
  const fs::path infiniband = sysfs_ / "class" / "infiniband";
  std::vector<std::string> devices = sysfs::ListDirectory(infiniband);
  std::ranges::sort(devices);
  for (const std::string& device : devices) {
    std::vector<std::string> numbers = sysfs::ListDirectory(infiniband / device / "ports");
    // Numeric order: port 10 after port 9.
    std::ranges::sort(numbers, [](const std::string& a, const std::string& b) {
      return a.size() != b.size() ? a.size() < b.size() : a < b;
    });
    for (const std::string& number : numbers) {
      const auto parsed = sysfs::ParseUnsigned(number);
      if (!parsed || *parsed == 0 || *parsed > UINT32_MAX) continue;
      LinkPort port{.device = device, .port = number};
      const auto layer =
          sysfs::ReadAttribute(infiniband / device / "ports" / number / "link_layer");
      port.native_ib = layer && *layer == "InfiniBand";
      const fs::path port_dir = infiniband / device / "ports" / number;
      port.ib_counters = IbCountersReadable(port_dir);
      if (port.native_ib && PortDirIsUp(port_dir)) {
        if (const auto rate = sysfs::ReadAttribute(port_dir / "rate")) {
          port.ib_rate = ParseIbLinkRate(*rate);
        }
      }
      if (const auto it = mapping->find({device, static_cast<uint32_t>(*parsed)});
          it != mapping->end() && !port.native_ib) {
        port.netdev = it->second;
        port.over_limit = !admit(port.netdev);
        over |= port.over_limit;
      }
      ports.push_back(std::move(port));
    }
  }
  // The other physical interfaces: a parent device (virtual ones, veth, bridges, bonds, have
  // none and no module either).
  const fs::path net = sysfs_ / "class" / "net";
  std::vector<std::string> names = sysfs::ListDirectory(net);
  std::ranges::sort(names);
  for (const std::string& name : names) {
    if (netdevs.contains(name) || !sysfs::EntryExists(net / name / "device")) continue;
    if (std::ranges::any_of(ports, [&](const LinkPort& p) { return p.netdev == name; })) continue;
    if (!admit(name)) {
      over = true;
      continue;
    }
    ports.push_back(LinkPort{.netdev = name});
  }
  if (over && !limit_logged_.exchange(true)) {
    log::Warn("link: more interfaces than --collector.link.max-netdevs: the rest are not read",
              {{"max_netdevs", std::to_string(max_netdevs_)}});
  }
  return ports;
}

}  // namespace rdmascope
