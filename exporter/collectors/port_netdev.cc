#include "collectors/port_netdev.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/sysfs.h"
#include "sys/rdma_netlink.h"

namespace rdmascope {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kIffUp = 0x1;  // include/uapi/linux/if.h

// What dev_change_name accepts (net/core/dev.c dev_valid_name): never a path of its own.
bool PlainInterfaceName(const std::string& name) {
  return !name.empty() && name.size() < 16 && name != "." && name != ".." &&
         name.find('/') == std::string::npos;
}

}  // namespace

std::expected<PortNetdevs, int> NetlinkPortNetdevSource::Read() const {
  auto netlink = sys::RdmaNetlink::Open();
  if (!netlink) return std::unexpected(netlink.error());
  const auto ports = netlink->DumpPorts();
  if (!ports) return std::unexpected(ports.error());
  PortNetdevs out;
  for (const sys::RdmaPortNetdev& port : *ports) {
    if (!port.netdev.empty()) out[{port.device, port.port}] = port.netdev;
  }
  return out;
}

std::expected<PortNetdevs, int> SysfsPortNetdevSource::Read() const {
  PortNetdevs out;
  const fs::path class_dir = sysfs_ / "class" / "infiniband";
  for (const std::string& device : sysfs::ListDirectory(class_dir)) {
    const std::vector<std::string> own =
        sysfs::ListDirectory(class_dir / device / "device" / "net");
    if (own.empty()) continue;
    for (const std::string& port : sysfs::ListDirectory(class_dir / device / "ports")) {
      const auto number = sysfs::ParseUnsigned(port);
      if (!number || *number == 0 || *number > UINT32_MAX) continue;
      const auto netdev =
          sysfs::ReadAttribute(class_dir / device / "ports" / port / "gid_attrs" / "ndevs" / "0");
      if (!netdev || !PlainInterfaceName(*netdev)) continue;
      if (std::ranges::find(own, *netdev) == own.end()) continue;
      out[{device, static_cast<uint32_t>(*number)}] = *netdev;
    }
  }
  return out;
}

NetdevLinkState ReadNetdevLinkState(const fs::path& sysfs, const std::string& netdev) {
  NetdevLinkState state;
  if (!PlainInterfaceName(netdev)) return state;
  const fs::path dir = sysfs / "class" / "net" / netdev;
  if (const auto flags = sysfs::ReadUnsigned(dir / "flags")) {
    state.admin_up = (*flags & kIffUp) != 0;
  }
  if (const auto carrier = sysfs::ReadUnsigned(dir / "carrier"); carrier && *carrier <= 1) {
    state.carrier = *carrier == 1;
  }
  return state;
}

}  // namespace rdmascope
