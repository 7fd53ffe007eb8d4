// roce.dscp_trust (doctor/checks_roce_dscp.cc) on constructed series, as the ethtool collector
// serves them from the DCB APP table (rdma_netdev_dscp_trust, rdma_netdev_dscp_priority_info):
// PCP trust, DSCP trust with RoCE's DSCP on the wrong priority or on none, the DSCP taken from
// rdma_cm's default ToS, the option, and no DCB data.
#include <gtest/gtest.h>

#include "doctor/checks_roce_config.h"
#include "unit/doctor_fixtures.h"

namespace rdmascope::doctor {
namespace {

using testing::Families;

// One RoCE port mlx5_0/1 on eth2 with PFC on priority 3 (or off), on driver `driver`.
Families RocePort(bool pfc_on = true, const char* driver = "mlx5_core") {
  Families f;
  f.Gauge("rdma_port_info",
          {{"device", "mlx5_0"},
           {"port", "1"},
           {"link_layer", "Ethernet"},
           {"state", "ACTIVE"},
           {"phys_state", "LinkUp"},
           {"netdev", "eth2"}},
          1);
  f.Gauge("rdma_netdev_info",
          {{"device", "eth2"},
           {"driver", driver},
           {"driver_version", "6.1"},
           {"firmware_version", "22.36"},
           {"bus_info", "0000:3b:00.0"}},
          1);
  f.Gauge("rdma_netdev_pfc_enabled", {{"device", "eth2"}, {"priority", "3"}}, pfc_on ? 1 : 0);
  return f;
}

Finding Only(const std::vector<Finding>& findings) {
  EXPECT_EQ(findings.size(), 1U);
  return findings.empty() ? Finding{} : findings[0];
}

TEST(DoctorDscpTrust, PcpTrustWithPfcOnWarnsWithTheDriversFix) {
  Families mlx5 = RocePort();
  mlx5.Gauge("rdma_netdev_dscp_trust", {{"device", "eth2"}}, 0);
  const Finding f = Only(CheckDscpTrust(mlx5.Build(1), nullptr, {}));
  EXPECT_EQ(f.id, "roce.dscp_trust");
  EXPECT_EQ(f.severity, Severity::kWarn);
  EXPECT_EQ(f.observed,
            "trusts PCP only: the DCB APP table maps no DSCP; RoCE sends DSCP 26 "
            "(--doctor.roce-dscp)");
  EXPECT_EQ(f.fix, "mlnx_qos -i eth2 --trust dscp");
  EXPECT_EQ(f.runbook, "docs/runbook.md#rdmarocedscpnotonpfcpriority");
  // Another driver: iproute2's dcb writes the entry (and switches ice/bnxt_en to DSCP).
  Families ice = RocePort(true, "ice");
  ice.Gauge("rdma_netdev_dscp_trust", {{"device", "eth2"}}, 0);
  EXPECT_EQ(Only(CheckDscpTrust(ice.Build(1), nullptr, {})).fix,
            "dcb app add dev eth2 dscp-prio 26:3");
}

TEST(DoctorDscpTrust, PcpTrustWithoutPfcIsContextOnly) {
  Families f = RocePort(false);
  f.Gauge("rdma_netdev_dscp_trust", {{"device", "eth2"}}, 0);
  EXPECT_EQ(Only(CheckDscpTrust(f.Build(1), nullptr, {})).severity, Severity::kInfo);
}

TEST(DoctorDscpTrust, DscpOnAnotherPriorityWarnsWithReplace) {
  Families f = RocePort();
  f.Gauge("rdma_netdev_dscp_trust", {{"device", "eth2"}}, 1);
  f.Gauge("rdma_netdev_dscp_priority_info", {{"device", "eth2"}, {"dscp", "26"}, {"priority", "0"}},
          1);
  const Finding finding = Only(CheckDscpTrust(f.Build(1), nullptr, {}));
  EXPECT_EQ(finding.severity, Severity::kWarn);
  EXPECT_EQ(finding.observed, "trusts DSCP; DSCP 26 (--doctor.roce-dscp) maps to priority 0");
  EXPECT_EQ(finding.fix, "dcb app replace dev eth2 dscp-prio 26:3");
}

TEST(DoctorDscpTrust, DscpWithoutEntryWarns) {
  Families f = RocePort();
  f.Gauge("rdma_netdev_dscp_trust", {{"device", "eth2"}}, 1);
  f.Gauge("rdma_netdev_dscp_priority_info", {{"device", "eth2"}, {"dscp", "46"}, {"priority", "5"}},
          1);
  const Finding finding = Only(CheckDscpTrust(f.Build(1), nullptr, {}));
  EXPECT_EQ(finding.severity, Severity::kWarn);
  EXPECT_EQ(finding.fix, "dcb app add dev eth2 dscp-prio 26:3");
}

TEST(DoctorDscpTrust, TheDefaultTosDecidesTheDscpAndTheOptionOtherwise) {
  // rdma_cm's default ToS 184 is DSCP 46: on priority 3 here, so ok; DSCP 26 is not looked at.
  Families f = RocePort();
  f.Gauge("rdma_port_default_roce_tos", {{"device", "mlx5_0"}, {"port", "1"}}, 184);
  f.Gauge("rdma_netdev_dscp_trust", {{"device", "eth2"}}, 1);
  f.Gauge("rdma_netdev_dscp_priority_info", {{"device", "eth2"}, {"dscp", "46"}, {"priority", "3"}},
          1);
  f.Gauge("rdma_netdev_dscp_priority_info", {{"device", "eth2"}, {"dscp", "26"}, {"priority", "0"}},
          1);
  const Snapshot snapshot = f.Build(1);
  const Finding finding = Only(CheckDscpTrust(snapshot, nullptr, {}));
  EXPECT_EQ(finding.severity, Severity::kOk);
  EXPECT_EQ(finding.observed, "trusts DSCP; DSCP 46 (rdma_cm default ToS 184) maps to priority 3");
  // Without a default ToS, --doctor.roce-dscp=46 says the same.
  Families g = RocePort();
  g.Gauge("rdma_netdev_dscp_trust", {{"device", "eth2"}}, 1);
  g.Gauge("rdma_netdev_dscp_priority_info", {{"device", "eth2"}, {"dscp", "46"}, {"priority", "3"}},
          1);
  const Snapshot without_tos = g.Build(1);
  DoctorOptions options;
  options.roce_dscp = 46;
  EXPECT_EQ(Only(CheckDscpTrust(without_tos, nullptr, options)).severity, Severity::kOk);
  EXPECT_EQ(Only(CheckDscpTrust(without_tos, nullptr, {})).severity, Severity::kWarn);
}

TEST(DoctorDscpTrust, NoDcbDataIsSkippedWithTheReason) {
  const Finding finding = Only(CheckDscpTrust(RocePort().Build(1), nullptr, {}));
  EXPECT_EQ(finding.severity, Severity::kSkip);
  EXPECT_NE(finding.observed.find("no rdma_netdev_dscp_trust for eth2"), std::string::npos);
}

}  // namespace
}  // namespace rdmascope::doctor
