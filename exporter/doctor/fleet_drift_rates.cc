// Fleet drift's error and congestion rates (RdmaFleetErrorRateOutlier): a port far above the
// median of its peers' ports, per second as the alert judges them, so that the report and the
// page agree about each port. The rows are rdma:fleet_error_rate:rate5m's: read where the fleet
// rules run and doctor judges their 5 minutes, else computed here over the window as the rule
// computes them.
#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include "doctor/check_util.h"
#include "doctor/fleet_drift_parts.h"
#include "doctor/fleet_rules.h"

namespace rdmascope::doctor::fleet_drift {
namespace {

constexpr const char* kErrorRunbook = "rdmafleeterrorrateoutlier";

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

// The rows of one host as the rule's expression computes them.
void ComputedRows(const Host& host, std::vector<Row>& rows) {
  const auto add = [&host, &rows](const char* error, const Kind& kind, const Object& object,
                                  std::optional<double> rate) {
    if (rate) rows.push_back({host.instance, kind, object, error, "", *rate});
  };
  // RoCE netdevs: CRC, symbol errors and pause frames (every direction and priority).
  for (const RoceNetdev& roce : host.roce) {
    const Matchers netdev{{"device", roce.object.netdev}};
    add("crc", roce.kind, roce.object, SumRate(host, "rdma_netdev_crc_errors_total", netdev));
    add("symbol", roce.kind, roce.object, SumRate(host, "rdma_netdev_symbol_errors_total", netdev));
    add("pause", roce.kind, roce.object, SumRate(host, "rdma_netdev_pause_frames_total", netdev));
  }
  for (const Sample* info : host.now->Find("rdma_port_info")) {
    const std::string& device = info->Label("device");
    const std::string& port = info->Label("port");
    const Kind* kind = host.KindOf(device);
    if (kind == nullptr) continue;
    const Matchers matchers{{"device", device}, {"port", port}};
    const Object object = host.DeviceObject(device, port);
    // InfiniBand ports: PortRcvErrors (bad ICRC, VCRC) and SymbolErrorCounter.
    if (info->Label("link_layer") == "InfiniBand") {
      add("crc", *kind, object, SumRate(host, "rdma_port_receive_errors_total", matchers));
      add("symbol", *kind, object, SumRate(host, "rdma_port_symbol_errors_total", matchers));
    }
    add("out_of_sequence", *kind, object,
        SumRate(host, "rdma_port_hw_counter_total", matchers, fleet_rules::kOutOfSequenceCounters));
    add("cnp", *kind, object,
        SumRate(host, "rdma_port_hw_counter_total", matchers, fleet_rules::kCongestionCounters));
  }
}

// The rows of one host from rdma:fleet_error_rate:rate5m: a `port` label names an RDMA port,
// none a RoCE netdev (its `device` label).
void RecordedRows(const Host& host, const std::string& cluster_label, std::vector<Row>& rows) {
  for (const Sample* series : host.now->Find(fleet_rules::kErrorRateSeries)) {
    const std::string& device = series->Label("device");
    const std::string& port = series->Label("port");
    Object object;
    if (!port.empty()) {
      object = host.DeviceObject(device, port);
    } else if (const RoceNetdev* roce = host.RoceOf(device)) {
      object = roce->object;
    } else {
      object = Object{.netdev = device, .scope = {{"netdev", device}}};
    }
    rows.push_back({host.instance, KindOfRow(*series, cluster_label), std::move(object),
                    series->Label("error"), "", series->value});
  }
}

// The median as Prometheus' quantile(0.5): the mean of the two middle values of an even count.
double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// `cluster_median`: the rules' median of the cluster's ports (kErrorMedianSeries), which the
// alert compares with; else the median of the group's ports in this report.
Verdict JudgeRates(const fleet_rules::ErrorRate& error, const Kind& kind,
                   const std::vector<const Row*>& ports, size_t hosts,
                   std::optional<double> cluster_median) {
  std::vector<double> rates;
  for (const Row* port : ports) rates.push_back(port->number);
  const double median = cluster_median.value_or(Median(rates));
  const double highest = *std::ranges::max_element(rates);
  const std::string what = error.what;
  const std::string median_text =
      cluster_median
          ? "the median of the ports with " + ModelText(kind) +
                " in the cluster (the fleet rules' record), " + Figure(median) + "/s"
          : "the median of the " + Num(static_cast<double>(ports.size())) + " ports on " +
                Hosts(hosts) + " with " + ModelText(kind) + ", " + Figure(median) + "/s";
  const std::string expected = "at most " + Num(fleet_rules::kErrorFactor) + "x " + median_text +
                               ", or at most " + Num(error.floor) + " " + what + "/s";
  Verdict verdict;
  verdict.cluster_wide = cluster_median.has_value();
  for (const Row* port : ports) {
    // As the alert: rate > factor x median and rate > floor.
    if (!(port->number > fleet_rules::kErrorFactor * median && port->number > error.floor))
      continue;
    const std::string factor =
        median > 0 ? Num(std::round(port->number / median * 10) / 10) + "x " + median_text
                   : "while " + median_text;
    verdict.outliers.push_back({port->instance, port->object.scope,
                                Figure(port->number) + " " + what + "/s, " + factor, expected,
                                what + " far above its peers': " + error.remedy, ""});
  }
  if (verdict.outliers.empty()) {
    verdict.group = Verdict::Group{
        Severity::kOk,
        Num(static_cast<double>(ports.size())) + " ports on " + Hosts(hosts) + " with " +
            ModelText(kind) + ": " + (cluster_median ? "the cluster's median " : "median ") +
            Figure(median) + "/s, highest " + Figure(highest) + "/s " + what,
        expected, ""};
  }
  return verdict;
}

}  // namespace

void JudgeErrorRates(const std::vector<Host>& hosts, double window_seconds,
                     const std::string& cluster_label, const std::vector<Sample>& error_medians,
                     std::vector<Finding>& findings) {
  std::vector<Row> rows;
  // (kind, error) -> the rules' median over the cluster, read with the rules' rows only.
  std::map<std::pair<Kind, std::string>, double> medians;
  // The recorded rates are over the rules' 5 minutes: doctor reads them when it judges those.
  if (window_seconds == fleet_rules::kRateWindowSeconds &&
      Recorded(hosts, fleet_rules::kErrorRateSeries)) {
    for (const Host& host : hosts) RecordedRows(host, cluster_label, rows);
    for (const Sample& median : error_medians) {
      if (!std::isfinite(median.value)) continue;
      medians.emplace(std::make_pair(KindOfRow(median, cluster_label), median.Label("error")),
                      median.value);
    }
  } else if (window_seconds > 0) {
    for (const Host& host : hosts) {
      if (host.before != nullptr) ComputedRows(host, rows);
    }
  }
  for (const fleet_rules::ErrorRate& error : fleet_rules::kErrorRates) {
    if (window_seconds <= 0) {
      findings.push_back(Skip(error.id, kArea, {{"instance", "*"}}, kErrorRunbook, kNeedsWindow));
      continue;
    }
    Groups groups;
    for (const Row& row : rows) {
      if (row.name == error.error) groups[row.kind].push_back(&row);
    }
    if (groups.empty()) {
      findings.push_back(Skip(error.id, kArea, {{"instance", "*"}}, kErrorRunbook, kNothing));
      continue;
    }
    JudgeGroups(
        {error.id, kErrorRunbook, Severity::kWarn, "median"}, groups,
        [&](const Kind& kind, const std::vector<const Row*>& ports, size_t count) {
          const auto median = medians.find({kind, error.error});
          return JudgeRates(
              error, kind, ports, count,
              median == medians.end() ? std::nullopt : std::optional<double>(median->second));
        },
        findings);
  }
}

}  // namespace rdmascope::doctor::fleet_drift
