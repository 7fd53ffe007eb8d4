// Fleet drift (doctor/fleet_drift.h): fleets of snapshots built by hand, as doctor --prometheus
// builds them from a Prometheus, where one host differs in one setting. The finding is on that
// host and no other; a tie and a fleet of two give no drift; an idle fleet does not flag a host
// for one error; a target that is down is reported, and left out of the comparisons.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "doctor/fleet_drift.h"
#include "doctor/fleet_rules.h"
#include "doctor/report.h"
#include "unit/doctor_fixtures.h"

namespace rdmascope::doctor {
namespace {

using testing::Families;

const std::string kFixtures = RDMASCOPE_FIXTURES;
constexpr double kWindow = 300;  // doctor --prometheus' default --window

// One host of the fleet: a ConnectX-6 Dx (board MT_0000000359) with its RoCE port mlx5_0/1 on
// eth2, set up as NVIDIA's lossless RoCE guide has it. Counters: their increase over the window.
struct Spec {
  std::string cluster;
  std::string cluster_label = "cluster";  // the target label naming it
  bool up = true;
  bool rdma = true;  // exports its RDMA device
  std::string firmware = "22.36.1010";
  std::string driver_version = "24.10-1.1.4";
  double link_gbps = 100;
  double pcie_gts = 16;
  double pcie_lanes = 16;
  double netdev_mtu = 9000;
  double active_mtu = 4096;
  std::vector<int> pfc = {3};
  bool dscp_trust = true;
  std::string dscp26_priority = "3";
  double tos = 106;
  bool ecn = true;
  double rx_usecs = 8;
  bool adaptive = true;
  bool cqe_compress = true;
  // The pluggable module of mlx5_0/1 (rdma_link_module_info).
  std::string module_vendor = "ACME";
  std::string module_part = "QDD-400G-FR4";
  std::string module_firmware = "7.2";
  // increases over the window
  double packets = 3e8;  // 1e6/s through the port
  double crc = 0, symbol = 0, out_of_sequence = 0, oos_drops = 0, cnps = 3000, pause = 0;
  bool module_missing = false;
  // The fleet rules run in that Prometheus: `now` holds their rows, as the rules compute them
  // from the series above, except where told otherwise below (to show which ones doctor read).
  bool recorded = false;
  std::string recorded_firmware;  // empty: `firmware`
  std::string recorded_coalesce;  // not empty: every coalescing row's setting_value
  double recorded_symbol = -1;    // per second; below 0: from the counters
};

// The rows rdma:fleet_setting:value and rdma:fleet_error_rate:rate5m hold for one host of
// `spec` (rules/rdmascope.fleet.rules.yml; rules/tests/fleet_drift.rules.test.yml checks the
// rule's side on the same kind of host).
void AddRecorded(Families& f, const Spec& spec,
                 const std::function<std::vector<Label>(std::vector<Label>)>& labels) {
  const auto setting = [&](std::vector<Label> object, const std::string& name,
                           const std::string& value, double sample = 1) {
    object.insert(object.end(), {{"board_id", "MT_0000000359"},
                                 {"hca_type", "MT4125"},
                                 {"setting", name},
                                 {"setting_value", value}});
    f.Gauge("rdma:fleet_setting:value", labels(object), sample);
  };
  const auto number = [](double value) { return fleet_rules::PromNumber(value); };
  const std::vector<Label> device{{"device", "mlx5_0"}};
  const std::vector<Label> port{{"device", "mlx5_0"}, {"port", "1"}};
  const std::vector<Label> eth2{{"device", "eth2"}};
  setting(device, "firmware_version",
          spec.recorded_firmware.empty() ? spec.firmware : spec.recorded_firmware);
  setting(eth2, "driver_version", "mlx5_core " + spec.driver_version);
  setting(port, "link_rate_gbps", number(spec.link_gbps), spec.link_gbps);
  setting(device, "pcie_speed_gts", number(spec.pcie_gts), spec.pcie_gts);
  setting(device, "pcie_width_lanes", number(spec.pcie_lanes), spec.pcie_lanes);
  setting(port, "active_mtu_bytes", number(spec.active_mtu));
  const std::string module = spec.module_vendor + " " + spec.module_part;
  setting(port, "module_type", module);
  setting(port, "module_firmware", module + " " + spec.module_firmware);
  setting(port, "default_roce_tos", number(spec.tos));
  setting(eth2, "netdev_mtu_bytes", number(spec.netdev_mtu));
  for (int priority = 0; priority < 8; ++priority) {
    const bool on = std::find(spec.pfc.begin(), spec.pfc.end(), priority) != spec.pfc.end();
    setting(eth2, "pfc_priority_" + std::to_string(priority), on ? "1" : "0");
  }
  setting(eth2, "dscp_trust", spec.dscp_trust ? "1" : "0");
  if (spec.dscp_trust) {
    setting(eth2, "dscp_26_priority", spec.dscp26_priority);
    setting(eth2, "dscp_48_priority", "6");
  }
  for (const char* point : {"np", "rp"}) {
    setting(eth2, std::string("ecn_") + point + "_priority_3", spec.ecn ? "1" : "0");
  }
  for (const char* direction : {"rx", "tx"}) {
    const std::string usecs = number(spec.rx_usecs);
    const std::string adaptive = spec.adaptive ? "1" : "0";
    const std::string& hostile = spec.recorded_coalesce;
    setting(eth2, std::string("coalesce_usecs_") + direction, hostile.empty() ? usecs : hostile);
    setting(eth2, std::string("coalesce_adaptive_") + direction,
            hostile.empty() ? adaptive : hostile);
  }
  setting(eth2, "rx_cqe_compress", spec.cqe_compress ? "1" : "0");
  const auto rate = [&](std::vector<Label> object, const char* error, double per_second) {
    object.insert(object.end(),
                  {{"board_id", "MT_0000000359"}, {"hca_type", "MT4125"}, {"error", error}});
    f.Gauge("rdma:fleet_error_rate:rate5m", labels(object), per_second);
  };
  rate(eth2, "crc", spec.crc / kWindow);
  rate(eth2, "symbol", spec.recorded_symbol >= 0 ? spec.recorded_symbol : spec.symbol / kWindow);
  rate(eth2, "pause", spec.pause / kWindow);
  rate(port, "out_of_sequence", (spec.out_of_sequence + spec.oos_drops) / kWindow);
  rate(port, "cnp", spec.cnps / kWindow);
}

// `window`: seconds between the two evaluations, over which the counters rise as the spec says.
Snapshot Build(const Spec& spec, bool later, double window = kWindow) {
  Families f;
  // Target labels, as Prometheus adds them to every series of the target.
  const auto labels = [&spec](std::vector<Label> own) {
    own.emplace_back("job", "rdmascope");
    if (!spec.cluster.empty()) own.emplace_back(spec.cluster_label, spec.cluster);
    return own;
  };
  f.Gauge("up", labels({}), spec.up ? 1 : 0);
  if (!spec.up) return f.Build(later ? window : 0);  // its series went stale
  f.Gauge("rdmascope_collector_success", labels({{"collector", "rdma"}}), 1);
  f.Gauge("rdma_host_kernel_module_loaded",
          labels({{"module", "mlx5_ib"}, {"needed_by", "mlx5_core"}}), spec.module_missing ? 0 : 1);
  if (!spec.rdma) return f.Build(later ? window : 0);
  const double at = later ? 1 : 0;  // counters: base, or base + increase
  f.Gauge("rdma_device_info",
          labels({{"device", "mlx5_0"},
                  {"node_type", "CA"},
                  {"firmware_version", spec.firmware},
                  {"board_id", "MT_0000000359"},
                  {"hca_type", "MT4125"},
                  {"node_guid", ""},
                  {"fw_ver", spec.firmware}}),
          1);
  const std::vector<Label> port{{"device", "mlx5_0"}, {"port", "1"}};
  f.Gauge("rdma_port_info",
          labels({{"device", "mlx5_0"},
                  {"port", "1"},
                  {"link_layer", "Ethernet"},
                  {"state", "ACTIVE"},
                  {"phys_state", "LinkUp"},
                  {"netdev", "eth2"}}),
          1);
  f.Gauge("rdma_port_rate_bytes_per_second", labels(port), spec.link_gbps * 1e9 / 8);
  f.Gauge("rdma_port_active_mtu_bytes", labels(port), spec.active_mtu);
  f.Gauge("rdma_link_module_info",
          labels({{"device", "mlx5_0"},
                  {"port", "1"},
                  {"netdev", "eth2"},
                  {"type", "QSFP-DD"},
                  {"standard", "CMIS"},
                  {"vendor", spec.module_vendor},
                  {"oui", "00:02:c9"},
                  {"part", spec.module_part},
                  {"serial", "S1"},
                  {"revision", "A"},
                  {"media", "single-mode fiber"},
                  {"wavelength_nm", "1311"},
                  {"firmware", spec.module_firmware}}),
          1);
  f.Gauge("rdma_pcie_link_speed_transfers_per_second",
          labels({{"device", "mlx5_0"},
                  {"pci_address", "0000:3b:00.0"},
                  {"end", "device"},
                  {"kind", "current"}}),
          spec.pcie_gts * 1e9);
  f.Gauge("rdma_pcie_link_width_lanes",
          labels({{"device", "mlx5_0"},
                  {"pci_address", "0000:3b:00.0"},
                  {"end", "device"},
                  {"kind", "current"}}),
          spec.pcie_lanes);
  f.Gauge("rdma_netdev_info",
          labels({{"device", "eth2"},
                  {"driver", "mlx5_core"},
                  {"driver_version", spec.driver_version},
                  {"firmware_version", spec.firmware},
                  {"bus_info", "0000:3b:00.0"}}),
          1);
  const std::vector<Label> eth2{{"device", "eth2"}};
  f.Gauge("rdma_netdev_mtu_bytes", labels(eth2), spec.netdev_mtu);
  for (int priority = 0; priority < 8; ++priority) {
    const std::string p = std::to_string(priority);
    const bool on = std::find(spec.pfc.begin(), spec.pfc.end(), priority) != spec.pfc.end();
    f.Gauge("rdma_netdev_pfc_enabled", labels({{"device", "eth2"}, {"priority", p}}), on ? 1 : 0);
  }
  f.Gauge("rdma_netdev_dscp_trust", labels(eth2), spec.dscp_trust ? 1 : 0);
  if (spec.dscp_trust) {
    f.Gauge("rdma_netdev_dscp_priority_info",
            labels({{"device", "eth2"}, {"dscp", "26"}, {"priority", spec.dscp26_priority}}), 1);
    f.Gauge("rdma_netdev_dscp_priority_info",
            labels({{"device", "eth2"}, {"dscp", "48"}, {"priority", "6"}}), 1);
  }
  f.Gauge("rdma_host_rdma_cm_configfs", labels({}), 1);
  f.Gauge("rdma_port_default_roce_tos", labels(port), spec.tos);
  for (const char* point : {"np", "rp"}) {
    f.Gauge("rdma_netdev_ecn_enabled",
            labels({{"device", "eth2"}, {"point", point}, {"priority", "3"}}), spec.ecn ? 1 : 0);
  }
  for (const char* direction : {"rx", "tx"}) {
    f.Gauge("rdma_netdev_coalesce_usecs", labels({{"device", "eth2"}, {"direction", direction}}),
            spec.rx_usecs);
    f.Gauge("rdma_netdev_coalesce_adaptive", labels({{"device", "eth2"}, {"direction", direction}}),
            spec.adaptive ? 1 : 0);
  }
  f.Gauge("rdma_netdev_private_flag", labels({{"device", "eth2"}, {"flag", "rx_cqe_compress"}}),
          spec.cqe_compress ? 1 : 0);
  // Counters.
  f.Counter("rdma_port_packets_received_total", labels(port), 1e9 + at * spec.packets / 2);
  f.Counter("rdma_port_packets_transmitted_total", labels(port), 1e9 + at * spec.packets / 2);
  f.Counter("rdma_netdev_crc_errors_total", labels(eth2), 5 + at * spec.crc);
  f.Counter("rdma_netdev_symbol_errors_total", labels(eth2), 7 + at * spec.symbol);
  f.Counter("rdma_netdev_pause_frames_total",
            labels({{"device", "eth2"}, {"direction", "rx"}, {"priority", "3"}}),
            100 + at * spec.pause);
  f.Counter("rdma_port_hw_counter_total",
            labels({{"device", "mlx5_0"}, {"port", "1"}, {"counter", "out_of_sequence"}}),
            2 + at * spec.out_of_sequence);
  f.Counter("rdma_port_hw_counter_total",
            labels({{"device", "mlx5_0"}, {"port", "1"}, {"counter", "res_oos_drop_count"}}),
            at * spec.oos_drops);
  f.Counter("rdma_port_hw_counter_total",
            labels({{"device", "mlx5_0"}, {"port", "1"}, {"counter", "np_cnp_sent"}}),
            118 + at * spec.cnps);
  if (spec.recorded && later) AddRecorded(f, spec, labels);
  return f.Build(later ? window : 0);
}

std::string Instance(size_t i) { return "host-" + std::to_string(i) + ":9879"; }

struct Fleet {
  std::map<std::string, Snapshot> now, before;
};

// `hosts` hosts of the default spec, `change` applied to each (by index).
Fleet MakeFleet(size_t hosts, const std::function<void(size_t, Spec&)>& change = {},
                double window = kWindow) {
  Fleet fleet;
  for (size_t i = 0; i < hosts; ++i) {
    Spec spec;
    if (change) change(i, spec);
    fleet.now.emplace(Instance(i), Build(spec, true, window));
    fleet.before.emplace(Instance(i), Build(spec, false, window));
  }
  return fleet;
}

std::vector<Finding> Drift(const Fleet& fleet, bool window = true,
                           const DoctorOptions& options = {}) {
  return FleetDrift(fleet.now, window ? fleet.before : std::map<std::string, Snapshot>{}, options);
}

std::string ScopeValue(const Finding& finding, const std::string& key) {
  for (const auto& [name, value] : finding.scope) {
    if (name == key) return value;
  }
  return "";
}

// The findings of `id` that ask for attention (info and above; ok and skip left out).
std::vector<const Finding*> Flagged(const std::vector<Finding>& findings, const std::string& id) {
  std::vector<const Finding*> flagged;
  for (const Finding& finding : findings) {
    if (finding.id == id && finding.severity != Severity::kOk &&
        finding.severity != Severity::kSkip) {
      flagged.push_back(&finding);
    }
  }
  return flagged;
}

std::string Dump(const std::vector<Finding>& findings) { return RenderJson(findings, {}); }

// The one ok finding of `id` for the whole group (instance "*"), nullptr when there is none:
// the check ran and found nobody apart.
const Finding* GroupOk(const std::vector<Finding>& findings, const std::string& id) {
  const Finding* ok = nullptr;
  for (const Finding& finding : findings) {
    if (finding.id != id || finding.severity != Severity::kOk) continue;
    EXPECT_EQ(ok, nullptr) << "one ok per group: " << id;
    EXPECT_EQ(ScopeValue(finding, "instance"), "*");
    ok = &finding;
  }
  return ok;
}

// Every check of a healthy fleet: one ok for the group, none per host, nothing flagged.
TEST(FleetDrift, AHealthyFleetGivesOneOkPerCheckAndGroup) {
  const auto findings = Drift(MakeFleet(5));
  std::map<std::string, int> ok;
  for (const Finding& finding : findings) {
    EXPECT_EQ(finding.area, "fleet");
    EXPECT_EQ(finding.scope.front().first, "instance") << finding.id;
    EXPECT_EQ(finding.severity, Severity::kOk) << Dump(findings);
    ++ok[finding.id];
  }
  for (const char* id : {"fleet.firmware",
                         "fleet.driver",
                         "fleet.link_rate",
                         "fleet.pcie_speed",
                         "fleet.pcie_width",
                         "fleet.netdev_mtu",
                         "fleet.active_mtu",
                         "fleet.pfc",
                         "fleet.dscp",
                         "fleet.default_tos",
                         "fleet.ecn",
                         "fleet.coalescing",
                         "fleet.cqe_compression",
                         "fleet.module",
                         "fleet.crc_errors",
                         "fleet.symbol_errors",
                         "fleet.out_of_sequence",
                         "fleet.congestion_notifications",
                         "fleet.pause_frames",
                         "fleet.host_down",
                         "fleet.no_rdma_device"}) {
    EXPECT_EQ(ok[id], 1) << id << " " << Dump(findings);
  }
  EXPECT_EQ(ok.size(), 21U);
  const Finding& firmware = *std::find_if(
      findings.begin(), findings.end(), [](const Finding& f) { return f.id == "fleet.firmware"; });
  EXPECT_EQ(ScopeValue(firmware, "instance"), "*");
  EXPECT_EQ(ScopeValue(firmware, "board_id"), "MT_0000000359");
  EXPECT_NE(firmware.observed.find("all 5 hosts"), std::string::npos) << firmware.observed;
}

struct DriftCase {
  std::string id;
  std::function<void(Spec&)> change;
  Severity severity;
  std::string observed;  // part of the outlier's observed
  std::string expected;  // part of its expected: the majority value
  std::string fix;       // part of its fix ("" : none)
};

class FleetDriftOneHost : public ::testing::TestWithParam<DriftCase> {};

// Five hosts, host-2 differs: the finding is on host-2 and on no other, names the majority and
// how many hosts have it, and the fix.
TEST_P(FleetDriftOneHost, IsReportedOnThatHostOnly) {
  const DriftCase& drift = GetParam();
  const auto findings = Drift(MakeFleet(5, [&drift](size_t i, Spec& spec) {
    if (i == 2) drift.change(spec);
  }));
  const auto flagged = Flagged(findings, drift.id);
  ASSERT_EQ(flagged.size(), 1U) << Dump(findings);
  const Finding& finding = *flagged.front();
  EXPECT_EQ(finding.severity, drift.severity) << Dump(findings);
  EXPECT_EQ(finding.scope.front(), (std::pair<std::string, std::string>{"instance", Instance(2)}));
  if (drift.id != "fleet.host_down" && drift.id != "fleet.no_rdma_device") {
    ASSERT_GE(finding.scope.size(), 2U);
    EXPECT_EQ(finding.scope[1], (std::pair<std::string, std::string>{"device", "mlx5_0"}));
  }
  EXPECT_NE(finding.observed.find(drift.observed), std::string::npos) << finding.observed;
  EXPECT_NE(finding.expected.find(drift.expected), std::string::npos) << finding.expected;
  EXPECT_NE(finding.fix.find(drift.fix), std::string::npos) << finding.fix;
  EXPECT_FALSE(finding.advice.empty());
  EXPECT_TRUE(finding.runbook.starts_with("docs/runbook.md#rdma")) << finding.runbook;
  // Nothing else flagged but what follows from the host's difference.
  for (const Finding& other : findings) {
    if (other.severity == Severity::kOk || other.severity == Severity::kSkip) continue;
    EXPECT_EQ(ScopeValue(other, "instance"), Instance(2)) << Dump(findings);
  }
}

const DriftCase kDrifts[] = {
    {"fleet.firmware", [](Spec& s) { s.firmware = "22.35.1012"; }, Severity::kWarn,
     "firmware 22.35.1012", "firmware 22.36.1010, as 4 of the 5 hosts with board_id MT_0000000359",
     "mlxfwmanager -u -d 0000:3b:00.0 -i IMAGE"},
    {"fleet.driver", [](Spec& s) { s.driver_version = "23.10-0.5.5"; }, Severity::kWarn,
     "driver mlx5_core 23.10-0.5.5", "driver mlx5_core 24.10-1.1.4, as 4 of the 5 hosts", ""},
    {"fleet.link_rate", [](Spec& s) { s.link_gbps = 50; }, Severity::kWarn, "link rate 50 Gb/s",
     "link rate 100 Gb/s, as 4 of the 5 hosts with board_id MT_0000000359", ""},
    {"fleet.pcie_speed", [](Spec& s) { s.pcie_gts = 8; }, Severity::kWarn, "PCIe link speed 8 GT/s",
     "PCIe link speed 16 GT/s, as 4 of the 5", ""},
    {"fleet.pcie_width", [](Spec& s) { s.pcie_lanes = 8; }, Severity::kWarn, "PCIe link width x8",
     "PCIe link width x16, as 4 of the 5", ""},
    {"fleet.netdev_mtu", [](Spec& s) { s.netdev_mtu = 1500; }, Severity::kWarn, "netdev MTU 1500",
     "netdev MTU 9000, as 4 of the 5", "ip link set dev eth2 mtu 9000"},
    {"fleet.active_mtu", [](Spec& s) { s.active_mtu = 1024; }, Severity::kWarn, "active MTU 1024",
     "active MTU 4096, as 4 of the 5", ""},
    {"fleet.pfc", [](Spec& s) { s.pfc = {}; }, Severity::kWarn, "PFC-enabled priorities none",
     "PFC-enabled priorities 3, as 4 of the 5", "mlnx_qos -i eth2 --pfc 0,0,0,1,0,0,0,0"},
    {"fleet.dscp", [](Spec& s) { s.dscp_trust = false; }, Severity::kWarn, "trust pcp",
     "trust dscp, DSCP 26 on priority 3, DSCP 48 on priority 6, as 4 of the 5",
     "mlnx_qos -i eth2 --trust dscp && dcb app replace dev eth2 dscp-prio 26:3 48:6"},
    {"fleet.dscp", [](Spec& s) { s.dscp26_priority = "0"; }, Severity::kWarn,
     "DSCP 26 on priority 0", "DSCP 26 on priority 3",
     "dcb app replace dev eth2 dscp-prio 26:3 48:6"},
    {"fleet.default_tos", [](Spec& s) { s.tos = 0; }, Severity::kWarn, "default RoCE ToS 0",
     "default RoCE ToS 106, as 4 of the 5",
     "echo 106 > /sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos"},
    {"fleet.ecn", [](Spec& s) { s.ecn = false; }, Severity::kWarn,
     "notification point on priorities none, reaction point on none", "on priorities 3",
     "echo 1 > /sys/class/net/eth2/ecn/roce_np/enable/3 && "
     "echo 1 > /sys/class/net/eth2/ecn/roce_rp/enable/3"},
    {"fleet.coalescing", [](Spec& s) { s.adaptive = false; }, Severity::kInfo, "adaptive-rx off",
     "adaptive-rx on", "ethtool -C eth2 adaptive-rx on adaptive-tx on"},
    {"fleet.cqe_compression", [](Spec& s) { s.cqe_compress = false; }, Severity::kInfo,
     "rx_cqe_compress off", "rx_cqe_compress on, as 4 of the 5",
     "ethtool --set-priv-flags eth2 rx_cqe_compress on"},
    // Issue 40: a module firmware of the fleet's part that the others do not run.
    {"fleet.module", [](Spec& s) { s.module_firmware = "7.1"; }, Severity::kInfo,
     "ACME QDD-400G-FR4 7.1", "ACME QDD-400G-FR4 7.2, as 4 of the 5", ""},
    // 10 symbol errors/s where the peers count none: the median is 0, the floor 1/s.
    {"fleet.symbol_errors", [](Spec& s) { s.symbol = 3000; }, Severity::kWarn, "10 symbol errors/s",
     "at most 10x the median of the 5 ports on 5 hosts", ""},
    {"fleet.crc_errors", [](Spec& s) { s.crc = 3000; }, Severity::kWarn, "10 CRC errors/s",
     "or at most 1 CRC errors/s", ""},
    // bnxt_re's res_oos_drop_count counts as out-of-sequence, as in the fleet rule.
    {"fleet.out_of_sequence", [](Spec& s) { s.oos_drops = 30000; }, Severity::kWarn,
     "100 out-of-sequence packets/s", "or at most 10 out-of-sequence packets/s", ""},
    // 10 CNPs/s on the peers, 1,000/s here: 100x the median.
    {"fleet.congestion_notifications", [](Spec& s) { s.cnps = 300000; }, Severity::kWarn,
     "1000 ECN marks and CNPs/s, 100x the median", "", ""},
    {"fleet.pause_frames", [](Spec& s) { s.pause = 60000; }, Severity::kWarn, "200 pause frames/s",
     "or at most 100 pause frames/s", ""},
    {"fleet.host_down", [](Spec& s) { s.up = false; }, Severity::kCrit,
     "up 0: Prometheus could not scrape it", "up 1, as 4 of the 5 targets",
     "systemctl restart rdmascope"},
    {"fleet.no_rdma_device", [](Spec& s) { s.rdma = false; }, Severity::kWarn,
     "exports no RDMA device", "as 4 of the 5 answering hosts", ""},
    {"fleet.no_rdma_device",
     [](Spec& s) {
       s.rdma = false;
       s.module_missing = true;
     },
     Severity::kWarn, "exports no RDMA device", "as 4 of the 5", "modprobe -a mlx5_ib"},
};

INSTANTIATE_TEST_SUITE_P(Drifts, FleetDriftOneHost, ::testing::ValuesIn(kDrifts),
                         [](const ::testing::TestParamInfo<DriftCase>& param) {
                           return param.param.id.substr(6) + "_" + std::to_string(param.index);
                         });

TEST(FleetDrift, ATieIsNoDrift) {
  const auto findings = Drift(MakeFleet(4, [](size_t i, Spec& spec) {
    if (i % 2 == 1) spec.firmware = "22.35.1012";
  }));
  const auto flagged = Flagged(findings, "fleet.firmware");
  ASSERT_EQ(flagged.size(), 1U) << Dump(findings);
  EXPECT_EQ(flagged.front()->severity, Severity::kInfo);
  EXPECT_EQ(ScopeValue(*flagged.front(), "instance"), "*");
  EXPECT_NE(flagged.front()->observed.find("no majority"), std::string::npos)
      << flagged.front()->observed;
  EXPECT_NE(flagged.front()->observed.find("22.35.1012 on 2 hosts, 22.36.1010 on 2 hosts"),
            std::string::npos)
      << flagged.front()->observed;
}

// As the rules judge two hosts: two values of one setting are a tie (no majority, no drift), and
// of two ports neither can be 10 times their median (at most twice it): no outlier. One host
// alone has no peers.
TEST(FleetDrift, TwoHostsAreJudgedAsTheRulesJudgeThem) {
  const auto findings = Drift(MakeFleet(2, [](size_t i, Spec& spec) {
    if (i == 1) {
      spec.firmware = "22.35.1012";
      spec.netdev_mtu = 1500;
      spec.symbol = 3000;
    }
  }));
  for (const Finding& finding : findings) {
    EXPECT_TRUE(finding.severity == Severity::kOk || finding.severity == Severity::kInfo)
        << Dump(findings);
  }
  for (const char* id : {"fleet.firmware", "fleet.netdev_mtu"}) {
    const auto flagged = Flagged(findings, id);
    ASSERT_EQ(flagged.size(), 1U) << id << Dump(findings);
    EXPECT_EQ(flagged.front()->severity, Severity::kInfo);
    EXPECT_NE(flagged.front()->observed.find("no majority"), std::string::npos)
        << flagged.front()->observed;
  }
  EXPECT_TRUE(Flagged(findings, "fleet.symbol_errors").empty()) << Dump(findings);
  ASSERT_NE(GroupOk(findings, "fleet.symbol_errors"), nullptr) << Dump(findings);

  const auto alone = Drift(MakeFleet(1, [](size_t, Spec& spec) { spec.symbol = 3000; }));
  for (const char* id : {"fleet.firmware", "fleet.netdev_mtu", "fleet.symbol_errors"}) {
    const auto flagged = Flagged(alone, id);
    ASSERT_EQ(flagged.size(), 1U) << id << Dump(alone);
    EXPECT_EQ(flagged.front()->severity, Severity::kInfo);
    EXPECT_NE(flagged.front()->observed.find("no peers"), std::string::npos)
        << flagged.front()->observed;
  }
}

// An idle fleet (no errors) and one host with one error in five minutes: the median is 0, so
// any error is "far above" it; the floor (1/s) keeps it quiet.
TEST(FleetDrift, OneErrorInAnIdleFleetIsNoOutlier) {
  const auto findings = Drift(MakeFleet(5, [](size_t i, Spec& spec) {
    if (i == 3) {
      spec.symbol = 1;
      spec.crc = 1;
    }
  }));
  EXPECT_TRUE(Flagged(findings, "fleet.symbol_errors").empty()) << Dump(findings);
  EXPECT_TRUE(Flagged(findings, "fleet.crc_errors").empty()) << Dump(findings);
  const Finding* symbol = GroupOk(findings, "fleet.symbol_errors");
  ASSERT_NE(symbol, nullptr) << Dump(findings);
  EXPECT_NE(symbol->observed.find(
                "5 ports on 5 hosts with board_id MT_0000000359: median 0/s, highest 0.00333/s"),
            std::string::npos)
      << symbol->observed;
  ASSERT_NE(GroupOk(findings, "fleet.crc_errors"), nullptr) << Dump(findings);
}

// Per second, as RdmaFleetErrorRateOutlier judges them: a port with 15 times its peers' symbol
// errors is an outlier even when it also carries 10 times their packets (per packet it was
// 1.5 times theirs, and doctor said nothing while the alert paged). The same fleet is in
// rules/tests/fleet_drift.rules.test.yml ("the alert's verdict on one busy port"), where the
// alert fires for this port: the two agree.
TEST(FleetDrift, ErrorRatesArePerSecondAsTheAlert) {
  const auto busy = Drift(MakeFleet(5, [](size_t i, Spec& spec) {
    spec.symbol = 600;  // 2/s
    if (i == 1) {
      spec.symbol = 9000;  // 30/s
      spec.packets *= 10;
    }
  }));
  const auto flagged = Flagged(busy, "fleet.symbol_errors");
  ASSERT_EQ(flagged.size(), 1U) << Dump(busy);
  EXPECT_EQ(ScopeValue(*flagged.front(), "instance"), Instance(1));
  EXPECT_EQ(ScopeValue(*flagged.front(), "netdev"), "eth2");
  EXPECT_NE(flagged.front()->observed.find(
                "30 symbol errors/s, 15x the median of the 5 ports on 5 hosts with board_id "
                "MT_0000000359, 2/s"),
            std::string::npos)
      << flagged.front()->observed;
  // 20/s is 10 times the median, not more: no outlier, as the alert's `>`.
  const auto at_factor =
      Drift(MakeFleet(5, [](size_t i, Spec& spec) { spec.symbol = i == 1 ? 6000 : 600; }));
  EXPECT_TRUE(Flagged(at_factor, "fleet.symbol_errors").empty()) << Dump(at_factor);
}

TEST(FleetDrift, WithoutWindowTheRatesAreSkipped) {
  const auto findings = Drift(MakeFleet(5,
                                        [](size_t i, Spec& spec) {
                                          if (i == 0) spec.symbol = 3000;
                                        }),
                              false);
  int skipped = 0;
  for (const Finding& finding : findings) {
    if (finding.severity != Severity::kSkip) continue;
    ++skipped;
    EXPECT_EQ(ScopeValue(finding, "instance"), "*");
    EXPECT_NE(finding.observed.find("--window"), std::string::npos);
  }
  EXPECT_EQ(skipped, 5) << Dump(findings);
  EXPECT_TRUE(Flagged(findings, "fleet.firmware").empty());
}

// Only a slower link or PCIe link is drift: a faster one slows nobody.
TEST(FleetDrift, FasterThanThePeersIsNoDrift) {
  const auto findings = Drift(MakeFleet(5, [](size_t i, Spec& spec) {
    if (i == 4) {
      spec.link_gbps = 200;
      spec.pcie_gts = 32;
    }
  }));
  EXPECT_TRUE(Flagged(findings, "fleet.link_rate").empty()) << Dump(findings);
  EXPECT_TRUE(Flagged(findings, "fleet.pcie_speed").empty()) << Dump(findings);
  const Finding* rate = GroupOk(findings, "fleet.link_rate");
  ASSERT_NE(rate, nullptr) << Dump(findings);
  EXPECT_NE(rate->observed.find("4 of the 5 hosts with board_id MT_0000000359: link rate 100 "
                                "Gb/s, the others above it"),
            std::string::npos)
      << rate->observed;
  ASSERT_NE(GroupOk(findings, "fleet.pcie_speed"), nullptr) << Dump(findings);
}

// Peers are per cluster: cluster b on another firmware throughout is no drift; a host of b that
// differs from b's majority is, whatever a's hosts run.
TEST(FleetDrift, PeersArePerCluster) {
  const auto findings = Drift(MakeFleet(7, [](size_t i, Spec& spec) {
    spec.cluster = i < 3 ? "a" : "b";
    if (i >= 3) spec.firmware = i == 6 ? "22.36.1010" : "22.39.1002";
  }));
  const auto flagged = Flagged(findings, "fleet.firmware");
  ASSERT_EQ(flagged.size(), 1U) << Dump(findings);
  EXPECT_EQ(ScopeValue(*flagged.front(), "instance"), Instance(6));
  EXPECT_NE(flagged.front()->expected.find("22.39.1002, as 3 of the 4 hosts with board_id "
                                           "MT_0000000359 in cluster b"),
            std::string::npos)
      << flagged.front()->expected;
  int ok = 0;
  for (const Finding& finding : findings) {
    ok += finding.id == "fleet.firmware" && finding.severity == Severity::kOk;
  }
  EXPECT_EQ(ok, 1) << "cluster a";
}

// A target that is down is reported once, critical, and is nobody's peer: its missing series
// are not "no RDMA device", and the others still form a majority without it.
TEST(FleetDrift, ADownHostIsReportedAndLeftOut) {
  const auto findings = Drift(MakeFleet(4, [](size_t i, Spec& spec) {
    if (i == 0) spec.up = false;
    if (i == 1) spec.netdev_mtu = 1500;
  }));
  std::vector<std::string> flagged;
  for (const Finding& finding : findings) {
    if (finding.severity == Severity::kOk || finding.severity == Severity::kSkip) continue;
    flagged.push_back(finding.id + " " + ScopeValue(finding, "instance"));
  }
  EXPECT_EQ(flagged, (std::vector<std::string>{"fleet.host_down " + Instance(0),
                                               "fleet.netdev_mtu " + Instance(1)}))
      << Dump(findings);
}

// A fleet without what a check compares (no PFC, no ECN sysfs...): one skip saying so, as the
// per-host checks do, instead of a check that silently vanished.
TEST(FleetDrift, ACheckWithNothingToCompareIsSkipped) {
  Fleet fleet;
  for (size_t i = 0; i < 4; ++i) {
    Families f;
    f.Gauge("up", {}, 1);
    f.Gauge("rdma_device_info",
            {{"device", "mlx5_0"}, {"firmware_version", "22.36.1010"}, {"board_id", "MT_1"}}, 1);
    fleet.now.emplace(Instance(i), f.Build(kWindow));
    fleet.before.emplace(Instance(i), Build(Spec{}, false));
  }
  const auto findings = Drift(fleet);
  std::set<std::string> skipped;
  for (const Finding& finding : findings) {
    if (finding.severity != Severity::kSkip) continue;
    skipped.insert(finding.id);
    EXPECT_NE(finding.observed.find("no answering host has what this check compares"),
              std::string::npos);
  }
  EXPECT_TRUE(skipped.contains("fleet.pfc")) << Dump(findings);
  EXPECT_TRUE(skipped.contains("fleet.symbol_errors")) << Dump(findings);
  EXPECT_FALSE(skipped.contains("fleet.firmware")) << Dump(findings);
  EXPECT_EQ(skipped.size(), 18U) << Dump(findings);  // fleet.module among them
}

// Sites that name clusters with another label (rules/generate.py --cluster-label site): with
// --prometheus.cluster-label site, the hosts of two sites are two groups, as the rules rendered
// for that site group them; read as `cluster` (absent), they were one group of seven and the
// three hosts of b's majority were reported against a's.
TEST(FleetDrift, PeersArePerClusterOfTheClusterLabel) {
  const Fleet fleet = MakeFleet(7, [](size_t i, Spec& spec) {
    spec.cluster_label = "site";
    spec.cluster = i < 3 ? "a" : "b";
    if (i >= 3) spec.firmware = i == 6 ? "22.36.1010" : "22.39.1002";
  });
  DoctorOptions options;
  options.prometheus_cluster_label = "site";
  const auto findings = Drift(fleet, true, options);
  const auto flagged = Flagged(findings, "fleet.firmware");
  ASSERT_EQ(flagged.size(), 1U) << Dump(findings);
  EXPECT_EQ(ScopeValue(*flagged.front(), "instance"), Instance(6));
  EXPECT_NE(flagged.front()->expected.find("as 3 of the 4 hosts with board_id MT_0000000359 in "
                                           "cluster b"),
            std::string::npos)
      << flagged.front()->expected;
  int ok = 0;
  for (const Finding& finding : findings) {
    ok += finding.id == "fleet.firmware" && finding.severity == Severity::kOk;
  }
  EXPECT_EQ(ok, 1) << "site a";
  // Hosts missing an RDMA device are counted per site too.
  int sites = 0;
  for (const Finding& finding : findings) {
    sites += finding.id == "fleet.no_rdma_device" && finding.severity == Severity::kOk;
  }
  EXPECT_EQ(sites, 2) << Dump(findings);

  const auto as_one = Drift(fleet);  // the default label, which these targets do not carry
  EXPECT_EQ(Flagged(as_one, "fleet.firmware").size(), 3U) << Dump(as_one);
}

// Where the fleet rules run, doctor judges their rows: on the same hosts it says what it says
// from its own computation, finding for finding (each drift of kDrifts, and a healthy fleet).
TEST(FleetDrift, RecordedRowsGiveTheSameReportAsComputedOnes) {
  std::vector<std::function<void(Spec&)>> changes{[](Spec&) {}};
  for (const DriftCase& drift : kDrifts) changes.push_back(drift.change);
  for (size_t c = 0; c < changes.size(); ++c) {
    const auto fleet = [&](bool recorded) {
      return MakeFleet(5, [&](size_t i, Spec& spec) {
        spec.recorded = recorded;
        if (i == 2) changes[c](spec);
      });
    };
    EXPECT_EQ(Dump(Drift(fleet(true))), Dump(Drift(fleet(false)))) << "case " << c;
  }
}

// ... and it reads them rather than its own: rows that differ from the series they came from
// (as if the rules saw the fleet otherwise) decide.
TEST(FleetDrift, RecordedRowsAreWhatIsJudged) {
  const auto findings = Drift(MakeFleet(5, [](size_t i, Spec& spec) {
    spec.recorded = true;
    if (i == 2) {
      spec.recorded_firmware = "22.35.1012";
      spec.recorded_symbol = 10;
    }
  }));
  for (const char* id : {"fleet.firmware", "fleet.symbol_errors"}) {
    const auto flagged = Flagged(findings, id);
    ASSERT_EQ(flagged.size(), 1U) << id << Dump(findings);
    EXPECT_EQ(ScopeValue(*flagged.front(), "instance"), Instance(2));
    EXPECT_EQ(ScopeValue(*flagged.front(), "device"), "mlx5_0") << "the host's own scope";
  }
  // Over another window than the rules' 5 minutes (--window 10m) the recorded rates do not
  // apply: doctor measures that window itself, where host-2 has no symbol errors.
  const auto ten_minutes = Drift(MakeFleet(
      5,
      [](size_t i, Spec& spec) {
        spec.recorded = true;
        if (i == 2) spec.recorded_symbol = 10;
      },
      600));
  EXPECT_TRUE(Flagged(ten_minutes, "fleet.symbol_errors").empty()) << Dump(ten_minutes);
  ASSERT_NE(GroupOk(ten_minutes, "fleet.symbol_errors"), nullptr) << Dump(ten_minutes);
}

// The rules' group figures of the whole cluster decide where they are recorded, as they decide
// the alerts: a report of three hosts (a selector's) whose firmware the cluster's majority does
// not run, and whose symbol errors are low among themselves but 20 times the cluster's median.
TEST(FleetDrift, TheClustersRecordedFiguresAreTheReference) {
  const auto fleet = MakeFleet(3, [](size_t, Spec& spec) {
    spec.recorded = true;
    spec.recorded_symbol = 2;
  });
  const auto group = [](std::map<std::string, std::string> labels, double value) {
    labels.insert({{"board_id", "MT_0000000359"}, {"hca_type", "MT4125"}});
    return Sample{.labels = std::move(labels), .value = value};
  };
  FleetReference reference;
  reference.setting_hosts = {
      group({{"setting", "firmware_version"}, {"setting_value", "22.36.1010"}}, 3),
      group({{"setting", "firmware_version"}, {"setting_value", "22.39.1002"}}, 97)};
  reference.error_medians = {group({{"error", "symbol"}}, 0.1)};
  // Without them, the three agree with each other.
  const auto local = Drift(fleet);
  EXPECT_TRUE(Flagged(local, "fleet.firmware").empty()) << Dump(local);
  EXPECT_TRUE(Flagged(local, "fleet.symbol_errors").empty()) << Dump(local);

  const auto findings = FleetDrift(fleet.now, fleet.before, {}, reference);
  for (const char* id : {"fleet.firmware", "fleet.symbol_errors"}) {
    const auto flagged = Flagged(findings, id);
    ASSERT_EQ(flagged.size(), 3U) << id << Dump(findings);
    EXPECT_NE(flagged.front()->expected.find("in the cluster"), std::string::npos)
        << flagged.front()->expected;
  }
  EXPECT_NE(Flagged(findings, "fleet.firmware").front()->expected.find("22.39.1002, as 97 hosts"),
            std::string::npos)
      << Dump(findings);
  EXPECT_NE(Flagged(findings, "fleet.symbol_errors").front()->observed.find("20x"),
            std::string::npos)
      << Dump(findings);
  // The cluster's figures go with the rules' rows only: computed rows (no rules loaded) are
  // judged among themselves even when figures are passed.
  const auto computed = FleetDrift(MakeFleet(3).now, MakeFleet(3).before, {}, reference);
  EXPECT_TRUE(Flagged(computed, "fleet.firmware").empty()) << Dump(computed);
}

// A recorded row's setting_value is a label anyone who can write to that Prometheus (or name a
// series so) chooses: in a fix line it is quoted like every host value, and one that cannot be
// quoted leaves no fix at all, not a fix without that knob.
TEST(FleetDrift, TheFleetsValuesInAFixAreQuoted) {
  for (const std::string hostile : {"8$(reboot)", "8\x1b[2J"}) {
    const auto findings = Drift(MakeFleet(5, [&](size_t i, Spec& spec) {
      spec.recorded = true;
      if (i != 2) spec.recorded_coalesce = hostile;
    }));
    const auto flagged = Flagged(findings, "fleet.coalescing");
    ASSERT_EQ(flagged.size(), 1U) << Dump(findings);
    const std::string& fix = flagged.front()->fix;
    if (hostile.find('\x1b') != std::string::npos) {
      EXPECT_EQ(fix, "") << "a control character cannot be pasted";
      continue;
    }
    EXPECT_EQ(fix,
              "ethtool -C eth2 adaptive-rx '8$(reboot)' adaptive-tx '8$(reboot)' "
              "rx-usecs '8$(reboot)' tx-usecs '8$(reboot)'");
  }
}

TEST(FleetDrift, EveryRunbookAnchorExists) {
  const std::set<std::string> anchors =
      testing::RunbookAnchors(kFixtures + "/../../docs/runbook.md");
  ASSERT_FALSE(anchors.empty());
  std::vector<Finding> all;
  for (const DriftCase& drift : kDrifts) {
    auto findings = Drift(MakeFleet(5, [&drift](size_t i, Spec& spec) {
      if (i == 2) drift.change(spec);
    }));
    all.insert(all.end(), findings.begin(), findings.end());
  }
  for (const Finding& finding : all) {
    const std::string prefix = "docs/runbook.md#";
    ASSERT_TRUE(finding.runbook.starts_with(prefix)) << finding.id;
    EXPECT_TRUE(anchors.contains(finding.runbook.substr(prefix.size())))
        << finding.id << " " << finding.runbook;
  }
}

}  // namespace
}  // namespace rdmascope::doctor
