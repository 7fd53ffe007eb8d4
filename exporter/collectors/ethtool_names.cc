#include "collectors/ethtool_names.h"

#include <array>
#include <cctype>

namespace rdmascope::ethtool_names {
namespace {

bool IsDigits(std::string_view s) {
  if (s.empty() || s.size() > 5) return false;
  for (const char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// Splits "<prefix><digits><suffix>"; returns the digits.
std::optional<std::string_view> Between(std::string_view name, std::string_view prefix,
                                        std::string_view suffix) {
  if (name.size() <= prefix.size() + suffix.size()) return std::nullopt;
  if (!name.starts_with(prefix) || !name.ends_with(suffix)) return std::nullopt;
  const std::string_view middle =
      name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (!IsDigits(middle)) return std::nullopt;
  return middle;
}

// Leading "<word><digits>_" as used by mlx5 channels: rx3_, tx12_, ch0_, xdpsq1_...
std::optional<QueueStat> SplitMlx5(std::string_view name) {
  static constexpr std::array<std::string_view, 6> kPrefixes{"rx",    "tx",    "ch",
                                                             "xdpsq", "xsksq", "ptp"};
  for (const std::string_view prefix : kPrefixes) {
    if (!name.starts_with(prefix)) continue;
    size_t i = prefix.size();
    size_t digits = 0;
    while (i + digits < name.size() && std::isdigit(static_cast<unsigned char>(name[i + digits]))) {
      ++digits;
    }
    if (digits == 0 || digits > 5 || i + digits >= name.size() || name[i + digits] != '_') {
      continue;
    }
    const std::string_view rest = name.substr(i + digits + 1);
    if (rest.empty()) continue;
    return QueueStat{std::string(prefix) + "_" + std::string(rest),
                     std::string(name.substr(i, digits))};
  }
  return std::nullopt;
}

struct ExactName {
  std::string_view name;
  Kind kind;
  std::string_view direction;
  std::string_view priority;
  std::string_view level;
  int preference;
  bool may_count_pfc = false;  // see Normalised::may_count_pfc
};

// Documented driver names, from the drivers' string tables:
//   mlx5: drivers/net/ethernet/mellanox/mlx5/core/en_stats.c (PPORT/PHY counter descriptors)
//   ice:  drivers/net/ethernet/intel/ice/ice_ethtool.c (ice_gstrings_pf_stats)
//   i40e: drivers/net/ethernet/intel/i40e/i40e_ethtool.c (i40e_gstrings_stats)
//   bnxt_en: drivers/net/ethernet/broadcom/bnxt/bnxt_ethtool.c (bnxt_port_stats_arr,
//            bnxt_ring_err_stats_arr; bnxt_sw_func_stats before v6.4)
constexpr std::array<ExactName, 30> kExact{{
    {"rx_crc_errors_phy", Kind::kCrcErrors, "", "", "", 0},     // mlx5
    {"rx_crc_errors.nic", Kind::kCrcErrors, "", "", "", 0},     // ice
    {"port.rx_crc_errors", Kind::kCrcErrors, "", "", "", 0},    // i40e
    {"rx_fcs_err_frames", Kind::kCrcErrors, "", "", "", 0},     // bnxt_en
    {"rx_crc_errors", Kind::kCrcErrors, "", "", "", 1},         // igb, ixgbe, ...
    {"rx_symbol_err_phy", Kind::kSymbolErrors, "", "", "", 0},  // mlx5
    {"rx_discards_phy", Kind::kDiscards, "rx", "", "", 0},      // mlx5
    {"tx_discards_phy", Kind::kDiscards, "tx", "", "", 0},      // mlx5
    {"rx_dropped.nic", Kind::kDiscards, "rx", "", "", 0},       // ice
    {"port.rx_dropped", Kind::kDiscards, "rx", "", "", 0},      // i40e
    // bnxt_en port statistics (hwrm port qstats): frames the port itself discarded.
    {"rx_stat_discard", Kind::kDiscards, "rx", "", "", 0},
    {"tx_stat_discard", Kind::kDiscards, "tx", "", "", 0},
    // Receive queue found no host buffer. mlx5: "number of times receive queue had no software
    // buffers allocated for the adapter's incoming traffic" (mlx5 counters.rst, q counter).
    {"rx_out_of_buffer", Kind::kRingDiscards, "rx", "", "", 0},
    // bnxt_en: the sum over rings of the ring's rx/tx_discard_pkts (bnxt_get_ring_err_stats),
    // named rx_total_ring_discards since v6.4 and rx_total_discard_pkts before.
    {"rx_total_ring_discards", Kind::kRingDiscards, "rx", "", "", 0},
    {"tx_total_ring_discards", Kind::kRingDiscards, "tx", "", "", 0},
    {"rx_total_discard_pkts", Kind::kRingDiscards, "rx", "", "", 1},
    {"tx_total_discard_pkts", Kind::kRingDiscards, "tx", "", "", 1},
    // mlx5 global pause: rx/tx_global_pause are the per-priority register's priority-0
    // counters, which mlx5e lists only while global pause is on (en_stats.c, per_prio pause
    // group; "global flow control counters are stored in priority 0 PFC counters", e989d5a5):
    // no PFC frame can be in them. rx/tx_pause_ctrl_phy (the 802.3 group's
    // aPAUSEMACCtrlFramesReceived) should count PAUSE opcodes only, but the same PPCNT field
    // counted PFC frames on Spectrum (sonic-buildimage#5540) and nothing says ConnectX differs:
    // the fallback for older drivers, never used beside per-priority pause counters.
    {"rx_global_pause", Kind::kPauseFrames, "rx", "global", "", 0},
    {"tx_global_pause", Kind::kPauseFrames, "tx", "global", "", 0},
    {"rx_pause_ctrl_phy", Kind::kPauseFrames, "rx", "global", "", 1, true},
    {"tx_pause_ctrl_phy", Kind::kPauseFrames, "tx", "global", "", 1, true},
    {"link_xoff_rx.nic", Kind::kPauseFrames, "rx", "global", "", 0},  // ice
    {"link_xoff_tx.nic", Kind::kPauseFrames, "tx", "global", "", 0},
    {"port.link_xoff_rx", Kind::kPauseFrames, "rx", "global", "", 0},  // i40e
    {"port.link_xoff_tx", Kind::kPauseFrames, "tx", "global", "", 0},
    {"rx_pause_frames", Kind::kPauseFrames, "rx", "global", "", 0},  // bnxt_en
    {"tx_pause_frames", Kind::kPauseFrames, "tx", "global", "", 0},
    {"tx_pause_storm_warning_events", Kind::kPauseStormEvents, "", "", "warning", 0},  // mlx5
    {"tx_pause_storm_error_events", Kind::kPauseStormEvents, "", "", "error", 0},
}};

struct PriorityPattern {
  std::string_view prefix;
  std::string_view suffix;
  std::string_view direction;
};

constexpr std::array<PriorityPattern, 8> kPriorityPause{{
    {"rx_prio", "_pause", "rx"},  // mlx5
    {"tx_prio", "_pause", "tx"},
    // ice_get_strings: "rx_priority_%u_xoff.nic", "tx_priority_%u_xoff.nic".
    {"rx_priority_", "_xoff.nic", "rx"},
    {"tx_priority_", "_xoff.nic", "tx"},
    // i40e_gstrings_pfc_stats: "port.rx_priority_%u_xoff_rx", "port.tx_priority_%u_xoff_tx"
    // (the xon and xon_2_xoff entries are not pause-on frames).
    {"port.rx_priority_", "_xoff_rx", "rx"},
    {"port.tx_priority_", "_xoff_tx", "tx"},
    {"rx_pfc_ena_frames_pri", "", "rx"},  // bnxt_en
    {"tx_pfc_ena_frames_pri", "", "tx"},
}};

}  // namespace

std::optional<QueueStat> SplitQueueStat(std::string_view name) {
  // rx_queue_3_packets / tx_queue_0_bytes
  for (const std::string_view dir : {std::string_view("rx"), std::string_view("tx")}) {
    const std::string prefix = std::string(dir) + "_queue_";
    if (!name.starts_with(prefix)) continue;
    const std::string_view rest = name.substr(prefix.size());
    const auto underscore = rest.find('_');
    if (underscore == std::string_view::npos || underscore + 1 >= rest.size()) continue;
    const std::string_view index = rest.substr(0, underscore);
    if (!IsDigits(index)) continue;
    return QueueStat{prefix + std::string(rest.substr(underscore + 1)), std::string(index)};
  }
  // [3]: rx_ucast_packets
  if (name.starts_with('[')) {
    const auto close = name.find("]: ");
    if (close != std::string_view::npos && IsDigits(name.substr(1, close - 1)) &&
        close + 3 < name.size()) {
      return QueueStat{std::string(name.substr(close + 3)), std::string(name.substr(1, close - 1))};
    }
  }
  // i40e: "%s-%u.packets" (i40e_gstrings_queue_stats, "tx-0.packets"); older kernels printed
  // "tx-0.tx_packets". The direction stays in the name: rx-0.packets and tx-0.packets are
  // different stats.
  if (name.starts_with("rx-") || name.starts_with("tx-")) {
    const auto dot = name.find('.');
    if (dot != std::string_view::npos && IsDigits(name.substr(3, dot - 3)) &&
        dot + 1 < name.size()) {
      const std::string direction(name.substr(0, 2));
      std::string stat(name.substr(dot + 1));
      if (!stat.starts_with(direction + "_")) stat = direction + "_" + stat;
      return QueueStat{std::move(stat), std::string(name.substr(3, dot - 3))};
    }
  }
  // queue_0_tx_cnt
  if (name.starts_with("queue_")) {
    const std::string_view rest = name.substr(6);
    const auto underscore = rest.find('_');
    if (underscore != std::string_view::npos && IsDigits(rest.substr(0, underscore)) &&
        underscore + 1 < rest.size()) {
      return QueueStat{"queue_" + std::string(rest.substr(underscore + 1)),
                       std::string(rest.substr(0, underscore))};
    }
  }
  return SplitMlx5(name);
}

std::optional<Normalised> Normalise(std::string_view name) {
  for (const ExactName& entry : kExact) {
    if (name == entry.name) {
      return Normalised{entry.kind,  entry.direction,  std::string(entry.priority),
                        entry.level, entry.preference, entry.may_count_pfc};
    }
  }
  for (const PriorityPattern& pattern : kPriorityPause) {
    if (const auto digits = Between(name, pattern.prefix, pattern.suffix)) {
      if (digits->size() == 1 && (*digits)[0] <= '7') {
        return Normalised{Kind::kPauseFrames, pattern.direction, std::string(*digits), "", 0};
      }
    }
  }
  return std::nullopt;
}

}  // namespace rdmascope::ethtool_names
