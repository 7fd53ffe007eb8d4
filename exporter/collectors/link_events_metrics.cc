// rdma_link_* series of link-down events (docs/metrics.md, "Links: why a link went down").
// Three flap counts kept apart, each from its own source: the down edges this exporter saw
// (by the driver's reason), the PHY's own down count, the kernel's carrier changes. The IB
// PortCounters' link_downed and link_error_recovery are the rdma collector's
// (rdma_port_link_downed_total, rdma_port_link_error_recovery_total) and mlx5's
// link_down_events_phy is rdma_ethtool_stat's: not repeated here. Lost notifications (the
// watcher's re-dumps) are on /debug/links, not a series: a replay has no watcher, and its
// exposition must equal the live one's.
#include <string>
#include <vector>

#include "collectors/link.h"

namespace rdmascope {
namespace {

using prometheus::MetricType;

constexpr MetricDesc kAvailable{"rdma_link_source_available", kLinkSourceAvailableHelp,
                                MetricType::Gauge};
constexpr MetricDesc kDownEvents{
    "rdma_link_down_events_total",
    "Carrier-down edges seen by the exporter, by the driver's extended link state then "
    "(reason: ETHTOOL_LINK_EXT_STATE_* named; none: the driver gave none; admin_down: the "
    "interface was set down; unknown: a number this exporter does not know) and substate.",
    MetricType::Counter};
constexpr MetricDesc kLastDown{
    "rdma_link_last_down_info",
    "The reason and substate of the port's last carrier-down edge (value 1): what the "
    "link-flap alerts name.",
    MetricType::Gauge};
constexpr MetricDesc kPhyDown{
    "rdma_link_phy_down_events_total",
    "Link down events as the PHY counts them (ETHTOOL_A_LINKSTATE_EXT_DOWN_CNT, Linux 6.2; "
    "mlx5: PPCNT link_down_events), flaps too short for the carrier to show included.",
    MetricType::Counter};
constexpr MetricDesc kCarrierChanges{
    "rdma_link_carrier_changes_total",
    "The kernel's carrier changes of the interface, up and down (IFLA_CARRIER_CHANGES, "
    "class/net/X/carrier_changes): software's view, since the interface was created.",
    MetricType::Counter};

}  // namespace

void MapLinkEvents(const LinkSnapshot& snapshot, MetricSet& out) {
  for (const LinkPort& port : snapshot.ports) {
    if (port.netdev.empty() || port.native_ib || port.over_limit) continue;
    const auto it = snapshot.events.find(port.netdev);
    if (it == snapshot.events.end()) continue;
    const PortEvents& events = it->second;
    const std::vector<Label> key{
        {"device", port.device}, {"port", port.port}, {"netdev", port.netdev}};
    if (events.ext_state_available) {
      std::vector<Label> labels = key;
      labels.emplace_back("source", "link_ext_state");
      out.Add(kAvailable, labels, *events.ext_state_available ? 1 : 0);
    }
    for (const auto& [reason, count] : events.down_by_reason) {
      std::vector<Label> labels = key;
      labels.emplace_back("reason", reason.first);
      labels.emplace_back("substate", reason.second);
      out.Add(kDownEvents, labels, static_cast<double>(count));
    }
    for (auto last = events.recent.rbegin(); last != events.recent.rend(); ++last) {
      if (!last->down) continue;
      std::vector<Label> labels = key;
      labels.emplace_back("reason", last->reason);
      labels.emplace_back("substate", last->substate);
      out.Add(kLastDown, labels, 1);
      break;
    }
    if (events.phy_down_count) out.Add(kPhyDown, key, *events.phy_down_count);
    if (events.carrier_changes) {
      out.Add(kCarrierChanges, key, static_cast<double>(*events.carrier_changes));
    }
  }
}

}  // namespace rdmascope
