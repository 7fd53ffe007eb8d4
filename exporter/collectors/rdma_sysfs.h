// Reads RDMA devices and ports from <sysfs>/class/infiniband into a snapshot, defensively:
// every attribute is optional, unknown counter names are kept, malformed values dropped.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/name_filter.h"

namespace rdmascope {

struct RdmaGid {
  uint32_t index = 0;
  std::string gid;
  std::string type;    // "RoCE v2", "IB/RoCE v1", or empty (InfiniBand ports have no type)
  std::string netdev;  // empty on InfiniBand
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
  std::string link_layer;  // "InfiniBand", "Ethernet"
  std::string netdev;      // the netdev behind GID 0 (RoCE), empty on IB
  std::vector<std::pair<std::string, uint64_t>> counters;     // counters/, sorted by name
  std::vector<std::pair<std::string, uint64_t>> hw_counters;  // hw_counters/, without lifespan
  std::vector<RdmaGid> gids;                                  // non-zero entries only
  std::optional<PortMtu> mtu;  // from libibverbs, filled by the collector
};

struct RdmaDevice {
  std::string name;
  std::string node_type;  // "CA", "RNIC"...
  std::string fw_ver;
  std::string board_id;
  std::string hca_type;
  std::string node_guid;
  std::optional<int64_t> numa_node;
  std::vector<RdmaPort> ports;
};

// "4: ACTIVE" -> {4, "ACTIVE"}
std::optional<std::pair<uint32_t, std::string>> ParseNumberedState(std::string_view text);
// "100 Gb/sec (4X EDR)", "2.5 Gb/sec (1X SDR)" -> bytes per second
std::optional<double> ParseRateBytesPerSecond(std::string_view text);

std::vector<RdmaDevice> ReadRdmaDevices(const std::filesystem::path& sysfs,
                                        const NameFilter& devices);

}  // namespace rdmascope
