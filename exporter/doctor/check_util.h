// Small helpers shared by the checks_*.cc files.
#pragma once

#include <cmath>
#include <cstdio>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "doctor/finding.h"
#include "doctor/samples.h"
#include "doctor/shell_quote.h"

namespace rdmascope::doctor {

// 4200, 1.5, 0.25: integers without a decimal point, others with up to 3 significant digits.
inline std::string Num(double value) {
  char buffer[64];
  if (std::isfinite(value) && value == std::floor(value) && std::fabs(value) < 1e15) {
    std::snprintf(buffer, sizeof buffer, "%.0f", value);
  } else {
    std::snprintf(buffer, sizeof buffer, "%.3g", value);
  }
  return buffer;
}

inline std::string Percent(double ratio) { return Num(std::round(ratio * 1000) / 10) + "%"; }

// 1.5 GiB, 300 MiB, 12 KiB, 512 B.
inline std::string Bytes(double bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (std::fabs(bytes) >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  return Num(unit == 0 ? bytes : std::round(bytes * 10) / 10) + " " + kUnits[unit];
}

inline Finding Make(std::string id, std::string area, Severity severity, Scope scope,
                    std::string runbook) {
  Finding finding;
  finding.id = std::move(id);
  finding.area = std::move(area);
  finding.severity = severity;
  finding.scope = std::move(scope);
  finding.runbook = "docs/runbook.md#" + std::move(runbook);
  return finding;
}

inline Finding Skip(std::string id, std::string area, Scope scope, std::string runbook,
                    std::string reason) {
  Finding finding =
      Make(std::move(id), std::move(area), Severity::kSkip, std::move(scope), std::move(runbook));
  finding.observed = std::move(reason);
  return finding;
}

inline constexpr const char* kNeedsWindow =
    "counters need two collections: run with --window greater than 0s";

// The reason of every history check when doctor collected itself (docs/doctor.md "History").
inline constexpr const char* kNoExporter =
    "no exporter running: history needs rdmascope serve (use --exporter)";
// Why a history check cannot run on `now`: its own reason, else kNoExporter.
inline std::string NoHistory(const Snapshot& now) {
  return now.no_history_reason().empty() ? std::string(kNoExporter) : now.no_history_reason();
}

inline Scope PortScope(const Sample& sample) {
  return {{"device", sample.Label("device")}, {"port", sample.Label("port")}};
}

inline Scope ProcessScope(const Sample& sample) {
  Scope scope;
  for (const char* label : {"device", "pid", "comm", "cq", "srq"}) {
    if (sample.labels.contains(label)) scope.emplace_back(label, sample.Label(label));
  }
  return scope;
}

}  // namespace rdmascope::doctor

namespace rdmascope::doctor {

struct RateCheck {
  std::string id;
  std::string area;
  std::string runbook;
  std::string what;  // "retransmission events"
  double threshold;  // per second; above it: warn
  std::string advice;
};

// Sums the rates of `counters` (rdma_port_hw_counter_total{counter=...}) per port over the
// window, as the recording rules do, and compares the sum with the threshold. checks.cc.
std::vector<Finding> HwCounterRateCheck(const Snapshot& now, const Snapshot* before,
                                        std::span<const char* const> counters,
                                        const RateCheck& check);

// The netdev knobs that tune the Ethernet stack, not RDMA (ethtool -C, rx_cqe_compress, XPS),
// matter only where the interface carries IP traffic at a high packet rate. The rules' figure
// (rdma:roce_netdev_ip_packets:rate5m > 100000).
inline constexpr double kBusyIpPacketsPerSecond = 100000;

// Packets per second through the netdev's own stack over the window, `direction` "rx" or "tx":
// the ethtool stat rx_packets / tx_packets, which mlx5 counts on its Ethernet queues only (RoCE
// packets go from the port to the QPs and are not in them). nullopt without a window, without
// the stat, or across a counter reset. checks.cc.
std::optional<double> IpPacketRate(const Snapshot& now, const Snapshot* before,
                                   const std::string& netdev, std::string_view direction);

// "N IP packets/s received" (direction "rx") or "sent" ("tx"), or why the rate is unknown, for
// a finding's observed.
std::string IpPacketRateText(std::optional<double> rate, const Snapshot* before,
                             std::string_view direction);

// The data rate of the device's fastest active port (rdma_port_data_rate_bytes_per_second: the
// signalling rate less line coding, so InfiniBand QDR's 40 Gb/s counts as the 32 it carries),
// or its signalling rate from an exporter that has no data rate yet. nullopt when no port is
// up. For bandwidth-delay products and PCIe comparisons. checks.cc.
std::optional<double> FastestPortDataRate(const Snapshot& now, const std::string& device);

// One skip finding for a check with nothing to look at (no CQ, no process): says which series
// was absent and why that happens. checks.cc.
Finding NothingToCheck(std::string id, std::string area, std::string runbook, std::string reason);

}  // namespace rdmascope::doctor
