#include "collectors/ethtool.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "collectors/ethtool_names.h"

namespace rdmascope {
namespace {

using prometheus::MetricType;
namespace names = ethtool_names;

constexpr MetricDesc kStat{"rdma_ethtool_stat",
                           "A NIC statistic as `ethtool -S` prints it (raw driver name in `stat`).",
                           MetricType::Untyped};
constexpr MetricDesc kQueueStat{"rdma_ethtool_queue_stat",
                                "A per-queue NIC statistic, with the queue index moved from the "
                                "driver's name into the `queue` label.",
                                MetricType::Untyped};
constexpr MetricDesc kQueueStatSum{"rdma_ethtool_queue_stat_sum",
                                   "A per-queue NIC statistic summed over all queues.",
                                   MetricType::Untyped};
constexpr MetricDesc kCrc{"rdma_netdev_crc_errors_total",
                          "Frames received with a bad CRC/FCS (vendor counters normalised).",
                          MetricType::Counter};
constexpr MetricDesc kSymbol{"rdma_netdev_symbol_errors_total",
                             "Physical-layer symbol errors (vendor counters normalised).",
                             MetricType::Counter};
constexpr MetricDesc kDiscards{"rdma_netdev_discards_total",
                               "Packets discarded by the NIC port (vendor counters normalised).",
                               MetricType::Counter};
constexpr MetricDesc kRingDiscards{"rdma_netdev_ring_discards_total",
                                   "Packets dropped because the host had no buffer posted on the "
                                   "queue's ring (software too slow to refill), not by the port "
                                   "(vendor counters normalised).",
                                   MetricType::Counter};
constexpr MetricDesc kPause{"rdma_netdev_pause_frames_total",
                            "Pause frames by direction and priority (\"global\" for link-level "
                            "802.3x pause; 0-7 for PFC).",
                            MetricType::Counter};
constexpr MetricDesc kPauseStorm{"rdma_netdev_pause_storm_events_total",
                                 "Pause-storm detections by the NIC (device stalled sending "
                                 "pause frames), by level.",
                                 MetricType::Counter};
constexpr MetricDesc kLinkErrors{"rdma_netdev_receive_errors_total",
                                 "Receive errors by kind from the kernel's standard link "
                                 "statistics (/sys/class/net/<device>/statistics/rx_<error>_errors,"
                                 " every driver): crc, frame, fifo, missed.",
                                 MetricType::Counter};
constexpr MetricDesc kInfo{"rdma_netdev_info", "Network interface identity from ETHTOOL_GDRVINFO.",
                           MetricType::Gauge};
constexpr MetricDesc kMtu{"rdma_netdev_mtu_bytes", "Interface MTU in bytes.", MetricType::Gauge};
constexpr MetricDesc kCoalesceUsecs{"rdma_netdev_coalesce_usecs",
                                    "Interrupt coalescing delay (rx-usecs/tx-usecs) in "
                                    "microseconds, as ethtool -c shows it.",
                                    MetricType::Gauge};
constexpr MetricDesc kCoalesceAdaptive{"rdma_netdev_coalesce_adaptive",
                                       "1 if adaptive interrupt coalescing is on.",
                                       MetricType::Gauge};
constexpr MetricDesc kPrivateFlag{"rdma_netdev_private_flag",
                                  "1 if the driver's private flag is on (ethtool "
                                  "--show-priv-flags; mlx5 rx_cqe_compress...).",
                                  MetricType::Gauge};
constexpr MetricDesc kNuma{"rdma_netdev_numa_node",
                           "NUMA node of the interface's device (-1: the platform reports none).",
                           MetricType::Gauge};
constexpr MetricDesc kPfcEnabled{"rdma_netdev_pfc_enabled",
                                 "1 if priority flow control is enabled on the priority (DCB "
                                 "IEEE PFC configuration).",
                                 MetricType::Gauge};
constexpr MetricDesc kDscpTrust{"rdma_netdev_dscp_trust",
                                "1 if the DCB APP table maps DSCP values to priorities (the NIC "
                                "classifies by DSCP: mlnx_qos --trust dscp), 0 if it has no DSCP "
                                "entry (PCP trust).",
                                MetricType::Gauge};
constexpr MetricDesc kDscpPriority{"rdma_netdev_dscp_priority_info",
                                   "1 for each DSCP-to-priority entry of the DCB APP table "
                                   "(dcb app show dev DEVICE dscp-prio).",
                                   MetricType::Gauge};

const MetricDesc& DescFor(names::Kind kind) {
  switch (kind) {
    case names::Kind::kCrcErrors:
      return kCrc;
    case names::Kind::kSymbolErrors:
      return kSymbol;
    case names::Kind::kDiscards:
      return kDiscards;
    case names::Kind::kRingDiscards:
      return kRingDiscards;
    case names::Kind::kPauseFrames:
      return kPause;
    case names::Kind::kPauseStormEvents:
      return kPauseStorm;
  }
  return kCrc;
}

void MapNormalised(const NetdevSnapshot& dev, MetricSet& out) {
  // One series per (kind, direction, priority, level): the most specific driver name wins.
  struct Chosen {
    int preference;
    uint64_t value;
  };
  std::map<std::tuple<names::Kind, std::string_view, std::string, std::string_view>, Chosen> best;
  // PFC in use: the driver lists per-priority pause counters (mlx5 only for priorities with
  // PFC on), and a global counter that may count PFC frames would report them as global pause.
  bool pfc_counters = false;
  if (dev.stats) {
    for (const auto& [stat, value] : *dev.stats) {
      const auto n = names::Normalise(stat);
      pfc_counters |= n && n->kind == names::Kind::kPauseFrames && n->priority != "global";
    }
  }
  if (dev.stats) {
    for (const auto& [stat, value] : *dev.stats) {
      const auto n = names::Normalise(stat);
      if (!n || (n->may_count_pfc && pfc_counters)) continue;
      auto key = std::make_tuple(n->kind, n->direction, n->priority, n->level);
      const auto it = best.find(key);
      if (it == best.end() || n->preference < it->second.preference) {
        best[std::move(key)] = {n->preference, value};
      }
    }
  }
  // A NIC outside the driver table still has the kernel's rx_crc_errors: the CRC alert works
  // on any NIC. A driver name wins when there is one (mlx5's rx_crc_errors_phy counts at the
  // PHY, before the MAC's own accounting).
  const auto crc = std::ranges::find(dev.link_errors, std::string("crc"),
                                     &std::pair<std::string, uint64_t>::first);
  if (crc != dev.link_errors.end()) {
    best.try_emplace(std::make_tuple(names::Kind::kCrcErrors, std::string_view(), std::string(),
                                     std::string_view()),
                     Chosen{1000, crc->second});
  }
  for (const auto& [key, chosen] : best) {
    const auto& [kind, direction, priority, level] = key;
    std::vector<Label> labels{{"device", dev.name}};
    if (!direction.empty()) labels.emplace_back("direction", direction);
    if (!priority.empty()) labels.emplace_back("priority", priority);
    if (!level.empty()) labels.emplace_back("level", level);
    out.Add(DescFor(kind), labels, static_cast<double>(chosen.value));
  }
}

void MapStats(const NetdevSnapshot& dev, const NameFilter& filter, QueueStatsMode mode,
              MetricSet& out) {
  std::map<std::string, uint64_t> sums;  // ordered: deterministic output
  for (const auto& [stat, value] : *dev.stats) {
    if (!filter.Allows(stat)) continue;
    if (mode != QueueStatsMode::kRaw) {
      if (auto queue = names::SplitQueueStat(stat)) {
        if (mode == QueueStatsMode::kLabel) {
          out.Add(kQueueStat,
                  {{"device", dev.name}, {"queue", queue->queue}, {"stat", queue->stat}},
                  static_cast<double>(value));
        } else {
          sums[queue->stat] += value;
        }
        continue;
      }
    }
    out.Add(kStat, {{"device", dev.name}, {"stat", stat}}, static_cast<double>(value));
  }
  for (const auto& [stat, sum] : sums) {
    out.Add(kQueueStatSum, {{"device", dev.name}, {"stat", stat}}, static_cast<double>(sum));
  }
}

void MapConfig(const NetdevSnapshot& dev, MetricSet& out) {
  if (dev.driver) {
    out.Add(kInfo,
            {{"device", dev.name},
             {"driver", dev.driver->driver},
             {"driver_version", dev.driver->version},
             {"firmware_version", dev.driver->firmware_version},
             {"bus_info", dev.driver->bus_info}},
            1);
  }
  if (dev.mtu) out.Add(kMtu, {{"device", dev.name}}, static_cast<double>(*dev.mtu));
  if (dev.numa_node) out.Add(kNuma, {{"device", dev.name}}, static_cast<double>(*dev.numa_node));
  if (dev.coalesce) {
    out.Add(kCoalesceUsecs, {{"device", dev.name}, {"direction", "rx"}}, dev.coalesce->rx_usecs);
    out.Add(kCoalesceUsecs, {{"device", dev.name}, {"direction", "tx"}}, dev.coalesce->tx_usecs);
    out.Add(kCoalesceAdaptive, {{"device", dev.name}, {"direction", "rx"}},
            dev.coalesce->adaptive_rx ? 1 : 0);
    out.Add(kCoalesceAdaptive, {{"device", dev.name}, {"direction", "tx"}},
            dev.coalesce->adaptive_tx ? 1 : 0);
  }
  if (dev.private_flags) {
    for (const auto& [flag, on] : *dev.private_flags) {
      out.Add(kPrivateFlag, {{"device", dev.name}, {"flag", flag}}, on ? 1 : 0);
    }
  }
  if (dev.pfc) {
    static constexpr std::string_view kPriorities[] = {"0", "1", "2", "3", "4", "5", "6", "7"};
    for (unsigned prio = 0; prio < 8; ++prio) {
      out.Add(kPfcEnabled, {{"device", dev.name}, {"priority", kPriorities[prio]}},
              (dev.pfc->enabled_mask >> prio) & 1U);
    }
    // Absent when the reply's APP table was missing or malformed: no trust state is made up.
    if (const auto& dscp = dev.pfc->dscp) {
      out.Add(kDscpTrust, {{"device", dev.name}}, dscp->entries > 0 ? 1 : 0);
      for (int value = 0; value < sys::DscpMap::kDscps; ++value) {
        for (unsigned prio = 0; prio < 8; ++prio) {
          if (((dscp->priorities[value] >> prio) & 1U) == 0) continue;
          out.Add(kDscpPriority,
                  {{"device", dev.name},
                   {"dscp", std::to_string(value)},
                   {"priority", kPriorities[prio]}},
                  1);
        }
      }
    }
  }
}

}  // namespace

void MapNetdevs(const std::vector<NetdevSnapshot>& netdevs, const NameFilter& stats,
                QueueStatsMode mode, MetricSet& out) {
  for (const NetdevSnapshot& dev : netdevs) {
    MapConfig(dev, out);
    MapNormalised(dev, out);
    if (dev.stats) MapStats(dev, stats, mode, out);
    for (const auto& [error, value] : dev.link_errors) {
      out.Add(kLinkErrors, {{"device", dev.name}, {"error", error}}, static_cast<double>(value));
    }
  }
}

EthtoolCollector::EthtoolCollector(const EthtoolOptions& options,
                                   std::unique_ptr<NetdevSource> source)
    : devices_(options.device_include, options.device_exclude),
      stats_(options.stat_include, options.stat_exclude),
      mode_(options.queue_stats),
      source_(std::move(source)) {}

CollectResult EthtoolCollector::Collect(MetricSet& out) const {
  const std::vector<NetdevSnapshot> netdevs = source_->Read(devices_);
  MapNetdevs(netdevs, stats_, mode_, out);
  if (netdevs.empty()) return {.no_data = true, .detail = "no network interface matched"};
  size_t with_stats = 0;
  for (const auto& dev : netdevs) with_stats += dev.stats ? 1 : 0;
  return {.detail = std::to_string(netdevs.size()) + " interfaces, " + std::to_string(with_stats) +
                    " with ethtool stats"};
}

}  // namespace rdmascope
