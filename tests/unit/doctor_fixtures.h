// Snapshots for the doctor tests, built as the collectors build them (MetricSet families with
// the names and labels of docs/metrics.md): a host where every check fires, and a healthy one.
#pragma once

#include <cctype>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/metric_set.h"
#include "doctor/samples.h"

namespace rdmascope::doctor::testing {

// What the application does, for queues.srq_sizing (--doctor.nodes, --doctor.flows).
inline constexpr double kNodes = 100;
inline constexpr double kFlows = 10;

class Families {
 public:
  Families& Gauge(std::string_view name, const std::vector<Label>& labels, double value) {
    return Add(name, prometheus::MetricType::Gauge, labels, value);
  }
  Families& Counter(std::string_view name, const std::vector<Label>& labels, double value) {
    return Add(name, prometheus::MetricType::Counter, labels, value);
  }
  Families& Histogram(std::string_view name, std::initializer_list<Label> labels, double sum,
                      uint64_t count) {
    set_.AddHistogram({name, "test", prometheus::MetricType::Histogram}, labels, {}, sum, count);
    return *this;
  }
  Snapshot Build(double seconds, std::map<std::string, CollectorOutcome> collectors = {}) {
    return Snapshot(set_.Take(), seconds, std::move(collectors));
  }

 private:
  Families& Add(std::string_view name, prometheus::MetricType type,
                const std::vector<Label>& labels, double value) {
    set_.Add({name, "test", type}, labels, value);
    return *this;
  }
  MetricSet set_;
};

// Every collector ran.
inline std::map<std::string, CollectorOutcome> AllRan() {
  std::map<std::string, CollectorOutcome> ran;
  for (const char* name :
       {"ethtool", "rdma", "resources", "mr", "verbs", "perf", "occupancy", "host", "link"}) {
    ran[name] = {.detail = "test"};
  }
  return ran;
}

// The host collector's series and the device identity and GID table (checks_nic.cc,
// checks_gid.cc, checks_host_tuning.cc): mlx5_0 trained x8 of x16 (bad), two NICs of one board
// on different firmware, no routable RoCE v2 GID, eth2's IRQs and XPS mostly on the other node,
// UC QPs, CQE compression off, THP always, the huge page pool exhausted,
// numa_balancing on, CPUs on powersave, a process with an 8 MiB memlock limit.
inline void AddHostTuning(Families& f, bool bad) {
  for (const char* kind : {"current", "max"}) {
    const bool current = std::string_view(kind) == "current";
    for (const char* end : {"device", "upstream"}) {
      if (current && std::string_view(end) == "upstream") continue;
      const std::vector<Label> link{
          {"device", "mlx5_0"}, {"pci_address", "0000:3b:00.0"}, {"end", end}, {"kind", kind}};
      f.Gauge("rdma_pcie_link_speed_transfers_per_second", link, 16e9);
      f.Gauge("rdma_pcie_link_width_lanes", link, current && bad ? 8 : 16);
    }
  }
  for (const auto& [device, fw] : {std::pair{"mlx5_0", "22.36.1010"},
                                   std::pair{"mlx5_1", bad ? "22.35.1012" : "22.36.1010"}}) {
    f.Gauge("rdma_device_info",
            {{"device", device},
             {"node_type", "CA"},
             {"firmware_version", fw},
             {"board_id", "MT_0000000359"},
             {"hca_type", "MT4125"},
             {"node_guid", ""},
             {"fw_ver", fw}},
            1);
  }
  f.Gauge("rdma_port_gid_info",
          {{"device", "mlx5_0"},
           {"port", "1"},
           {"index", "1"},
           {"gid", "fe80:0000:0000:0000:bace:f6ff:fee4:1a2c"},
           {"type", "RoCE v2"},
           {"netdev", "eth2"}},
          1);
  if (!bad) {
    f.Gauge("rdma_port_gid_info",
            {{"device", "mlx5_0"},
             {"port", "1"},
             {"index", "3"},
             {"gid", "0000:0000:0000:0000:0000:ffff:c0a8:0a0b"},
             {"type", "RoCE v2"},
             {"netdev", "eth2"}},
            1);
  }
  for (const char* mode : {"always", "madvise", "never"}) {
    f.Gauge("rdma_host_transparent_hugepage_mode", {{"mode", mode}},
            std::string_view(mode) == (bad ? "always" : "madvise") ? 1 : 0);
  }
  f.Gauge("rdma_host_hugepages", {{"state", "total"}}, 512);
  f.Gauge("rdma_host_hugepages", {{"state", "free"}}, bad ? 0 : 100);
  f.Gauge("rdma_host_hugepage_size_bytes", {}, 2 * 1024 * 1024);
  f.Gauge("rdma_host_numa_balancing", {}, bad ? 1 : 0);
  f.Gauge("rdma_process_qps",
          {{"device", "mlx5_0"},
           {"pid", "4242"},
           {"comm", "trainer"},
           {"type", bad ? "UC" : "RC"},
           {"state", "RTS"}},
          4);
  f.Gauge("rdma_netdev_private_flag", {{"device", "eth2"}, {"flag", "rx_cqe_compress"}},
          bad ? 0 : 1);
  f.Gauge("rdma_netdev_irq_local_node_ratio", {{"device", "eth2"}}, bad ? 0.25 : 1);
  f.Gauge("rdma_netdev_xps_configured_ratio", {{"device", "eth2"}}, 1);
  f.Gauge("rdma_netdev_xps_local_node_ratio", {{"device", "eth2"}}, bad ? 0.25 : 1);
  f.Gauge("rdma_host_cpu_frequency_governor_cpus",
          {{"governor", bad ? "powersave" : "performance"}}, 8);
  // rdma_cm's default ToS 0 (priority 0) or 106 (DSCP 26, priority 3); ECN's notification
  // point off on priority 3; rdma_ucm not loaded.
  f.Gauge("rdma_host_rdma_cm_configfs", {}, 1);
  f.Gauge("rdma_port_default_roce_tos", {{"device", "mlx5_0"}, {"port", "1"}}, bad ? 0 : 106);
  f.Gauge("rdma_netdev_ecn_enabled", {{"device", "eth2"}, {"point", "np"}, {"priority", "3"}},
          bad ? 0 : 1);
  f.Gauge("rdma_netdev_ecn_enabled", {{"device", "eth2"}, {"point", "rp"}, {"priority", "3"}}, 1);
  f.Gauge("rdma_host_kernel_module_loaded", {{"module", "rdma_ucm"}, {"needed_by", "rdma"}},
          bad ? 0 : 1);
  f.Gauge("rdma_host_kernel_module_loaded", {{"module", "mlx5_ib"}, {"needed_by", "mlx5_core"}}, 1);
  if (bad) {
    f.Gauge("rdma_process_locked_memory_limit_bytes", {{"pid", "31"}, {"comm", "small"}},
            8.0 * (1 << 20));
  }
}

// The link collector's series (checks_link_optics.cc, checks_link_ib.cc): eth2's module
// (mlx5_0/1, a valid table: RX low warning 0.1 mW = -10 dBm, low alarm 0.05 mW = -13.01 dBm,
// temperature 75 / 85 C) with lane 2 at 0.04 mW (-13.98 dBm, bad) or 0.4 mW, at 78 C (bad) or
// 45 C, in ModuleFault with a TEC runaway (bad) or ready; mlx5_1/1 an NDR port at 2X (bad) or 4X
// beside mlx5_2/1 of the same board at 4X, its symbol errors (31 -> 35 in 10 s when bad) a
// post-FEC BER of 4 / (10 s x 2e11 b/s) = 2e-12 (bad) or none.
inline void AddLinkHealth(Families& f, bool bad) {
  const std::vector<Label> eth2{{"device", "mlx5_0"}, {"port", "1"}, {"netdev", "eth2"}};
  const auto with = [](std::vector<Label> labels, const char* name, const char* value) {
    labels.emplace_back(name, value);
    return labels;
  };
  f.Gauge("rdma_link_source_available", with(eth2, "source", "module"), 1);
  f.Gauge("rdma_link_module_thresholds_valid", with(eth2, "quantity", "rx_power"), 1);
  f.Gauge("rdma_link_module_thresholds_valid", with(eth2, "quantity", "temperature"), 1);
  const auto threshold = [&](const char* metric, const char* level, const char* bound,
                             double value) {
    f.Gauge(metric, with(with(eth2, "level", level), "bound", bound), value);
  };
  threshold("rdma_link_module_rx_power_threshold_watts", "warning", "low", 0.1e-3);
  threshold("rdma_link_module_rx_power_threshold_watts", "alarm", "low", 0.05e-3);
  threshold("rdma_link_module_temperature_threshold_celsius", "warning", "high", 75);
  threshold("rdma_link_module_temperature_threshold_celsius", "alarm", "high", 85);
  f.Gauge("rdma_link_module_lane_rx_power_watts", with(eth2, "lane", "1"), 0.5e-3);
  f.Gauge("rdma_link_module_lane_rx_power_watts", with(eth2, "lane", "2"), bad ? 0.04e-3 : 0.4e-3);
  f.Gauge("rdma_link_module_temperature_celsius", eth2, bad ? 78 : 45);
  f.Gauge("rdma_link_module_state", eth2, bad ? 5 : 3);
  f.Gauge("rdma_link_module_state_info",
          with(with(eth2, "state", bad ? "fault" : "ready"), "fault_cause",
               bad ? "tec_runaway" : "none"),
          1);
  const std::vector<Label> ib{{"device", "mlx5_1"}, {"port", "1"}, {"netdev", ""}};
  const std::vector<Label> peer{{"device", "mlx5_2"}, {"port", "1"}, {"netdev", ""}};
  f.Gauge("rdma_link_source_available", with(ib, "source", "ib_counters"), 1);
  f.Gauge("rdma_link_ib_width_lanes", ib, bad ? 2 : 4);
  f.Gauge("rdma_link_ib_lane_rate_bits_per_second", ib, 100e9);
  f.Gauge("rdma_link_ib_width_lanes", peer, 4);
  f.Gauge("rdma_link_ib_lane_rate_bits_per_second", peer, 100e9);
  f.Gauge("rdma_port_rate_bytes_per_second", {{"device", "mlx5_1"}, {"port", "1"}},
          bad ? 25e9 : 50e9);
  f.Gauge("rdma_device_info",
          {{"device", "mlx5_2"},
           {"node_type", "CA"},
           {"firmware_version", "22.36.1010"},
           {"board_id", "MT_0000000359"},
           {"hca_type", "MT4125"},
           {"node_guid", ""},
           {"fw_ver", "22.36.1010"}},
          1);
}

// One host, 10 s apart: `bad` makes every check fire, otherwise everything is healthy.
// Counters are `base` in the earlier snapshot, `base + increase` in the later one.
// The link collector's FEC and speed series (checks_link_fec.cc), eth2 400G over 4 PAM4 lanes
// with RS-FEC over 10 s: bad, a pre-FEC BER of 2e-5 (8.5e6 corrected bits/s at 425e9 b/s),
// 3 uncorrectable codewords and 200G where both ends advertise 400G; healthy, 1e-9, none, 400G.
inline void AddLinkFec(Families& f, bool bad, bool later) {
  const std::vector<Label> port{{"device", "mlx5_0"}, {"port", "1"}, {"netdev", "eth2"}};
  const std::vector<Label> netlink{
      {"device", "mlx5_0"}, {"port", "1"}, {"netdev", "eth2"}, {"source", "netlink"}};
  f.Gauge("rdma_link_line_rate_bits_per_second", port, 425e9);
  f.Gauge("rdma_link_lanes", port, 4);
  f.Gauge("rdma_link_fec_info",
          {{"device", "mlx5_0"}, {"port", "1"}, {"netdev", "eth2"}, {"mode", "rs"}, {"auto", "0"}},
          1);
  f.Counter("rdma_link_fec_corrected_bits_total", netlink,
            1e9 + (later ? (bad ? 8.5e7 : 4250) : 0));
  f.Counter("rdma_link_fec_uncorrectable_codewords_total", netlink, 7 + (later && bad ? 3 : 0));
  f.Gauge("rdma_link_speed_bits_per_second", port, bad ? 200e9 : 400e9);
  f.Gauge("rdma_link_max_speed_bits_per_second", port, 400e9);
  f.Gauge("rdma_link_common_max_speed_bits_per_second", port, 400e9);
}

inline Snapshot Host(bool bad, bool later) {
  const double t = later ? 110 : 100;
  const auto counter = [later](double base, double increase) {
    return later ? base + increase : base;
  };
  Families f;
  // A RoCE port (mlx5_0, netdev eth2) and an InfiniBand port (mlx5_1); port 2 of mlx5_1 is
  // cabled but down when bad, Disabled when healthy.
  f.Gauge("rdma_port_info",
          {{"device", "mlx5_0"},
           {"port", "1"},
           {"link_layer", "Ethernet"},
           {"state", "ACTIVE"},
           {"phys_state", "LinkUp"},
           {"netdev", "eth2"}},
          1);
  f.Gauge("rdma_port_info",
          {{"device", "mlx5_1"},
           {"port", "1"},
           {"link_layer", "InfiniBand"},
           {"state", "ACTIVE"},
           {"phys_state", "LinkUp"},
           {"netdev", ""}},
          1);
  f.Gauge("rdma_port_info",
          {{"device", "mlx5_1"},
           {"port", "2"},
           {"link_layer", "InfiniBand"},
           {"state", bad ? "INIT" : "DOWN"},
           {"phys_state", bad ? "LinkUp" : "Disabled"},
           {"netdev", ""}},
          1);
  // The link collector's link-down events (checks_link_down.cc): eth2 was set down once before
  // the window (admin_down, never counted); when bad, it lost its carrier three times during
  // it, the last for no cable.
  f.Gauge("rdma_link_source_available",
          {{"device", "mlx5_0"}, {"port", "1"}, {"netdev", "eth2"}, {"source", "module"}}, 1);
  f.Counter("rdma_link_down_events_total",
            {{"device", "mlx5_0"},
             {"port", "1"},
             {"netdev", "eth2"},
             {"reason", "admin_down"},
             {"substate", ""}},
            1);
  if (bad && later) {
    f.Counter("rdma_link_down_events_total",
              {{"device", "mlx5_0"},
               {"port", "1"},
               {"netdev", "eth2"},
               {"reason", "no_cable"},
               {"substate", ""}},
              3);
  }
  f.Gauge("rdma_link_last_down_info",
          {{"device", "mlx5_0"},
           {"port", "1"},
           {"netdev", "eth2"},
           {"reason", bad && later ? "no_cable" : "admin_down"},
           {"substate", ""}},
          1);
  f.Gauge("rdma_port_state", {{"device", "mlx5_0"}, {"port", "1"}}, 4);
  f.Gauge("rdma_port_state", {{"device", "mlx5_1"}, {"port", "1"}}, 4);
  f.Gauge("rdma_port_state", {{"device", "mlx5_1"}, {"port", "2"}}, bad ? 2 : 1);
  f.Gauge("rdma_port_physical_state", {{"device", "mlx5_0"}, {"port", "1"}}, 5);
  f.Gauge("rdma_port_physical_state", {{"device", "mlx5_1"}, {"port", "1"}}, 5);
  f.Gauge("rdma_port_physical_state", {{"device", "mlx5_1"}, {"port", "2"}}, bad ? 5 : 3);
  f.Gauge("rdma_device_numa_node", {{"device", "mlx5_0"}}, 1);
  f.Counter("rdma_port_symbol_errors_total", {{"device", "mlx5_1"}, {"port", "1"}},
            counter(bad ? 31 : 2, bad ? 4 : 0));
  f.Counter("rdma_port_link_downed_total", {{"device", "mlx5_1"}, {"port", "1"}},
            counter(1, bad ? 1 : 0));
  f.Counter("rdma_port_transmit_wait_total", {{"device", "mlx5_1"}, {"port", "1"}},
            counter(bad ? 5000 : 10, 0));
  f.Gauge("rdma_port_stat_saturated",
          {{"device", "mlx5_1"}, {"port", "1"}, {"counter", "symbol_error"}}, bad ? 1 : 0);
  f.Gauge("rdma_port_stat_saturated",
          {{"device", "mlx5_1"}, {"port", "1"}, {"counter", "port_xmit_data"}}, 1);
  f.Counter("rdma_port_hw_counter_total",
            {{"device", "mlx5_0"}, {"port", "1"}, {"counter", "local_ack_timeout_err"}},
            counter(1000, bad ? 150 : 5));
  f.Counter("rdma_port_hw_counter_total",
            {{"device", "mlx5_0"}, {"port", "1"}, {"counter", "packet_seq_err"}},
            counter(20, bad ? 10 : 0));
  f.Counter("rdma_port_hw_counter_total",
            {{"device", "mlx5_0"}, {"port", "1"}, {"counter", "out_of_buffer"}},
            counter(7, bad ? 30 : 0));
  // RNR NAKs received: the peers starve (queues.peer_receive_starvation).
  f.Counter("rdma_port_hw_counter_total",
            {{"device", "mlx5_0"}, {"port", "1"}, {"counter", "rnr_nak_retry_err"}},
            counter(3, bad ? 12 : 0));
  f.Gauge("rdma_port_active_mtu_bytes", {{"device", "mlx5_0"}, {"port", "1"}}, bad ? 1024 : 4096);
  f.Gauge("rdma_port_max_mtu_bytes", {{"device", "mlx5_0"}, {"port", "1"}}, 4096);
  // The RoCE netdev and a management NIC whose CRC errors are not RDMA's.
  f.Gauge("rdma_netdev_mtu_bytes", {{"device", "eth2"}}, bad ? 1500 : 9000);
  f.Gauge("rdma_netdev_mtu_bytes", {{"device", "eno1"}}, 1500);
  f.Counter("rdma_netdev_crc_errors_total", {{"device", "eth2"}}, counter(3, bad ? 2 : 0));
  f.Counter("rdma_netdev_crc_errors_total", {{"device", "eno1"}}, counter(3, 50));
  f.Gauge("rdma_netdev_pfc_enabled", {{"device", "eth2"}, {"priority", "3"}}, bad ? 0 : 1);
  f.Gauge("rdma_netdev_pfc_enabled", {{"device", "eth2"}, {"priority", "0"}}, 0);
  // eth2 trusts DSCP; RoCE's DSCP 26 is mapped to priority 0 (bad) or 3 (healthy).
  f.Gauge("rdma_netdev_dscp_trust", {{"device", "eth2"}}, 1);
  f.Gauge("rdma_netdev_dscp_priority_info",
          {{"device", "eth2"}, {"dscp", "26"}, {"priority", bad ? "0" : "3"}}, 1);
  f.Counter("rdma_netdev_pause_frames_total",
            {{"device", "eth2"}, {"direction", "rx"}, {"priority", "global"}},
            counter(0, bad ? 40 : 0));
  f.Counter("rdma_netdev_pause_storm_events_total", {{"device", "eth2"}, {"level", "error"}},
            counter(0, bad ? 1 : 0));
  // eth2 also carries IP traffic, 200k packets/s each way (ethtool rx_packets / tx_packets):
  // where its Ethernet knobs (coalescing, CQE compression, XPS) matter.
  for (const char* stat : {"rx_packets", "tx_packets"}) {
    f.Gauge("rdma_ethtool_stat", {{"device", "eth2"}, {"stat", stat}}, counter(1e9, 2e6));
  }
  f.Gauge("rdma_netdev_coalesce_usecs", {{"device", "eth2"}, {"direction", "rx"}}, bad ? 0 : 8);
  f.Gauge("rdma_netdev_coalesce_adaptive", {{"device", "eth2"}, {"direction", "rx"}}, 0);
  // Queues of one process: CQ 31 entries fed by 128 WRs (bad) or 256 by 128 (healthy).
  const std::vector<Label> cq{
      {"device", "mlx5_0"}, {"pid", "4242"}, {"comm", "trainer"}, {"cq", "3"}};
  f.Gauge("rdma_cq_capacity_entries", cq, bad ? 31 : 256);
  f.Gauge("rdma_cq_feeding_wrs", cq, 128);
  const std::vector<Label> srq{
      {"device", "mlx5_0"}, {"pid", "4242"}, {"comm", "trainer"}, {"srq", "1"}};
  // Sized for kNodes x kFlows x 1.2 = 1200 when healthy; 1024 deep when bad.
  f.Gauge("rdma_srq_max_wrs", srq, bad ? 1024 : 2048);
  f.Gauge("rdma_srq_limit_wrs", srq, bad ? 0 : 1200);
  // RC send queues on a 100 Gb/s port: the shallowest 64 WRs (bad), 256 (healthy) against the
  // 245 that 80 us x 12.5 GB/s / 4 KiB needs; 4 connected QPs on 64 CPUs (bad) or 2.
  f.Gauge("rdma_port_rate_bytes_per_second", {{"device", "mlx5_0"}, {"port", "1"}}, 12.5e9);
  f.Gauge("rdma_process_qp_min_send_wrs",
          {{"device", "mlx5_0"}, {"pid", "4242"}, {"comm", "trainer"}}, bad ? 64 : 256);
  // Two such QPs (bad: 128 in flight) or four (healthy: 1024).
  f.Gauge("rdma_process_qp_total_send_wrs",
          {{"device", "mlx5_0"}, {"pid", "4242"}, {"comm", "trainer"}}, bad ? 128 : 1024);
  f.Gauge("rdma_host_online_cpus", {}, bad ? 64 : 2);
  // Registrations and pinned memory.
  const std::vector<Label> proc{{"pid", "4242"}, {"comm", "trainer"}};
  // Registration churn: 500/s, 98% deregistered again (bad); none in the window (healthy).
  f.Counter("rdma_mr_registrations_total", proc, counter(200, bad ? 5000 : 0));
  f.Counter("rdma_mr_deregistrations_total", proc, counter(150, bad ? 4900 : 0));
  f.Counter("rdma_mr_length_not_page_multiple_total", proc, bad ? 50 : 0);
  f.Counter("rdma_mr_not_hugepage_aligned_bytes_total", proc, bad ? 3.0 * (1 << 30) : 0);
  f.Histogram("rdma_mr_registration_size_bytes", {{"comm", "trainer"}}, 4.0 * (1 << 30), 200);
  f.Gauge("rdma_process_pinned_bytes", proc, bad ? 60.0 * (1 << 20) : 4.0 * (1 << 20));
  f.Gauge("rdma_process_locked_memory_limit_bytes", proc, 64.0 * (1 << 20));
  f.Gauge("rdma_process_remote_numa_thread_ratio",
          {{"pid", "4242"}, {"comm", "trainer"}, {"device", "mlx5_0"}}, bad ? 0.75 : 0);
  AddHostTuning(f, bad);
  AddLinkHealth(f, bad);
  AddLinkFec(f, bad, later);
  // The exporter itself.
  f.Gauge("rdmascope_probe_attached", {{"probe", "mr"}}, 1);
  f.Gauge("rdmascope_probe_attached", {{"probe", "verbs"}}, 1);
  return f.Build(t, AllRan());
}

// GitHub-style anchors of the runbook's "## " headings, as tests/rules/check_rules.py reads them.
inline std::set<std::string> RunbookAnchors(const std::string& runbook) {
  std::ifstream in(runbook);
  std::set<std::string> anchors;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with("## ")) continue;
    std::string anchor;
    for (char c : line.substr(3)) {
      if (std::isalnum(static_cast<unsigned char>(c))) {
        anchor += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      } else if (c == ' ' || c == '-') {
        anchor += '-';
      }
    }
    anchors.insert(anchor);
  }
  return anchors;
}

}  // namespace rdmascope::doctor::testing
