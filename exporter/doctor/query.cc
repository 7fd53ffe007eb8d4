#include "doctor/query.h"

#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "bpf/mr_probe.h"  // ParseDurationNs

namespace rdmascope::doctor {
namespace {

struct NumericThreshold {
  std::string_view name;  // the flag without --doctor.
  double DoctorOptions::*member;
  bool positive;  // 0 is not a usable value
};

constexpr NumericThreshold kThresholds[] = {
    {"min-netdev-mtu", &DoctorOptions::min_netdev_mtu, true},
    {"cq-ratio-warn", &DoctorOptions::cq_ratio_warn, true},
    {"cq-ratio-crit", &DoctorOptions::cq_ratio_crit, true},
    {"retransmissions-per-second", &DoctorOptions::retransmissions_per_second, false},
    {"remote-numa-ratio", &DoctorOptions::remote_numa_ratio, false},
    {"memlock-warn-ratio", &DoctorOptions::memlock_warn_ratio, true},
    {"hugepage-unaligned-ratio", &DoctorOptions::hugepage_unaligned_ratio, false},
    {"pinned-growth-bytes", &DoctorOptions::pinned_growth_bytes, false},
    {"message-size", &DoctorOptions::message_size_bytes, true},
    {"qp-depth-excess", &DoctorOptions::qp_depth_excess, true},
    {"qps-per-core", &DoctorOptions::qps_per_core, false},
    {"nodes", &DoctorOptions::nodes, false},
    {"flows", &DoctorOptions::flows, false},
    {"registrations-per-second", &DoctorOptions::registrations_per_second, false},
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
  if (name == "roce-priority") {
    const auto priority = ParseNumber(value);
    if (!priority || *priority > 7 || *priority != std::floor(*priority)) {
      return std::unexpected("roce-priority must be 0-7: " + std::string(value));
    }
    options.roce_priority = static_cast<int>(*priority);
    return true;
  }
  for (const NumericThreshold& threshold : kThresholds) {
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
  if (options.roce_priority != defaults.roce_priority) {
    add("roce-priority", std::to_string(options.roce_priority));
  }
  if (options.rtt_seconds != defaults.rtt_seconds)
    add("rtt", Text(options.rtt_seconds * 1e6) + "us");
  for (const NumericThreshold& threshold : kThresholds) {
    if (options.*threshold.member != defaults.*threshold.member) {
      add(threshold.name, Text(options.*threshold.member));
    }
  }
  return query;
}

}  // namespace rdmascope::doctor
