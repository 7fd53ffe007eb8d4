// What ethtool stat names mean, across drivers. Pure functions, unit-tested on the
// names the kernel drivers print (mlx5, ice, i40e, bnxt_en, virtio/veth, ena).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace rdmascope::ethtool_names {

// --- Per-queue stats --------------------------------------------------------------
// A stat that belongs to one queue/channel/ring: its name with the index removed, and the
// index. Recognised shapes:
//   rx_queue_3_packets (veth, virtio, ice, ixgbe)  -> rx_queue_packets, 3
//   rx3_packets, tx7_bytes, ch2_events (mlx5)      -> rx_packets, 3 ...
//   [3]: rx_ucast_packets (bnxt_en)                -> rx_ucast_packets, 3
//   tx-0.packets, tx-0.tx_packets (i40e)           -> tx_packets, 0
//   queue_0_tx_cnt (ena)                           -> queue_tx_cnt, 0
struct QueueStat {
  std::string stat;
  std::string queue;
};
std::optional<QueueStat> SplitQueueStat(std::string_view name);

// --- Vendor-neutral RoCE health counters -------------------------------------------
// kDiscards: packets the port dropped (the NIC's own buffers, the wire side).
// kRingDiscards: packets the NIC had to drop because the host had no receive buffer posted on
// the ring (software too slow to refill): a host problem, not a port one.
enum class Kind {
  kCrcErrors,
  kSymbolErrors,
  kDiscards,
  kRingDiscards,
  kPauseFrames,
  kPauseStormEvents
};

struct Normalised {
  Kind kind;
  std::string_view direction;  // "rx"/"tx", or empty
  std::string priority;        // "0".."7" or "global" for pause frames, else empty
  std::string_view level;      // "warning"/"error" for pause storms, else empty
  int preference;              // lower wins when a driver exposes several names for one series
  // A global pause counter that may count PFC frames too (mlx5 rx_pause_ctrl_phy): not used
  // when the device has per-priority pause counters (PFC on).
  bool may_count_pfc = false;
};
std::optional<Normalised> Normalise(std::string_view name);

}  // namespace rdmascope::ethtool_names
