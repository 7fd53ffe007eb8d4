#include "doctor/prometheus_snapshots.h"

#include <algorithm>
#include <cstdio>
#include <iterator>

#include "doctor/fleet_rules.h"
#include "doctor/history.h"
#include "doctor/prometheus_answer.h"

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
    // link health (checks_link_optics.cc, checks_link_ib.cc; the module identity for fleet
    // drift's fleet.module)
    "rdma_link_module_lane_rx_power_watts", "rdma_link_module_rx_power_threshold_watts",
    "rdma_link_module_thresholds_valid", "rdma_link_module_temperature_celsius",
    "rdma_link_module_temperature_threshold_celsius", "rdma_link_module_state",
    "rdma_link_module_state_info", "rdma_link_module_info", "rdma_link_ib_width_lanes",
    "rdma_link_ib_lane_rate_bits_per_second",
    // links, FEC and speed (issue 40; doctor/checks_link_fec.cc)
    "rdma_link_fec_corrected_bits_total", "rdma_link_fec_corrected_codewords_total",
    "rdma_link_fec_uncorrectable_codewords_total", "rdma_link_fec_info",
    "rdma_link_line_rate_bits_per_second", "rdma_link_lanes", "rdma_link_speed_bits_per_second",
    "rdma_link_max_speed_bits_per_second", "rdma_link_common_max_speed_bits_per_second",
    "rdma_link_module_max_speed_bits_per_second",
    // links.flapping (checks_link_down.cc)
    "rdma_link_source_available", "rdma_link_down_events_total", "rdma_link_last_down_info",
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
    // fleet drift only (doctor/fleet_drift.h): the fleet rules' rows where that Prometheus
    // records them (nothing answers for them where it does not: doctor computes them then)
    fleet_rules::kSettingSeries, fleet_rules::kErrorRateSeries};

const std::vector<std::string_view> kCheckEthtoolStats = {
    "rx_packets", "tx_packets", "rx_corrected_bits_phy", "rx_corrected_bits",
    "rx_fec_corrected_blocks"};

namespace {

// Names per query: each selector's regex stays short enough for any proxy's URL limit.
constexpr size_t kNamesPerQuery = 16;

std::string Selector(const std::string& name_regex, const std::string& matchers) {
  return "{__name__=~\"" + name_regex + "\"" + (matchers.empty() ? "" : "," + matchers) + "}";
}

std::string Alternatives(std::span<const std::string_view> names) {
  std::string regex;
  for (std::string_view name : names) regex += (regex.empty() ? "" : "|") + std::string(name);
  return regex;
}

// Selectors of `names` (kNamesPerQuery a query), and of rdma_ethtool_stat only `stats`.
std::vector<std::string> Selectors(std::span<const std::string_view> names,
                                   std::span<const std::string_view> stats,
                                   const std::string& matchers) {
  std::vector<std::string> queries;
  std::vector<std::string_view> batch;
  for (std::string_view name : names) {
    if (name == "rdma_ethtool_stat") continue;  // by stat, below
    batch.push_back(name);
    if (batch.size() == kNamesPerQuery) {
      queries.push_back(Selector(Alternatives(batch), matchers));
      batch.clear();
    }
  }
  if (!batch.empty()) queries.push_back(Selector(Alternatives(batch), matchers));
  queries.push_back("rdma_ethtool_stat{stat=~\"" + Alternatives(stats) + "\"" +
                    (matchers.empty() ? "" : "," + matchers) + "}");
  return queries;
}

// One query's answer as instance -> name -> samples; series without an instance are nobody's.
std::expected<InstanceSeries, std::string> ReadSeries(std::string_view body, ResultType type,
                                                      std::vector<std::string>* warnings) {
  InstanceSeries read;
  auto added = ReadQueryAnswer(
      body, type,
      [&read](AnswerSeries&& series) {
        if (series.instance.empty() || series.name.empty()) return;
        std::vector<Sample>& samples = read[series.instance][series.name];
        for (const auto& [seconds, value] : series.points) {
          samples.push_back(Sample{.labels = series.labels, .value = value});
        }
      },
      warnings);
  if (!added) return std::unexpected(added.error());
  return read;
}

}  // namespace

std::vector<std::string> CheckSeriesQueries(const std::string& matchers) {
  return Selectors(kCheckSeries, kCheckEthtoolStats, matchers);
}

std::vector<std::string> CounterSeriesQueries(const std::string& matchers) {
  return Selectors(kWindowSeries, kWindowEthtoolStats, matchers);
}

std::string TrendSelector(const std::string& matchers) {
  return Selector(Alternatives(kTrendSeries), matchers);
}

std::string TrendAppearedQuery(const std::string& matchers, double then) {
  char at[32];
  std::snprintf(at, sizeof at, "%.3f", then);
  const std::string selector = TrendSelector(matchers);
  return selector + " unless " + selector + " @ " + at;
}

std::string FleetReferenceQuery() {
  const std::string_view names[] = {fleet_rules::kSettingHostsSeries,
                                    fleet_rules::kErrorMedianSeries};
  return Selector(Alternatives(names), "");
}

std::expected<void, std::string> AddGroupAnswer(std::string_view body, SeriesByName& groups,
                                                std::vector<std::string>* warnings) {
  SeriesByName read;
  auto added = ReadQueryAnswer(
      body, ResultType::kVector,
      [&read](AnswerSeries&& series) {
        // The rules aggregate instance and job away: a series with either was scraped from a
        // target (any exporter may name a series so), and is not the rules' figure.
        if (!series.instance.empty() || series.name.empty() || series.labels.contains("job")) {
          return;
        }
        read[series.name].push_back(
            Sample{.labels = std::move(series.labels), .value = series.points.front().second});
      },
      warnings);
  if (!added) return std::unexpected(added.error());
  for (auto& [name, samples] : read) std::ranges::move(samples, std::back_inserter(groups[name]));
  return {};
}

void MergeSeries(InstanceSeries&& from, InstanceSeries& into) {
  for (auto& [instance, by_name] : from) {
    SeriesByName& target = into[instance];
    for (auto& [name, samples] : by_name) {
      auto [it, fresh] = target.try_emplace(name, std::move(samples));
      if (!fresh) std::ranges::move(samples, std::back_inserter(it->second));
    }
  }
}

std::expected<void, std::string> AddQueryAnswer(std::string_view body, InstanceSeries& by_instance,
                                                std::vector<std::string>* warnings) {
  auto read = ReadSeries(body, ResultType::kVector, warnings);
  if (!read) return std::unexpected(read.error());
  MergeSeries(std::move(*read), by_instance);
  return {};
}

std::expected<void, std::string> AddTrendAnswer(std::string_view body, ResultType type,
                                                double seconds, TrendPoints& points,
                                                std::vector<std::string>* warnings) {
  std::map<std::string, std::map<double, SeriesByName>> read;
  auto added = ReadQueryAnswer(
      body, type,
      [&](AnswerSeries&& series) {
        if (series.instance.empty() || series.name.empty()) return;
        // An instant answer's points carry the evaluation time; a range answer's, their step's.
        const auto [at, value] = series.points.front();
        read[series.instance][type == ResultType::kVector ? seconds : at][series.name].push_back(
            Sample{.labels = std::move(series.labels), .value = value});
      },
      warnings);
  if (!added) return std::unexpected(added.error());
  for (auto& [instance, by_time] : read) {
    for (auto& [at, by_name] : by_time) {
      SeriesByName& target = points[instance][at];
      for (auto& [name, samples] : by_name) {
        std::ranges::move(samples, std::back_inserter(target[name]));
      }
    }
  }
  return {};
}

std::map<std::string, std::shared_ptr<const HistoryView>> HistoriesOf(TrendPoints points) {
  std::map<std::string, std::shared_ptr<const HistoryView>> histories;
  for (auto& [instance, by_time] : points) {
    auto view = std::make_shared<HistoryView>();
    for (auto& [at, by_name] : by_time) {  // oldest first
      view->kept.push_back(std::make_shared<const Snapshot>(std::move(by_name), at));
    }
    if (!view->kept.empty()) view->started_seconds = view->kept.front()->seconds();
    histories.emplace(instance, std::move(view));
  }
  return histories;
}

std::map<std::string, Snapshot> SnapshotsOf(InstanceSeries by_instance, double seconds) {
  std::map<std::string, Snapshot> snapshots;
  for (auto& [instance, by_name] : by_instance) {
    // What `rdmascope check` would say of each collector, as far as the series tell it.
    std::map<std::string, CollectorOutcome> outcomes;
    for (const char* name : {"rdmascope_collector_success", "rdmascope_collector_no_data",
                             "rdmascope_probe_attached"}) {
      const auto found = by_name.find(std::string_view(name));
      if (found == by_name.end()) continue;
      const std::string_view family = name;
      const bool success = family == "rdmascope_collector_success";
      const bool no_data = family == "rdmascope_collector_no_data";
      const bool probe = family == "rdmascope_probe_attached";
      for (const Sample& series : found->second) {
        const std::string& collector = series.Label(probe ? "probe" : "collector");
        if (collector.empty()) continue;
        CollectorOutcome& outcome = outcomes[collector];
        if (success && series.value == 0) {
          outcome.failed = true;
          outcome.detail =
              "failed at the last scrape (rdmascope_collector_success 0; "
              "`rdmascope check` on the host says why)";
        }
        if (no_data && series.value == 1 && !outcome.failed) {
          outcome.no_data = true;
          outcome.detail = "no data at the last scrape";
        }
        if (probe && series.value == 0) {
          outcome.probe_error = "rdmascope_probe_attached 0 (the host's log says why)";
        }
      }
    }
    snapshots.emplace(instance, Snapshot(std::move(by_name), seconds, std::move(outcomes)));
  }
  return snapshots;
}

}  // namespace rdmascope::doctor
