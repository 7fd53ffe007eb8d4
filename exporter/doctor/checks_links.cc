// Links and ports: state, MTU, physical errors, IBA error counters, saturated counters,
// retransmissions. Sources: the rdma and ethtool collectors (docs/metrics.md).
#include <map>
#include <optional>

#include "doctor/check_util.h"
#include "doctor/checks.h"

namespace rdmascope::doctor {
namespace {

constexpr const char* kArea = "links";

std::string StateName(double state) {
  switch (static_cast<int>(state)) {
    case 1:
      return "DOWN";
    case 2:
      return "INIT";
    case 3:
      return "ARMED";
    case 4:
      return "ACTIVE";
    case 5:
      return "ACTIVE_DEFER";
  }
  return "state " + Num(state);
}

std::string PhysName(double phys) {
  switch (static_cast<int>(phys)) {
    case 1:
      return "Sleep";
    case 2:
      return "Polling";
    case 3:
      return "Disabled";
    case 4:
      return "PortConfigurationTraining";
    case 5:
      return "LinkUp";
    case 6:
      return "LinkErrorRecovery";
    case 7:
      return "Phy Test";
  }
  return "physical state " + Num(phys);
}

// rdma_port_info of the port: its link layer and netdev.
const Sample* PortInfo(const Snapshot& now, const Sample& port) {
  const auto found =
      now.Find("rdma_port_info", {{"device", port.Label("device")}, {"port", port.Label("port")}});
  return found.empty() ? nullptr : found.front();
}

// perfquery resets the PortCounters with a MAD, which only InfiniBand ports answer.
std::string ResetCommand(const Snapshot& now, const Sample& port) {
  const Sample* info = PortInfo(now, port);
  if (info == nullptr || info->Label("link_layer") != "InfiniBand") return "";
  return FixLine({"perfquery -R -C ", HostValue(port.Label("device")), " -P ", HostValue(port.Label("port"))});
}

// A counter that must not move over the window: one finding per series.
std::vector<Finding> CounterMustNotIncrease(const Snapshot& now, const Snapshot* before,
                                            const std::string& id, const std::string& metric,
                                            const std::string& what, const std::string& runbook,
                                            const std::string& advice, bool roce_netdevs_only) {
  std::vector<Finding> findings;
  for (const Sample* series : now.Find(metric)) {
    Scope scope = series->labels.contains("port") ? PortScope(*series)
                                                  : Scope{{"netdev", series->Label("device")}};
    if (roce_netdevs_only && now.Find("rdma_port_info", {{"link_layer", "Ethernet"},
                                                         {"netdev", series->Label("device")}})
                                 .empty()) {
      continue;  // not the interface of an RDMA port (a management NIC): not RDMA's problem
    }
    if (before == nullptr) {
      findings.push_back(Skip(id, kArea, std::move(scope), runbook, kNeedsWindow));
      continue;
    }
    const auto increase = Increase(*before, metric, *series);
    if (!increase) {
      findings.push_back(Skip(id, kArea, std::move(scope), runbook,
                              metric + " went down or appeared during the window (counter reset)"));
      continue;
    }
    const double window = now.seconds() - before->seconds();
    Finding finding =
        Make(id, kArea, *increase > 0 ? Severity::kWarn : Severity::kOk, std::move(scope), runbook);
    finding.observed = Num(*increase) + " " + what + " in " + Num(window) + " s (" + metric +
                       " now " + Num(series->value) + ")";
    finding.expected = "0 " + what;
    if (*increase > 0) {
      finding.advice = Num(*increase) + " " + what + " in " + Num(window) + " s: " + advice;
    }
    findings.push_back(std::move(finding));
  }
  return findings;
}

struct IbaCounter {
  const char* name;    // infiniband-diags' name, as in its error_thresholds file
  const char* metric;  // where the rdma collector exports it
  const char* file;    // the sysfs counters/ file (rdma_port_stat_total's counter label)
  const char* runbook;
};

// The PortCounters of infiniband-diags' error_thresholds, with the series they map to.
constexpr IbaCounter kIbaCounters[] = {
    {"SymbolErrorCounter", "rdma_port_symbol_errors_total", "symbol_error", "rdmasymbolerrors"},
    {"LinkErrorRecoveryCounter", "rdma_port_link_error_recovery_total", "link_error_recovery",
     "rdmasymbolerrors"},
    {"LinkDownedCounter", "rdma_port_link_downed_total", "link_downed", "rdmalinkflapping"},
    {"PortRcvErrors", "rdma_port_receive_errors_total", "port_rcv_errors", "rdmaportreceiveerrors"},
    {"PortRcvRemotePhysicalErrors", "rdma_port_stat_total", "port_rcv_remote_physical_errors",
     "rdmasymbolerrors"},
    {"PortRcvSwitchRelayErrors", "rdma_port_stat_total", "port_rcv_switch_relay_errors",
     "rdmaportcountersaturated"},
    {"PortXmitDiscards", "rdma_port_transmit_discards_total", "port_xmit_discards",
     "rdmacongestionnotifications"},
    {"PortXmitConstraintErrors", "rdma_port_stat_total", "port_xmit_constraint_errors",
     "rdmaportcountersaturated"},
    {"PortRcvConstraintErrors", "rdma_port_stat_total", "port_rcv_constraint_errors",
     "rdmaportcountersaturated"},
    {"LocalLinkIntegrityErrors", "rdma_port_stat_total", "local_link_integrity_errors",
     "rdmasymbolerrors"},
    {"ExcessiveBufferOverrunErrors", "rdma_port_stat_total", "excessive_buffer_overrun_errors",
     "rdmacongestionnotifications"},
    {"VL15Dropped", "rdma_port_stat_total", "VL15_dropped", "rdmaportcountersaturated"},
    {"PortXmitWait", "rdma_port_transmit_wait_total", "port_xmit_wait",
     "rdmacongestionnotifications"},
};

}  // namespace

std::map<std::string, double> DefaultIbaThresholds() {
  return {{"SymbolErrorCounter", 10},
          {"LinkErrorRecoveryCounter", 10},
          {"LinkDownedCounter", 10},
          {"PortRcvErrors", 10},
          {"PortRcvRemotePhysicalErrors", 100},
          {"PortRcvSwitchRelayErrors", 100},
          {"PortXmitDiscards", 100},
          {"PortXmitConstraintErrors", 100},
          {"PortRcvConstraintErrors", 100},
          {"LocalLinkIntegrityErrors", 10},
          {"ExcessiveBufferOverrunErrors", 10},
          {"VL15Dropped", 100},
          {"PortXmitWait", 1000}};
}

namespace {

// RoCE and iWARP drivers (mlx4, mlx5, bnxt_re, irdma, mana, ocrdma) report DOWN + Disabled
// whenever the netdev is not running or has no carrier, so Disabled means "down on purpose"
// only on InfiniBand; on Ethernet the netdev's IFF_UP says it (collectors/port_netdev.h).
std::optional<Finding> EthernetPortDown(const Sample& port, const std::string& observed,
                                        const std::string& netdev, std::optional<double> admin_up,
                                        std::optional<double> carrier, bool phys_up) {
  const std::string id = "links.port_state";
  const std::string interface = netdev.empty() ? "its interface" : netdev;
  if (admin_up && *admin_up == 0) {
    return Skip(id, kArea, PortScope(port), "rdmaportdown",
                interface +
                    " is administratively down (ip link set down): down by "
                    "configuration, not checked");
  }
  if (!admin_up) return std::nullopt;  // no netdev known: judged from the port alone
  const bool link = carrier ? *carrier == 1 : phys_up;
  Finding finding =
      Make(id, kArea, link ? Severity::kCrit : Severity::kWarn, PortScope(port), "rdmaportdown");
  finding.observed = observed + "; " + interface + " up, " +
                     (carrier ? (*carrier == 1 ? "carrier" : "no carrier") : "carrier unknown");
  finding.expected = "ACTIVE";
  if (link) {
    finding.advice = interface + " is up with a link, yet the RDMA port is " +
                     StateName(port.value) +
                     ": RoCE may be disabled on the function (`devlink dev param show` "
                     "enable_roce), the port may belong to a bond whose state it follows, or the "
                     "driver failed (dmesg); compare with `rdma link show`";
  } else {
    finding.advice = interface +
                     " is up but has no carrier: the cable, transceiver, peer or switch port is "
                     "down (the RDMA driver then reports DOWN + Disabled, as for `ip link set "
                     "down`); check `ip link show " +
                     interface + "`, `ethtool " + interface + "` and the switch port";
  }
  return finding;
}

}  // namespace

std::vector<Finding> CheckPortState(const Snapshot& now, const Snapshot*, const DoctorOptions&) {
  std::vector<Finding> findings;
  for (const Sample* port : now.Find("rdma_port_state")) {
    const std::string id = "links.port_state";
    const Matchers key{{"device", port->Label("device")}, {"port", port->Label("port")}};
    const auto phys = now.Value("rdma_port_physical_state", key);
    const std::string observed =
        StateName(port->value) + (phys ? " (physical " + PhysName(*phys) + ")" : "");
    if (port->value >= 4) {
      Finding finding = Make(id, kArea, Severity::kOk, PortScope(*port), "rdmaportdown");
      finding.observed = observed;
      finding.expected = "ACTIVE";
      findings.push_back(std::move(finding));
      continue;
    }
    const Sample* info = PortInfo(now, *port);
    const std::string netdev = info ? info->Label("netdev") : "";
    const bool ethernet = info && info->Label("link_layer") == "Ethernet";
    // Training, LinkUp or error recovery: a cable and a peer are there, yet the port is unusable.
    const bool cabled = phys && *phys >= 4 && *phys <= 6;
    if (ethernet) {
      if (auto finding =
              EthernetPortDown(*port, observed, netdev, now.Value("rdma_port_netdev_admin_up", key),
                               now.Value("rdma_port_netdev_carrier", key), cabled)) {
        findings.push_back(std::move(*finding));
        continue;
      }
    } else if (phys && *phys == 3) {
      findings.push_back(Skip(id, kArea, PortScope(*port), "rdmaportdown",
                              "port is Disabled: down by configuration, not checked"));
      continue;
    }
    Finding finding = Make(id, kArea, cabled ? Severity::kCrit : Severity::kInfo, PortScope(*port),
                           "rdmaportdown");
    finding.observed = observed;
    finding.expected = "ACTIVE";
    if (ethernet && phys && *phys == 3) {
      finding.advice =
          "the port is Disabled, which RoCE drivers report both for `ip link set down` and for "
          "a lost link (cable, peer), and its interface is not known here to tell which: check "
          "`rdma link show` and `ip link`";
    } else if (cabled && ethernet) {
      finding.advice = "the link is physically up but the RDMA port is " + StateName(port->value) +
                       ": bring its interface " + (netdev.empty() ? "" : netdev + " ") +
                       "up and check `ip link`";
      if (!netdev.empty()) finding.fix = FixLine({"ip link set dev ", HostValue(netdev), " up"});
    } else if (cabled) {
      finding.advice = "the link is physically up but the port is " + StateName(port->value) +
                       ": no subnet manager has configured it; start or fix the SM (opensm, or "
                       "the switch's) and check `sminfo`";
    } else {
      finding.advice =
          "no link partner: the port is uncabled, or the cable, transceiver or peer "
          "port is down; if this port should carry traffic, check the cable and the "
          "switch port";
    }
    findings.push_back(std::move(finding));
  }
  return findings;
}

std::vector<Finding> CheckActiveMtu(const Snapshot& now, const Snapshot*,
                                    const DoctorOptions& options) {
  std::vector<Finding> findings;
  const std::string id = "links.active_mtu";
  for (const Sample* port : now.Find("rdma_port_state")) {
    const Matchers key{{"device", port->Label("device")}, {"port", port->Label("port")}};
    const auto active = now.Value("rdma_port_active_mtu_bytes", key);
    const auto max = now.Value("rdma_port_max_mtu_bytes", key);
    if (!active || !max) {
      findings.push_back(Skip(id, kArea, PortScope(*port), "rdmaactivemtubelowmax",
                              "no rdma_port_active_mtu_bytes/rdma_port_max_mtu_bytes for this "
                              "port: libibverbs could not query it (ibv_query_port)"));
      continue;
    }
    const Sample* info = PortInfo(now, *port);
    const std::string netdev = info ? info->Label("netdev") : "";
    const bool ethernet = info && info->Label("link_layer") == "Ethernet";
    Finding finding = Make(id, kArea, *active < *max ? Severity::kWarn : Severity::kOk,
                           PortScope(*port), "rdmaactivemtubelowmax");
    finding.observed = "active MTU " + Num(*active) + ", port maximum " + Num(*max);
    finding.expected = "active MTU " + Num(*max);
    if (*active < *max && ethernet) {
      const double netdev_mtu =
          netdev.empty() ? 0 : now.Value("rdma_netdev_mtu_bytes", {{"device", netdev}}).value_or(0);
      finding.advice = "RoCE's active MTU follows the netdev MTU" +
                       (netdev_mtu > 0 ? " (" + netdev + " has " + Num(netdev_mtu) + ")" : "") +
                       ": raise " + (netdev.empty() ? "the interface's" : netdev + "'s") +
                       " MTU to at least " + Num(options.min_netdev_mtu) + " for " + Num(*max) +
                       "-byte RDMA payloads, on the switches too";
      if (!netdev.empty()) {
        finding.fix =
            FixLine({"ip link set dev ", HostValue(netdev), " mtu ", Num(options.min_netdev_mtu)});
      }
    } else if (*active < *max) {
      // The active MTU of an IB link is the lower of its two ends' MTUCap, set by the SM when it
      // brings the link up; a partition's mtu= only sets its IPoIB multicast group's MTU.
      finding.advice =
          "on InfiniBand the active MTU is the lower of the two link ends' MTU capability: the "
          "peer port (switch port or other HCA) supports less than " +
          Num(*max) +
          "; read its MTUCap and NeighborMTU (`smpquery portinfo PEER_LID PEER_PORT`, "
          "`ibportstate PEER_LID PEER_PORT query`, `iblinkinfo` for both ends of every link) "
          "and connect to, or reconfigure, a peer that supports it. An SM partition's mtu= "
          "(partitions.conf) does not change it: it only sets the IPoIB multicast group's MTU";
    }
    findings.push_back(std::move(finding));
  }
  return findings;
}

namespace {

// The window checks of counters that must not move: one row each, run over every metric named.
struct MustNotMove {
  const char* id;
  const char* metrics[2];  // the second may be nullptr
  const char* what;
  const char* runbook;
  const char* advice;
  bool roce_netdevs_only;
};

constexpr MustNotMove kCrcErrors{
    "links.crc_errors",
    {"rdma_netdev_crc_errors_total"},
    "CRC/FCS errors",
    "rdmacrcerrors",
    "corrupted frames are dropped and RDMA retransmits them: reseat or replace the cable or "
    "transceiver, and check the switch port's error counters",
    true};
constexpr MustNotMove kSymbolErrors{
    "links.symbol_errors",
    {"rdma_netdev_symbol_errors_total", "rdma_port_symbol_errors_total"},
    "symbol errors",
    "rdmasymbolerrors",
    "a marginal link (symbol errors come before CRC errors and link downs): reseat or replace "
    "the cable or transceiver, and check the switch port",
    false};
constexpr MustNotMove kLinkDowned{
    "links.link_downed",
    {"rdma_port_link_downed_total"},
    "link downs",
    "rdmalinkflapping",
    "the link went down during the window, dropping every connection on the port: reseat or "
    "replace the cable or transceiver; check the switch port's log",
    false};

std::vector<Finding> Run(const MustNotMove& check, const Snapshot& now, const Snapshot* before) {
  std::vector<Finding> findings;
  for (const char* metric : check.metrics) {
    if (metric == nullptr) continue;
    auto found = CounterMustNotIncrease(now, before, check.id, metric, check.what, check.runbook,
                                        check.advice, check.roce_netdevs_only);
    std::move(found.begin(), found.end(), std::back_inserter(findings));
  }
  return findings;
}

}  // namespace

std::vector<Finding> CheckCrcErrors(const Snapshot& now, const Snapshot* before,
                                    const DoctorOptions&) {
  return Run(kCrcErrors, now, before);
}

std::vector<Finding> CheckSymbolErrors(const Snapshot& now, const Snapshot* before,
                                       const DoctorOptions&) {
  return Run(kSymbolErrors, now, before);
}

std::vector<Finding> CheckLinkDowned(const Snapshot& now, const Snapshot* before,
                                     const DoctorOptions&) {
  return Run(kLinkDowned, now, before);
}

std::vector<Finding> CheckIbaErrors(const Snapshot& now, const Snapshot*,
                                    const DoctorOptions& options) {
  std::vector<Finding> findings;
  for (const IbaCounter& counter : kIbaCounters) {
    const auto threshold = options.iba_thresholds.find(counter.name);
    if (threshold == options.iba_thresholds.end()) continue;
    const bool raw = std::string_view(counter.metric) == "rdma_port_stat_total";
    for (const Sample* series :
         now.Find(counter.metric, raw ? Matchers{{"counter", counter.file}} : Matchers{})) {
      Scope scope = PortScope(*series);
      scope.emplace_back("counter", counter.file);
      const bool over = series->value > threshold->second;
      Finding finding = Make("links.iba_errors", kArea, over ? Severity::kWarn : Severity::kOk,
                             std::move(scope), counter.runbook);
      finding.observed = std::string(counter.name) + " " + Num(series->value) +
                         " since the counters were last cleared";
      finding.expected = "at most " + Num(threshold->second) +
                         " (infiniband-diags error_thresholds; --doctor.iba-threshold " +
                         counter.name + "=N)";
      if (over) {
        finding.advice = std::string(counter.name) + " is " + Num(series->value) + ", " +
                         Num(series->value - threshold->second) +
                         " over its threshold: find the cause (cable, transceiver, switch port, "
                         "congestion), then clear the counters to watch for new errors";
        finding.fix = ResetCommand(now, *series);
      }
      findings.push_back(std::move(finding));
    }
  }
  return findings;
}

std::vector<Finding> CheckSaturated(const Snapshot& now, const Snapshot*, const DoctorOptions&) {
  std::vector<Finding> findings;
  for (const Sample* series : now.Find("rdma_port_stat_saturated")) {
    const std::string& counter = series->Label("counter");
    // Data and packet counters at 2^32-1 are a device without extended counters, not errors
    // (as the RdmaPortCounterSaturated rule excludes them).
    if (counter.starts_with("port_xmit_data") || counter.starts_with("port_rcv_data") ||
        counter.starts_with("port_xmit_packets") || counter.starts_with("port_rcv_packets")) {
      continue;
    }
    Scope scope = PortScope(*series);
    scope.emplace_back("counter", counter);
    const bool saturated = series->value == 1;
    Finding finding =
        Make("links.counter_saturated", kArea, saturated ? Severity::kWarn : Severity::kOk,
             std::move(scope), "rdmaportcountersaturated");
    finding.observed = saturated ? counter + " holds its maximum and no longer counts"
                                 : counter + " below its maximum";
    finding.expected = "below its maximum";
    if (saturated) {
      finding.advice = counter +
                       " stopped at its width's maximum after many errors: its rate "
                       "reads 0 whatever happens; fix the link, then clear the port counters so "
                       "they count again";
      finding.fix = ResetCommand(now, *series);
    }
    findings.push_back(std::move(finding));
  }
  return findings;
}

// The counters of the rdma:port_retransmissions:rate5m recording rule.
std::vector<Finding> CheckRetransmissions(const Snapshot& now, const Snapshot* before,
                                          const DoctorOptions& options) {
  static constexpr const char* kCounters[] = {
      "local_ack_timeout_err", "packet_seq_err", "implied_nak_seq_err", "completer_retry_err",
      "rcvd_seq_err",          "to_retransmits", "seq_err_naks_rcvd"};
  return HwCounterRateCheck(
      now, before, kCounters,
      {.id = "links.retransmissions",
       .area = kArea,
       .runbook = "rdmaretransmissions",
       .what = "retransmission events",
       .threshold = options.retransmissions_per_second,
       .advice = "packets are lost or a peer is slow: check CRC errors, PFC/ECN on the RoCE "
                 "priority and the peers' receive starvation"});
}

}  // namespace rdmascope::doctor
