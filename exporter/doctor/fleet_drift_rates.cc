// Fleet drift's error and congestion rates: a port far above the median of its peers' ports
// (RdmaFleetErrorRateOutlier), per packet where every peer counts its packets.
#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include "doctor/check_util.h"
#include "doctor/fleet_drift_parts.h"

namespace rdmascope::doctor::fleet_drift {
namespace {

struct ErrorCheck {
  const char* id;
  const char* what;  // "symbol errors"
  double floor;      // per second: below it never an outlier (RdmaFleetErrorRateOutlier)
  const char* remedy;
};

// The rule's errors, floors and remedies.
constexpr ErrorCheck kErrorChecks[] = {
    {"fleet.crc_errors", "CRC errors", 1,
     "this link is bad: the cable, transceiver or switch port (RdmaCrcErrors)"},
    {"fleet.symbol_errors", "symbol errors", 1,
     "this link is bad: the cable, transceiver or switch port (RdmaSymbolErrors)"},
    {"fleet.out_of_sequence", "out-of-sequence packets", 10,
     "its packets are lost on the way: PFC on the RoCE priority, drops on the switch "
     "(RdmaRetransmissions)"},
    {"fleet.congestion_notifications", "ECN marks and CNPs", 100,
     "its traffic is congested far more than its peers': a hot switch port, a slow receiver, PFC "
     "or ECN set unlike its peers' (fleet.pfc, fleet.ecn; RdmaCongestionNotifications)"},
    {"fleet.pause_frames", "pause frames", 100,
     "its traffic is paused far more than its peers': a hot switch port, a slow receiver, PFC set "
     "unlike its peers' (fleet.pfc; RdmaHeavyPauseOnRocePriority)"},
};

constexpr const char* kErrorRunbook = "rdmafleeterrorrateoutlier";

struct ErrorEntry {
  std::string instance;
  Scope scope;
  double rate = 0;                // per second
  std::optional<double> packets;  // per second through the same link, where counted
};

// The summed rate of `name`'s series matching `matchers` (and, with `counters`, only those
// counters); nullopt when none could be measured (absent before, reset in the window).
std::optional<double> SumRate(const Host& host, std::string_view name, const Matchers& matchers,
                              std::span<const char* const> counters = {}) {
  std::optional<double> sum;
  for (const Sample* series : host.now->Find(name, matchers)) {
    if (!counters.empty() &&
        std::ranges::find(counters, series->Label("counter"),
                          [](const char* c) { return std::string_view(c); }) == counters.end()) {
      continue;
    }
    if (const auto rate = Rate(*host.now, *host.before, name, *series)) {
      sum = sum.value_or(0) + *rate;
    }
  }
  return sum;
}

// Packets per second through a port: its RDMA packets (IBA PortCounters) and, for a RoCE port,
// its netdev's own IP packets (ethtool rx_packets/tx_packets), whichever are exported.
std::optional<double> PacketRate(const Host& host, const std::string& device,
                                 const std::string& port, const std::string& netdev) {
  std::optional<double> sum;
  const auto add = [&sum](std::optional<double> rate) {
    if (rate) sum = sum.value_or(0) + *rate;
  };
  for (const char* name :
       {"rdma_port_packets_received_total", "rdma_port_packets_transmitted_total"}) {
    add(SumRate(host, name, {{"device", device}, {"port", port}}));
  }
  if (!netdev.empty()) {
    for (const char* stat : {"rx_packets", "tx_packets"}) {
      add(SumRate(host, "rdma_ethtool_stat", {{"device", netdev}, {"stat", stat}}));
    }
  }
  return sum;
}

constexpr const char* kOutOfSequence[] = {"out_of_sequence", "out_of_seq_request",
                                          "res_oos_drop_count"};
constexpr const char* kCongestion[] = {"np_cnp_sent", "rp_cnp_handled",
                                       "np_ecn_marked_roce_packets"};

// Each check's (kind -> ports) of one host, as rdma:fleet_error_rate:rate5m takes them.
void CollectErrors(const Host& host,
                   std::map<std::string, std::map<Kind, std::vector<ErrorEntry>>>& out) {
  const auto add = [&host, &out](const char* id, const Kind& kind, Scope scope,
                                 std::optional<double> rate, const std::string& device,
                                 const std::string& port, const std::string& netdev) {
    if (!rate) return;
    out[id][kind].push_back(
        {host.instance, std::move(scope), *rate, PacketRate(host, device, port, netdev)});
  };
  // RoCE netdevs: CRC, symbol errors and pause frames of the interface.
  for (const RoceNetdev& roce : host.roce) {
    const Matchers netdev{{"device", roce.netdev}};
    add("fleet.crc_errors", roce.kind, roce.scope,
        SumRate(host, "rdma_netdev_crc_errors_total", netdev), roce.device, roce.port, roce.netdev);
    add("fleet.symbol_errors", roce.kind, roce.scope,
        SumRate(host, "rdma_netdev_symbol_errors_total", netdev), roce.device, roce.port,
        roce.netdev);
    add("fleet.pause_frames", roce.kind, roce.scope,
        SumRate(host, "rdma_netdev_pause_frames_total", netdev), roce.device, roce.port,
        roce.netdev);
  }
  for (const Sample* info : host.now->Find("rdma_port_info")) {
    const std::string& device = info->Label("device");
    const std::string& port = info->Label("port");
    const Kind* kind = host.KindOf(device);
    if (kind == nullptr) continue;
    const Matchers matchers{{"device", device}, {"port", port}};
    Scope scope = PortScope(*info);
    if (!info->Label("netdev").empty()) scope.emplace_back("netdev", info->Label("netdev"));
    // InfiniBand ports: PortRcvErrors (bad ICRC, VCRC) and SymbolErrorCounter.
    if (info->Label("link_layer") == "InfiniBand") {
      add("fleet.crc_errors", *kind, scope,
          SumRate(host, "rdma_port_receive_errors_total", matchers), device, port, "");
      add("fleet.symbol_errors", *kind, scope,
          SumRate(host, "rdma_port_symbol_errors_total", matchers), device, port, "");
    }
    add("fleet.out_of_sequence", *kind, scope,
        SumRate(host, "rdma_port_hw_counter_total", matchers, kOutOfSequence), device, port,
        info->Label("netdev"));
    add("fleet.congestion_notifications", *kind, scope,
        SumRate(host, "rdma_port_hw_counter_total", matchers, kCongestion), device, port,
        info->Label("netdev"));
  }
}

// The median as Prometheus' quantile(0.5): the mean of the two middle values of an even count.
double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

void JudgeErrors(const ErrorCheck& check, const std::map<Kind, std::vector<ErrorEntry>>& groups,
                 std::vector<Finding>& findings) {
  for (const auto& [kind, ports] : groups) {
    std::set<std::string> hosts;
    for (const ErrorEntry& port : ports) hosts.insert(port.instance);
    const std::string model = ModelText(kind);
    if (hosts.size() < kFleetMinHosts) {
      Finding finding = Make(check.id, kArea, Severity::kInfo, GroupScope(kind), kErrorRunbook);
      finding.observed = Hosts(hosts.size()) + " with " + model + " count " + check.what +
                         ": fewer than " + Num(static_cast<double>(kFleetMinHosts)) +
                         ", no median to compare with";
      finding.expected =
          "at least " + Num(static_cast<double>(kFleetMinHosts)) + " hosts of one kind";
      findings.push_back(std::move(finding));
      continue;
    }
    // For the same traffic: per packet when every port's packets are counted, else per second
    // (as the fleet rule).
    const bool per_packet = std::ranges::all_of(
        ports, [](const ErrorEntry& port) { return port.packets && *port.packets > 0; });
    const auto basis = [per_packet](const ErrorEntry& port) {
      return per_packet ? port.rate / *port.packets : port.rate;
    };
    std::vector<double> values;
    for (const ErrorEntry& port : ports) values.push_back(basis(port));
    const double median = Median(values);
    const std::string unit = per_packet ? " per million packets" : "/s";
    const auto figure = [per_packet](double value) {
      return Figure(per_packet ? value * 1e6 : value);
    };
    const std::string median_text = "the median of the " + Num(static_cast<double>(ports.size())) +
                                    " ports on " + Hosts(hosts.size()) + " with " + model + ", " +
                                    figure(median) + unit;
    std::vector<const ErrorEntry*> outliers;
    std::set<std::string> outlier_hosts;
    double highest = 0;
    for (const ErrorEntry& port : ports) {
      highest = std::max(highest, basis(port));
      if (basis(port) > kFleetErrorFactor * median && port.rate > check.floor) {
        outliers.push_back(&port);
        outlier_hosts.insert(port.instance);
      }
    }
    const std::string expected = "at most " + Num(kFleetErrorFactor) + "x " + median_text +
                                 ", or at most " + Num(check.floor) + " " + check.what + "/s";
    if (outliers.empty()) {
      Finding finding = Make(check.id, kArea, Severity::kOk, GroupScope(kind), kErrorRunbook);
      finding.observed = Num(static_cast<double>(ports.size())) + " ports on " +
                         Hosts(hosts.size()) + " with " + model + ": median " + figure(median) +
                         unit + ", highest " + figure(highest) + unit + " " + check.what;
      finding.expected = expected;
      findings.push_back(std::move(finding));
      continue;
    }
    for (const ErrorEntry* port : outliers) {
      Scope scope{{"instance", port->instance}};
      scope.insert(scope.end(), port->scope.begin(), port->scope.end());
      Finding finding = Make(check.id, kArea, Severity::kWarn, std::move(scope), kErrorRunbook);
      const std::string factor =
          median > 0 ? Num(std::round(basis(*port) / median * 10) / 10) + "x " + median_text
                     : "while " + median_text;
      finding.observed = Figure(port->rate) + " " + check.what + "/s" +
                         (per_packet ? " (" + figure(basis(*port)) + unit + ")" : "") + ", " +
                         factor;
      finding.expected = expected;
      const size_t others = outlier_hosts.size() - 1;
      finding.advice = std::string(check.what) +
                       " far above its peers' for the same traffic: " + check.remedy +
                       (others == 0 ? ""
                                    : "; " + Hosts(others) + " more of this kind " +
                                          (others == 1 ? "is" : "are") + " reported too");
      findings.push_back(std::move(finding));
    }
  }
}

}  // namespace

void JudgeErrorRates(const std::vector<Host>& hosts, bool windowed,
                     std::vector<Finding>& findings) {
  std::map<std::string, std::map<Kind, std::vector<ErrorEntry>>> errors;
  for (const Host& host : hosts) {
    if (host.before != nullptr) CollectErrors(host, errors);
  }
  for (const ErrorCheck& check : kErrorChecks) {
    if (!windowed) {
      findings.push_back(Skip(check.id, kArea, {{"instance", "*"}}, kErrorRunbook, kNeedsWindow));
      continue;
    }
    if (errors[check.id].empty()) {
      findings.push_back(Skip(check.id, kArea, {{"instance", "*"}}, kErrorRunbook, kNothing));
      continue;
    }
    JudgeErrors(check, errors[check.id], findings);
  }
}

}  // namespace rdmascope::doctor::fleet_drift
