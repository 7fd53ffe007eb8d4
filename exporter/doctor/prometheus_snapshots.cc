#include "doctor/prometheus_snapshots.h"

#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>

namespace rdmascope::doctor {

const std::vector<std::string_view> kCheckSeries = {
    // The scrape target's health (a host that is down gets no per-host checks; fleet drift
    // reports it missing), the collectors' outcomes and the probes (host.collectors,
    // host.probes; every skip).
    "up", "rdmascope_collector_success", "rdmascope_collector_no_data", "rdmascope_probe_attached",
    // links
    "rdma_device_info", "rdma_device_numa_node", "rdma_port_info", "rdma_port_state",
    "rdma_port_physical_state", "rdma_port_netdev_carrier", "rdma_port_netdev_admin_up",
    "rdma_port_rate_bytes_per_second", "rdma_port_data_rate_bytes_per_second",
    "rdma_port_active_mtu_bytes", "rdma_port_max_mtu_bytes", "rdma_port_symbol_errors_total",
    "rdma_port_link_downed_total", "rdma_port_link_error_recovery_total",
    "rdma_port_receive_errors_total", "rdma_port_transmit_discards_total",
    "rdma_port_transmit_wait_total", "rdma_port_stat_total", "rdma_port_stat_saturated",
    "rdma_port_hw_counter_total", "rdma_port_gid_info", "rdma_port_default_roce_tos",
    "rdma_pcie_link_speed_transfers_per_second", "rdma_pcie_link_width_lanes",
    // NIC, RoCE configuration
    "rdma_netdev_info", "rdma_netdev_mtu_bytes", "rdma_netdev_numa_node",
    "rdma_netdev_crc_errors_total", "rdma_netdev_symbol_errors_total",
    "rdma_netdev_pause_frames_total", "rdma_netdev_pause_storm_events_total",
    "rdma_netdev_pfc_enabled", "rdma_netdev_ecn_enabled", "rdma_netdev_dscp_trust",
    "rdma_netdev_dscp_priority_info", "rdma_netdev_coalesce_usecs", "rdma_netdev_coalesce_adaptive",
    "rdma_netdev_private_flag", "rdma_netdev_xps_local_node_ratio",
    "rdma_netdev_xps_configured_ratio", "rdma_netdev_irq_local_node_ratio", "rdma_ethtool_stat",
    // queues
    "rdma_cq_capacity_entries", "rdma_cq_feeding_wrs", "rdma_srq_max_wrs", "rdma_srq_limit_wrs",
    "rdma_srq_posted_wrs", "rdma_process_qps", "rdma_process_qp_total_send_wrs",
    "rdma_process_qp_min_send_wrs", "rdma_process_qp_max_send_wrs",
    "rdma_process_posted_work_requests_total", "rdma_process_posted_bytes_total",
    // memory
    "rdma_mr_registrations_total", "rdma_mr_deregistrations_total", "rdma_mr_outstanding_bytes",
    "rdma_mr_outstanding_regions", "rdma_mr_leak_suspect_bytes", "rdma_mr_leak_suspect_regions",
    "rdma_mr_registration_size_bytes_sum", "rdma_mr_registration_size_bytes_count",
    "rdma_mr_not_hugepage_aligned_bytes_total", "rdma_mr_length_not_page_multiple_total",
    "rdma_process_pinned_bytes", "rdma_process_locked_memory_limit_bytes",
    "rdma_process_pin_limit_exempt", "rdma_process_remote_numa_thread_ratio",
    "rdma_process_workload_info", "rdma_ucm",
    // host
    "rdma_host_hugepages", "rdma_host_hugepage_size_bytes", "rdma_host_transparent_hugepage_mode",
    "rdma_host_numa_balancing", "rdma_host_online_cpus", "rdma_host_cpu_frequency_governor_cpus",
    "rdma_host_kernel_module_loaded", "rdma_host_rdma_cm_configfs",
    // fleet drift only (doctor/fleet_drift.cc): the ports' packets, for error rates per packet
    "rdma_port_packets_received_total", "rdma_port_packets_transmitted_total"};

const std::vector<std::string_view> kCheckEthtoolStats = {"rx_packets", "tx_packets"};

namespace {

// Names per query: each selector's regex stays short enough for any proxy's URL limit.
constexpr size_t kNamesPerQuery = 16;

std::string Selector(const std::string& name_regex, const std::string& matchers) {
  return "{__name__=~\"" + name_regex + "\"" + (matchers.empty() ? "" : "," + matchers) + "}";
}

std::optional<double> ParseValue(const std::string& text) {
  // Prometheus writes "NaN", "+Inf", "-Inf" and Go's float formatting.
  if (text == "NaN") return std::nan("");
  if (text == "+Inf") return INFINITY;
  if (text == "-Inf") return -INFINITY;
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace

std::vector<std::string> CheckSeriesQueries(const std::string& matchers) {
  std::vector<std::string> queries;
  std::string regex;
  size_t names = 0;
  for (std::string_view name : kCheckSeries) {
    if (name == "rdma_ethtool_stat") continue;  // by stat, below
    regex += (regex.empty() ? "" : "|") + std::string(name);
    if (++names == kNamesPerQuery) {
      queries.push_back(Selector(regex, matchers));
      regex.clear();
      names = 0;
    }
  }
  if (!regex.empty()) queries.push_back(Selector(regex, matchers));
  std::string stats;
  for (std::string_view stat : kCheckEthtoolStats) {
    stats += (stats.empty() ? "" : "|") + std::string(stat);
  }
  queries.push_back("rdma_ethtool_stat{stat=~\"" + stats + "\"" +
                    (matchers.empty() ? "" : "," + matchers) + "}");
  return queries;
}

std::expected<void, std::string> AddQueryAnswer(std::string_view body,
                                                InstanceSeries& by_instance) {
  const nlohmann::json answer = nlohmann::json::parse(body, nullptr, false);
  if (answer.is_discarded() || !answer.is_object()) {
    return std::unexpected("not a Prometheus API answer (not a JSON object)");
  }
  if (answer.value("status", "") != "success") {
    const std::string type = answer.value("errorType", "");
    const std::string error = answer.value("error", "");
    return std::unexpected("Prometheus answered " +
                           (type.empty() ? std::string("an error") : type) +
                           (error.empty() ? "" : ": " + error));
  }
  const auto data = answer.find("data");
  if (data == answer.end() || !data->is_object() || data->value("resultType", "") != "vector" ||
      !data->contains("result") || !(*data)["result"].is_array()) {
    return std::unexpected("Prometheus answered something other than an instant vector");
  }
  // instance -> name -> family index, so that each name is one family per instance.
  std::map<std::string, std::map<std::string, size_t>> families;
  for (auto& [instance, list] : by_instance) {
    for (size_t i = 0; i < list.size(); ++i) families[instance][list[i].name] = i;
  }
  for (const nlohmann::json& sample : (*data)["result"]) {
    if (!sample.is_object() || !sample.contains("metric") || !sample["metric"].is_object() ||
        !sample.contains("value") || !sample["value"].is_array() || sample["value"].size() != 2 ||
        !sample["value"][1].is_string()) {
      continue;
    }
    const nlohmann::json& metric = sample["metric"];
    const auto name = metric.find("__name__");
    const auto instance = metric.find("instance");
    if (name == metric.end() || !name->is_string() || instance == metric.end() ||
        !instance->is_string()) {
      continue;
    }
    const std::optional<double> value = ParseValue(sample["value"][1].get<std::string>());
    if (!value) continue;
    prometheus::ClientMetric series;
    for (const auto& [label, text] : metric.items()) {
      if (label == "__name__" || label == "instance" || !text.is_string()) continue;
      series.label.push_back({label, text.get<std::string>()});
    }
    series.untyped.value = *value;
    std::vector<prometheus::MetricFamily>& list = by_instance[instance->get<std::string>()];
    auto [it, fresh] =
        families[instance->get<std::string>()].try_emplace(name->get<std::string>(), list.size());
    if (fresh) {
      prometheus::MetricFamily family;
      family.name = name->get<std::string>();
      family.type = prometheus::MetricType::Untyped;
      list.push_back(std::move(family));
    }
    list[it->second].metric.push_back(std::move(series));
  }
  return {};
}

std::map<std::string, Snapshot> SnapshotsOf(const InstanceSeries& by_instance, double seconds) {
  std::map<std::string, Snapshot> snapshots;
  for (const auto& [instance, families] : by_instance) {
    // What `rdmascope check` would say of each collector, as far as the series tell it.
    std::map<std::string, CollectorOutcome> outcomes;
    for (const prometheus::MetricFamily& family : families) {
      const bool success = family.name == "rdmascope_collector_success";
      const bool no_data = family.name == "rdmascope_collector_no_data";
      const bool probe = family.name == "rdmascope_probe_attached";
      if (!success && !no_data && !probe) continue;
      for (const prometheus::ClientMetric& series : family.metric) {
        std::string collector;
        for (const auto& label : series.label) {
          if (label.name == (probe ? "probe" : "collector")) collector = label.value;
        }
        if (collector.empty()) continue;
        CollectorOutcome& outcome = outcomes[collector];
        if (success && series.untyped.value == 0) {
          outcome.failed = true;
          outcome.detail =
              "failed at the last scrape (rdmascope_collector_success 0; "
              "`rdmascope check` on the host says why)";
        }
        if (no_data && series.untyped.value == 1 && !outcome.failed) {
          outcome.no_data = true;
          outcome.detail = "no data at the last scrape";
        }
        if (probe && series.untyped.value == 0) {
          outcome.probe_error = "rdmascope_probe_attached 0 (the host's log says why)";
        }
      }
    }
    snapshots.emplace(instance, Snapshot(families, seconds, std::move(outcomes)));
  }
  return snapshots;
}

}  // namespace rdmascope::doctor
