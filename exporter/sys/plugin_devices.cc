#include "sys/plugin_devices.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include "core/sysfs.h"

namespace rdmascope::sys {
namespace {

bool IsHex(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(),
                                      [](unsigned char c) { return std::isxdigit(c) != 0; });
}

std::string Lowercase(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

bool IsPciAddress(std::string_view id) {
  // domain:bus:device.function
  const size_t first = id.find(':');
  if (first == std::string_view::npos) return false;
  const size_t second = id.find(':', first + 1);
  const size_t dot = id.rfind('.');
  if (second == std::string_view::npos || dot == std::string_view::npos || dot < second) {
    return false;
  }
  const std::string_view domain = id.substr(0, first);
  const std::string_view bus = id.substr(first + 1, second - first - 1);
  const std::string_view device = id.substr(second + 1, dot - second - 1);
  const std::string_view function = id.substr(dot + 1);
  return domain.size() >= 4 && domain.size() <= 8 && IsHex(domain) && bus.size() == 2 &&
         IsHex(bus) && device.size() == 2 && IsHex(device) && function.size() == 1 &&
         function[0] >= '0' && function[0] <= '7';
}

bool IsAuxiliaryDeviceName(std::string_view id) {
  // The auxiliary bus names its devices "<module>.<name>.<id>" (drivers/base/auxiliary.c
  // auxiliary_device_add: dev_set_name "%s.%s.%d"); modules may have '_' and '-'.
  if (id.empty() || id.size() > 255 || id.front() == '.' || id.back() == '.') return false;
  size_t dots = 0;
  char previous = 0;
  for (const char c : id) {
    if (c == '.') {
      if (previous == '.') return false;
      ++dots;
    } else if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '_' && c != '-') {
      return false;
    }
    previous = c;
  }
  const std::string_view number = id.substr(id.rfind('.') + 1);
  return dots >= 2 && std::all_of(number.begin(), number.end(),
                                  [](unsigned char c) { return std::isdigit(c) != 0; });
}

PluginDeviceMapping MapPluginDevice(const std::filesystem::path& sysfs, std::string_view id) {
  PluginDeviceMapping mapping;
  std::filesystem::path function;
  if (IsPciAddress(id)) {
    function = sysfs / "bus/pci/devices" / Lowercase(id);
  } else if (IsAuxiliaryDeviceName(id)) {
    function = sysfs / "bus/auxiliary/devices" / std::string(id);
  } else {
    return mapping;  // kNotAFunction
  }
  // A symlink to the device's directory; a loop or a dangling link is absent (ELOOP, ENOENT).
  const auto listed = sysfs::ListDirectoryChecked(function);
  if (!listed || listed->empty()) {
    mapping.result = PluginDeviceMapping::Result::kAbsent;
    return mapping;
  }
  const std::vector<std::string> rdma_devices = sysfs::ListDirectory(function / "infiniband");
  const std::vector<std::string> netdevs = sysfs::ListDirectory(function / "net");
  for (const std::string& rdma_device : rdma_devices) {
    PluginDevice device{.rdma_device = rdma_device};
    if (netdevs.size() == 1) {
      device.netdev = netdevs.front();
    } else if (!netdevs.empty()) {
      const std::optional<std::string> on_gid =
          sysfs::ReadAttribute(function / "infiniband" / rdma_device / "ports/1/gid_attrs/ndevs/0");
      if (on_gid && std::binary_search(netdevs.begin(), netdevs.end(), *on_gid)) {
        device.netdev = *on_gid;
      }
    }
    mapping.devices.push_back(std::move(device));
  }
  if (rdma_devices.empty()) {
    for (const std::string& netdev : netdevs) mapping.devices.push_back({.netdev = netdev});
  }
  mapping.result = mapping.devices.empty() ? PluginDeviceMapping::Result::kNoRdmaOrNetdev
                                           : PluginDeviceMapping::Result::kMapped;
  return mapping;
}

}  // namespace rdmascope::sys
