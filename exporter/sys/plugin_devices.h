// What a Kubernetes device plugin's device id names on this host: the RDMA devices and netdevs
// of the PCI function or auxiliary device it is, under the injected sysfs root.
//
// - The SR-IOV network device plugin (k8snetworkplumbingwg/sriov-network-device-plugin, also
//   deployed by the NVIDIA network operator) reports a VF or PF by its PCI address
//   ("0000:3b:02.1"; pkg/netdevice) and a sub-function by its auxiliary device name
//   ("mlx5_core.sf.4"; pkg/auxnetdevice). Its RDMA devices are the entries of
//   SYSFS/bus/pci/devices/ADDR/infiniband/ (SYSFS/bus/auxiliary/devices/NAME/infiniband/ for a
//   sub-function), as the plugin itself finds them (rdmamap GetRdmaDevicesForPcidev,
//   GetRdmaDevicesForAuxdev); its netdevs those of .../net/.
// - The shared RDMA device plugin (Mellanox/k8s-rdma-shared-dev-plugin) reports slots "0" to
//   rdmaHcaMax-1 (pkg/resources/server.go): each grants every device its selectors matched,
//   which the kubelet does not say. Such ids name nothing here (kNotAFunction).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace rdmascope::sys {

// One RDMA device or netdev a device id names. `rdma_device` is empty for a function without
// one (a VF whose driver has no RDMA support): then `netdev` is set. `netdev` is the RDMA
// device's netdev among the function's: its only one, else the one its port 1 GID 0 is on
// (RoCE); empty when it has none or that does not tell (e.g. a switchdev PF with representors).
struct PluginDevice {
  std::string rdma_device;
  std::string netdev;
  bool operator==(const PluginDevice&) const = default;
};

struct PluginDeviceMapping {
  enum class Result {
    kMapped,         // `devices` non-empty
    kNotAFunction,   // neither a PCI address nor an auxiliary device name (a slot, a GPU UUID)
    kAbsent,         // no such function under this sysfs (or it cannot be read)
    kNoRdmaOrNetdev  // the function is here with neither (a GPU, an NVMe drive, a vfio-bound VF)
  };
  Result result = Result::kNotAFunction;
  std::vector<PluginDevice> devices;  // sorted by RDMA device, then netdev
};

// True for "DDDD:BB:DD.F" (hex, a domain of 4 to 8 digits).
bool IsPciAddress(std::string_view id);
// True for an auxiliary bus device name: "module.type.N" ("mlx5_core.sf.4").
bool IsAuxiliaryDeviceName(std::string_view id);

PluginDeviceMapping MapPluginDevice(const std::filesystem::path& sysfs, std::string_view id);

}  // namespace rdmascope::sys
