// Reads RDMA devices and ports from <sysfs>/class/infiniband into a snapshot, defensively:
// every attribute is optional, unknown counter names are kept, malformed values dropped.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/name_filter.h"

namespace rdmascope {

struct RdmaGid {
  uint32_t index = 0;
  std::string gid;
  // "RoCE v2" or "IB/RoCE v1"; InfiniBand GIDs are "IB/RoCE v1" too (core/sysfs.c
  // print_gid_type, core/cache.c gid_type_str: IB_GID_TYPE_IB == IB_GID_TYPE_ROCE). Empty only
  // when the file cannot be read.
  std::string type;
  // gid_attrs/ndevs: the interface in whatever network namespace it lives (a pod's eth0 too);
  // empty on InfiniBand (print_ndev answers EINVAL).
  std::string netdev;
};

struct PortMtu {
  uint32_t active_bytes = 0;
  uint32_t max_bytes = 0;
};

struct RdmaPort {
  uint32_t number = 0;
  std::optional<uint32_t> state;       // 4 = ACTIVE
  std::string state_name;              // "ACTIVE"
  std::optional<uint32_t> phys_state;  // 5 = LinkUp
  std::string phys_state_name;         // "LinkUp"
  std::optional<double> rate_bytes_per_second;
  // What the link carries after line coding (DataRateBytesPerSecond).
  std::optional<double> data_rate_bytes_per_second;
  std::string link_layer;  // "InfiniBand", "Ethernet"
  // The port's netdev from RDMA netlink (nldev NDEV_NAME), only when it is in this network
  // namespace; filled by the collector, empty on InfiniBand or when netlink cannot tell.
  std::string netdev;
  std::optional<bool> netdev_admin_up;  // that netdev's IFF_UP, filled by the collector
  std::optional<bool> netdev_carrier;   // its carrier (none while admin down)
  // counters/, sorted by name; where an old stack's counters_ext/ has the 64-bit twin of a
  // file, its value under the counters/ name (see MergeLegacyExtendedCounters).
  std::vector<std::pair<std::string, uint64_t>> counters;
  std::vector<std::string> counters_64bit;  // counters/ names whose value came from counters_ext
  std::vector<std::pair<std::string, uint64_t>> hw_counters;  // hw_counters/, without lifespan
  std::vector<RdmaGid> gids;                                  // non-zero entries only
  std::optional<PortMtu> mtu;  // from libibverbs, filled by the collector
};

struct RdmaDevice {
  std::string name;
  std::string node_type;  // "CA", "RNIC"...
  std::string fw_ver;     // the sysfs file; served as label firmware_version
  std::string board_id;
  std::string hca_type;
  std::string node_guid;
  std::optional<int64_t> numa_node;
  std::string driver;  // basename of device/driver ("mlx5_ib.rdma", "bnxt_re.rdma", "bnxt_en")
  // Device-level hw_counters/ (core/sysfs.c ib_setup_device_attrs: drivers whose statistics
  // are per device, e.g. mlx5 in switchdev mode), without lifespan.
  std::vector<std::pair<std::string, uint64_t>> hw_counters;
  std::vector<RdmaPort> ports;
};

// True when a hw_counters file of this driver holds a current value (a live object count, a
// high-water mark) rather than a monotonic count. Per-driver knowledge, from the drivers'
// string tables; unknown names are counters.
bool IsHwCounterGauge(std::string_view driver, std::string_view counter);

// Width in bits of a standard counters/ file (IBA PortCounters, as core/sysfs.c declares them
// with PORT_PMA_ATTR): these saturate at 2^width - 1 instead of wrapping. The data and packet
// counters are 32-bit unless the device has the extended-width capability (then 64-bit and
// never saturating in practice): 32 is returned and a value of 2^32 - 1 reads as saturated.
// nullopt for counters without a known width (the 64-bit extended-only ones).
std::optional<unsigned> PortCounterWidth(std::string_view file);

// Kernels before 4.5 (IB/core "Display extended counter set if available") and old vendor
// stacks (MLNX_OFED) keep the 64-bit PortCountersExtended in ports/N/counters_ext/
// (port_xmit_data_64, port_unicast_rcv_packets...) beside the saturating 32-bit counters/.
// Replaces each counters/ value with its 64-bit twin unless the twin is behind it (stale: the
// 32-bit value is kept then), adds the extended-only ones under their 4.5+ counters/ names,
// and lists those taken from counters_ext in counters_64bit (never flagged saturated).
void MergeLegacyExtendedCounters(RdmaPort& port,
                                 const std::vector<std::pair<std::string, uint64_t>>& ext);

// A port's rate and link are meaningful only when it is up: logical state ACTIVE (4) or
// ACTIVE_DEFER (5) and physical state LinkUp (5) when known. A down mlx5 RoCE port reports
// its preset "40 Gb/sec (4X QDR)" (mlx5 main.c mlx5_query_port_roce).
bool PortIsUp(const RdmaPort& port);

// "4: ACTIVE" -> {4, "ACTIVE"}
std::optional<std::pair<uint32_t, std::string>> ParseNumberedState(std::string_view text);
// "100 Gb/sec (4X EDR)", "2.5 Gb/sec (1X SDR)" -> bytes per second; "0 GB/sec" (printed by
// some out-of-tree drivers for an empty cage) -> 0. Any other "GB/sec" is ambiguous: nullopt.
std::optional<double> ParseRateBytesPerSecond(std::string_view text);

// The data rate of a port whose sysfs `rate` is `text`: what the link carries after line coding,
// for bandwidth-delay products and PCIe comparisons. The kernel prints InfiniBand's signalling
// rate (core/sysfs.c rate_show: lanes x the speed's nominal rate): SDR, DDR and QDR use 8b/10b
// (QDR's "40 Gb/sec" carries 32), FDR 64b/66b at 14.0625 Gb/s a lane ("56 Gb/sec" carries
// 54.5); FDR10 and EDR onwards print their data rate already. RoCE and iWARP drivers print the
// Ethernet speed, a data rate, in IB terms (mlx5 prints 40GbE as "4X QDR"): taken as is.
std::optional<double> DataRateBytesPerSecond(std::string_view text, std::string_view link_layer);

std::vector<RdmaDevice> ReadRdmaDevices(const std::filesystem::path& sysfs,
                                        const NameFilter& devices);

}  // namespace rdmascope
