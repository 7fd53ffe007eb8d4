#include "collectors/netdev_source.h"

#include <cerrno>
#include <cstring>
#include <system_error>

#include "core/log.h"
#include "core/sysfs.h"

namespace rdmascope {
namespace {

// Errors that only mean "this driver does not implement that": expected, not worth a log.
bool IsUnsupported(int err) { return err == EOPNOTSUPP || err == EINVAL || err == ENODATA; }

template <typename T>
std::optional<T> Keep(std::expected<T, int> result, const std::string& device, const char* what) {
  if (result) return std::move(*result);
  if (!IsUnsupported(result.error())) {
    log::Debug("netdev query failed",
               {{"device", device}, {"query", what}, {"err", std::strerror(result.error())}});
  }
  return std::nullopt;
}

}  // namespace

std::vector<NetdevSnapshot> SystemNetdevSource::Read(const NameFilter& devices) const {
  const std::filesystem::path class_net = sysfs_ / "class" / "net";
  auto ethtool = open_ethtool_();
  if (!ethtool) {
    throw std::runtime_error(std::string("cannot open a socket for ethtool ioctls: ") +
                             std::strerror(ethtool.error()));
  }
  std::optional<sys::DcbNetlink> dcb;
  if (query_pfc_) {
    if (auto opened = sys::DcbNetlink::Open()) dcb.emplace(std::move(*opened));
  }

  std::lock_guard lock(mutex_);
  const auto now = clock_();
  std::map<std::string, Settings, std::less<>> kept;  // interfaces seen now: the rest is dropped
  std::vector<NetdevSnapshot> out;
  for (const std::string& name : sysfs::ListDirectory(class_net)) {
    if (!devices.Allows(name)) continue;
    const auto dir = class_net / name;
    NetdevSnapshot snap{.name = name};
    snap.mtu = Keep(ethtool->GetMtu(name), name, "mtu");
    if (!snap.mtu) continue;  // not an interface (bonding_masters) or gone already
    // The index tells an interface re-created (or renamed) under this name from the one read
    // before: its settings are then read at once, not served from the other one's reading.
    const auto ifindex = Keep(ethtool->GetIfindex(name), name, "ifindex");
    Settings settings;
    if (const auto it = settings_.find(name);
        ifindex && it != settings_.end() && it->second.ifindex == *ifindex) {
      settings = std::move(it->second);
    }
    if (!settings.read_at || now - *settings.read_at >= refresh_interval_) {
      // The stat names are not settings: GetStats checks them on every read.
      settings =
          Settings{.ifindex = ifindex.value_or(0), .stat_names = std::move(settings.stat_names)};
      // Virtual interfaces (veth, bridge, bond, VLAN) have no parent device: one lstat says so,
      // and spares them the NUMA node, DCB and link error reads that can only fail.
      settings.physical = sysfs::EntryExists(dir / "device");
      if (settings.physical) settings.numa_node = sysfs::ReadSigned(dir / "device" / "numa_node");
      // A reading with a failure other than "not supported" (the device going away, EBUSY
      // while the driver resets) is used once and read again at the next scrape.
      bool complete = ifindex.has_value();
      const auto keep = [&](auto result, const char* what) {
        if (!result && !IsUnsupported(result.error())) complete = false;
        return Keep(std::move(result), name, what);
      };
      settings.driver = keep(ethtool->GetDriverInfo(name), "drvinfo");
      settings.coalesce = keep(ethtool->GetCoalesce(name), "coalesce");
      settings.private_flags = keep(ethtool->GetPrivateFlags(name), "priv-flags");
      if (complete) settings.read_at = now;
    }
    snap.numa_node = settings.numa_node;
    snap.driver = settings.driver;
    snap.coalesce = settings.coalesce;
    snap.private_flags = settings.private_flags;
    snap.stats = Keep(ethtool->GetStats(name, &settings.stat_names), name, "stats");
    // PFC and link errors live on physical ports: no DCB operations and no wire to corrupt
    // frames on the others, which saves a netlink round trip and four sysfs reads each.
    if (dcb && settings.physical) snap.pfc = Keep(dcb->QueryPfc(name), name, "dcb-pfc");
    if (snap.pfc && !snap.pfc->dscp_error.empty()) {
      log::Debug("netdev query failed: DCB APP table unusable, no DSCP trust series",
                 {{"device", name}, {"query", "dcb-app"}, {"err", snap.pfc->dscp_error}});
    }
    if (settings.physical) {
      for (const char* error : {"crc", "frame", "fifo", "missed"}) {
        const auto file = dir / "statistics" / (std::string("rx_") + error + "_errors");
        if (const auto value = sysfs::ReadUnsigned(file)) {
          snap.link_errors.emplace_back(error, *value);
        }
      }
    }
    if (ifindex) kept.insert_or_assign(name, std::move(settings));
    out.push_back(std::move(snap));
  }
  settings_ = std::move(kept);
  return out;
}

}  // namespace rdmascope
