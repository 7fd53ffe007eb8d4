// The fleet rules' figures (rules/rdmascope.fleet.rules.yml, group rdmascope.fleet-drift) as
// fleet drift (fleet_drift.h) uses them: the names of their recorded series, the errors and
// their floors, the factor over the median, the counters each error sums, the settings and
// their names. Doctor reads the rules' outputs where that Prometheus records them and computes
// the same values itself where it does not, so a report and the alerts that page people cannot
// disagree about one port. FleetRules.* (tests/unit/fleet_rules_test.cc) loads the rules files
// and fails when one side changes without the other.
#pragma once

#include <charconv>
#include <cmath>
#include <string>
#include <string_view>
#include <system_error>

namespace rdmascope::doctor::fleet_rules {

// {<target labels>, device, [port], board_id, hca_type, setting, setting_value}: 1, or the
// figure of the settings compared by size.
inline constexpr std::string_view kSettingSeries = "rdma:fleet_setting:value";
// {<target labels>, device, [port], board_id, hca_type, error}: per second, over kRateWindow.
inline constexpr std::string_view kErrorRateSeries = "rdma:fleet_error_rate:rate5m";
// The group figures the alerts compare each row with, over the whole cluster (a report may
// cover only the hosts a selector chose): {cluster, board_id, hca_type, setting, setting_value}
// the hosts with that value (the majority is the value with the most, alone), and {cluster,
// board_id, hca_type, error} the median of the ports' rates.
inline constexpr std::string_view kSettingHostsSeries =
    "cluster_board_id_setting_value:rdma_fleet_hosts:count";
inline constexpr std::string_view kErrorMedianSeries =
    "cluster_board_id_error:rdma_fleet_error_rate:median5m";
// The rules' rate(...[5m]): doctor reads their recorded rates only when it judges this window.
inline constexpr double kRateWindowSeconds = 300;

// RdmaFleetErrorRateOutlier: a port's rate more than this many times the median of its peers'
// ports (the same cluster and NIC model), and above the error's floor.
inline constexpr double kErrorFactor = 10;

struct ErrorRate {
  const char* error;   // the rules' `error` label
  const char* id;      // doctor's check
  const char* what;    // for a person
  double floor;        // per second: never an outlier at or below it (an idle fleet's median is 0)
  const char* remedy;  // the per-host alert to follow
};

inline constexpr ErrorRate kErrorRates[] = {
    {"crc", "fleet.crc_errors", "CRC errors", 1,
     "this link is bad: the cable, transceiver or switch port (RdmaCrcErrors)"},
    {"symbol", "fleet.symbol_errors", "symbol errors", 1,
     "this link is bad: the cable, transceiver or switch port (RdmaSymbolErrors)"},
    {"out_of_sequence", "fleet.out_of_sequence", "out-of-sequence packets", 10,
     "its packets are lost on the way: PFC on the RoCE priority, drops on the switch "
     "(RdmaRetransmissions)"},
    {"cnp", "fleet.congestion_notifications", "ECN marks and CNPs", 100,
     "its traffic is congested far more than its peers': a hot switch port, a slow receiver, PFC "
     "or ECN set unlike its peers' (fleet.pfc, fleet.ecn; RdmaCongestionNotifications)"},
    {"pause", "fleet.pause_frames", "pause frames", 100,
     "its traffic is paused far more than its peers': a hot switch port, a slow receiver, PFC set "
     "unlike its peers' (fleet.pfc; RdmaHeavyPauseOnRocePriority)"},
};

// rdma_port_hw_counter_total's counters summed per port: out_of_sequence (mlx5, rxe, bnxt_re),
// and cnp as rdma:port_congestion_notifications:rate5m sums them (rules/rdmascope.rules.yml).
inline constexpr const char* kOutOfSequenceCounters[] = {"out_of_sequence", "out_of_seq_request",
                                                         "res_oos_drop_count"};
inline constexpr const char* kCongestionCounters[] = {"np_cnp_sent", "rp_cnp_handled",
                                                      "np_ecn_marked_roce_packets"};

// The DSCPs whose priority is a setting (dscp_26_priority, dscp_48_priority): RoCE data in
// NVIDIA's lossless configuration (ToS 106), and CNPs.
inline constexpr const char* kDscps[] = {"26", "48"};
inline constexpr int kPriorities = 8;

// The settings' names (the `setting` label), one function per family of the rule.
inline std::string PfcSetting(int priority) { return "pfc_priority_" + std::to_string(priority); }
inline std::string DscpPrioritySetting(std::string_view dscp) {
  return "dscp_" + std::string(dscp) + "_priority";
}
// point: np (notification point) or rp (reaction point)
inline std::string EcnSetting(std::string_view point, int priority) {
  return "ecn_" + std::string(point) + "_priority_" + std::to_string(priority);
}
// direction: rx or tx
inline std::string CoalesceUsecsSetting(std::string_view direction) {
  return "coalesce_usecs_" + std::string(direction);
}
inline std::string CoalesceAdaptiveSetting(std::string_view direction) {
  return "coalesce_adaptive_" + std::string(direction);
}

// A number as PromQL writes it into a label (count_values: Go's FormatFloat(v, 'f', -1, 64)):
// the shortest decimal that reads back as the same double, without an exponent.
inline std::string PromNumber(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char text[400];  // the longest fixed form of a double is some 330 characters
  const auto [end, error] =
      std::to_chars(text, text + sizeof text, value, std::chars_format::fixed);
  return error == std::errc() ? std::string(text, end) : std::string();
}

}  // namespace rdmascope::doctor::fleet_rules
