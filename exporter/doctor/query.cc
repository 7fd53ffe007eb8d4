#include "doctor/query.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "core/collector.h"  // BadRequest
#include "core/duration.h"

namespace rdmascope::doctor {
namespace {

constexpr NumericThreshold kNumeric[] = {
    {"min-netdev-mtu", &DoctorOptions::min_netdev_mtu, true,
     "Smallest netdev MTU of a RoCE interface (4096-byte RDMA payloads need about 4200)"},
    {"cq-ratio-warn", &DoctorOptions::cq_ratio_warn, true,
     "CQ capacity below this multiple of the WRs feeding it warns"},
    {"cq-ratio-crit", &DoctorOptions::cq_ratio_crit, true,
     "CQ capacity below this multiple of the WRs feeding it is critical"},
    {"retransmissions-per-second", &DoctorOptions::retransmissions_per_second, false,
     "Retransmission events per second per port above which doctor warns"},
    {"remote-numa-ratio", &DoctorOptions::remote_numa_ratio, false,
     "Share of a process's RDMA threads on another NUMA node than its NIC's above which doctor "
     "warns"},
    {"memlock-warn-ratio", &DoctorOptions::memlock_warn_ratio, true,
     "Pinned memory as a share of RLIMIT_MEMLOCK from which doctor warns (critical at the "
     "limit)"},
    {"hugepage-unaligned-ratio", &DoctorOptions::hugepage_unaligned_ratio, false,
     "Share of registered bytes not 2 MiB-aligned above which doctor reports (info)"},
    {"pinned-growth-bytes", &DoctorOptions::pinned_growth_bytes, false,
     "Growth of a process's pinned memory (VmPin) over the exporter's kept history (at most an "
     "hour) above which doctor warns"},
    {"message-size", &DoctorOptions::message_size_bytes, true,
     "Bytes per send WR for queues.qp_depth when the preload library measured none"},
    {"qp-depth-excess", &DoctorOptions::qp_depth_excess, true,
     "queues.qp_depth reports (info) an RC send queue deeper than this many times the "
     "recommended depth"},
    {"qps-per-core", &DoctorOptions::qps_per_core, false,
     "Connected QPs per online CPU below which queues.qps_per_core reports (info)"},
    {"nodes", &DoctorOptions::nodes, false,
     "Nodes the application exchanges messages with (queues.srq_sizing; 0: unknown)"},
    {"flows", &DoctorOptions::flows, false,
     "Average concurrent flows per node (queues.srq_sizing: limit and depth >= nodes x flows x "
     "1.2; 0: unknown)"},
    {"registrations-per-second", &DoctorOptions::registrations_per_second, false,
     "Registrations per second (nearly all deregistered again) above which "
     "memory.registration_churn warns"},
};

constexpr IntegerThreshold kInteger[] = {
    {"roce-priority", &DoctorOptions::roce_priority, 7,
     "Priority (0-7) RoCE traffic runs on: PFC must be on for it"},
    {"roce-dscp", &DoctorOptions::roce_dscp, 63,
     "DSCP (0-63) RoCE traffic is sent with when rdma_cm has no default ToS (roce.dscp_trust "
     "wants it on the RoCE priority); 26 is ToS 106"},
};

std::optional<double> ParseNumber(std::string_view text) {
  try {
    size_t used = 0;
    const std::string copy(text);
    const double value = std::stod(copy, &used);
    if (used != copy.size() || !std::isfinite(value) || value < 0) return std::nullopt;
    return value;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::string Text(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.15g", value);  // 1.2, not 1.1999999999999999
  return buffer;
}

}  // namespace

std::span<const NumericThreshold> NumericThresholds() { return kNumeric; }
std::span<const IntegerThreshold> IntegerThresholds() { return kInteger; }

std::optional<double> ParseRttSeconds(std::string_view text) {
  if (text.ends_with("us")) {
    const auto us = ParseNumber(text.substr(0, text.size() - 2));
    if (!us || *us == 0) return std::nullopt;
    return *us * 1e-6;
  }
  const auto ns = ParseDurationNs(text);
  if (!ns || *ns == 0) return std::nullopt;
  return static_cast<double>(*ns) * 1e-9;
}

std::expected<bool, std::string> ApplyThreshold(std::string_view name, std::string_view value,
                                                DoctorOptions& options) {
  if (name == "rtt") {
    const auto seconds = ParseRttSeconds(value);
    if (!seconds)
      return std::unexpected("rtt must be a duration like 80us or 1ms: " + std::string(value));
    options.rtt_seconds = *seconds;
    return true;
  }
  for (const IntegerThreshold& threshold : kInteger) {
    if (name != threshold.name) continue;
    const auto number = ParseNumber(value);
    if (!number || *number > threshold.max || *number != std::floor(*number)) {
      return std::unexpected(std::string(name) + " must be 0-" + std::to_string(threshold.max) +
                             ": " + std::string(value));
    }
    options.*threshold.member = static_cast<int>(*number);
    return true;
  }
  for (const NumericThreshold& threshold : kNumeric) {
    if (name != threshold.name) continue;
    const auto number = ParseNumber(value);
    if (!number || (threshold.positive && *number == 0)) {
      return std::unexpected(std::string(name) + " must be a " +
                             (threshold.positive ? "positive" : "non-negative") +
                             " number: " + std::string(value));
    }
    options.*threshold.member = *number;
    if (!(options.cq_ratio_crit <= options.cq_ratio_warn)) {
      return std::unexpected("cq-ratio-crit must be at most cq-ratio-warn");
    }
    return true;
  }
  return false;
}

std::string ThresholdQuery(const DoctorOptions& options) {
  const DoctorOptions defaults;
  std::string query;
  const auto add = [&query](std::string_view name, const std::string& value) {
    query += (query.empty() ? "" : "&") + std::string(name) + "=" + value;
  };
  for (const IntegerThreshold& threshold : kInteger) {
    if (options.*threshold.member != defaults.*threshold.member) {
      add(threshold.name, std::to_string(options.*threshold.member));
    }
  }
  if (options.rtt_seconds != defaults.rtt_seconds)
    add("rtt", Text(options.rtt_seconds * 1e6) + "us");
  for (const NumericThreshold& threshold : kNumeric) {
    if (options.*threshold.member != defaults.*threshold.member) {
      add(threshold.name, Text(options.*threshold.member));
    }
  }
  return query;
}

DoctorQuery ParseDoctorQuery(std::string_view query) {
  DoctorQuery parsed;
  for (size_t at = 0; at < query.size();) {
    const size_t end = std::min(query.find('&', at), query.size());
    const std::string_view item = query.substr(at, end - at);
    at = end + 1;
    if (item.empty()) continue;
    const size_t equals = item.find('=');
    const std::string_view name = item.substr(0, equals);
    const std::string_view value =
        equals == std::string_view::npos ? std::string_view() : item.substr(equals + 1);
    if (name == "window") {
      parsed.window_ns = ParseDurationNs(value);
      if (!parsed.window_ns ||
          *parsed.window_ns > static_cast<uint64_t>(kMaxLiveWindowSeconds * 1e9)) {
        throw BadRequest("window must be a duration of at most 10s, like 5s: " +
                         std::string(value));
      }
      continue;
    }
    const auto applied = ApplyThreshold(name, value, parsed.options);
    if (!applied) throw BadRequest(applied.error());
    if (!*applied) throw BadRequest("unknown parameter " + std::string(name));
  }
  return parsed;
}

}  // namespace rdmascope::doctor
