// Every doctor check firing on a host with the pitfall and quiet on a healthy one, plus the
// edge cases each check must not misread (no window, a counter reset, a disabled port, a
// failed collector).
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <set>

#include "doctor/checks.h"
#include "doctor/checks_host_tuning.h"
#include "unit/doctor_fixtures.h"

namespace rdmascope::doctor {
namespace {

using testing::Families;
using testing::Host;

// The workload given, so that queues.srq_sizing looks (it skips without --doctor.nodes/flows).
DoctorOptions WithWorkload() {
  DoctorOptions options;
  options.nodes = testing::kNodes;
  options.flows = testing::kFlows;
  return options;
}

std::vector<Finding> Diagnose(bool bad, bool window = true,
                              DoctorOptions options = WithWorkload()) {
  const Snapshot before = Host(bad, false);
  const Snapshot now = Host(bad, true);
  return RunChecks(now, window ? &before : nullptr, options);
}

std::vector<Finding> WithId(const std::vector<Finding>& findings, const std::string& id) {
  std::vector<Finding> out;
  std::copy_if(findings.begin(), findings.end(), std::back_inserter(out),
               [&](const Finding& f) { return f.id == id; });
  return out;
}

bool Fires(Severity severity) {
  return severity == Severity::kInfo || severity == Severity::kWarn || severity == Severity::kCrit;
}

// The checks that need history doctor does not have in this slice, and the exporter's own
// health (tested below with a failed collector and a detached probe).
const std::set<std::string> kNotFromHostFixture = {"memory.mr_leak", "memory.pinned_growth",
                                                   "host.collectors", "host.probes"};

TEST(DoctorChecks, EveryCheckFiresOnTheBadHost) {
  const auto findings = Diagnose(true);
  for (const Check& check : AllChecks()) {
    if (kNotFromHostFixture.contains(std::string(check.id))) continue;
    const auto mine = WithId(findings, std::string(check.id));
    EXPECT_TRUE(std::any_of(mine.begin(), mine.end(), [](const Finding& f) {
      return Fires(f.severity);
    })) << check.id;
  }
}

TEST(DoctorChecks, EveryCheckIsQuietOnTheHealthyHost) {
  const auto findings = Diagnose(false);
  for (const Check& check : AllChecks()) {
    if (kNotFromHostFixture.contains(std::string(check.id))) continue;
    const auto mine = WithId(findings, std::string(check.id));
    // Quiet: nothing fires, and at least one subject was checked and found healthy (the
    // rest may be skipped: a Disabled port, an MTU libibverbs did not report).
    EXPECT_TRUE(std::any_of(mine.begin(), mine.end(), [](const Finding& f) {
      return f.severity == Severity::kOk;
    })) << check.id;
    for (const Finding& finding : mine) {
      EXPECT_FALSE(Fires(finding.severity)) << check.id << ": " << finding.observed;
    }
  }
}

TEST(DoctorChecks, CqAdviceGivesTheMinimumAndThePowerOfTwo) {
  const auto cq = WithId(Diagnose(true), "queues.cq_capacity");
  ASSERT_EQ(cq.size(), 1U);
  EXPECT_EQ(cq[0].severity, Severity::kCrit);  // 31 < 1.0 x 128
  EXPECT_TRUE(cq[0].advice.starts_with(
      "CQ 31 entries is fed by 128 WRs: create it with at least 192 (1.5x), 256 recommended"))
      << cq[0].advice;
  const Scope expected{{"device", "mlx5_0"}, {"pid", "4242"}, {"comm", "trainer"}, {"cq", "3"}};
  EXPECT_EQ(cq[0].scope, expected);
}

// A finding about a process names its workload (the workload collector's info series), and
// only that process's.
TEST(DoctorChecks, AProcessFindingNamesItsWorkload) {
  Families f;
  f.Gauge("rdma_cq_capacity_entries",
          {{"device", "mlx5_0"}, {"pid", "4242"}, {"comm", "trainer"}, {"cq", "3"}}, 31);
  f.Gauge("rdma_cq_feeding_wrs",
          {{"device", "mlx5_0"}, {"pid", "4242"}, {"comm", "trainer"}, {"cq", "3"}}, 128);
  f.Gauge("rdma_cq_capacity_entries",
          {{"device", "mlx5_0"}, {"pid", "7"}, {"comm", "other"}, {"cq", "1"}}, 31);
  f.Gauge("rdma_cq_feeding_wrs",
          {{"device", "mlx5_0"}, {"pid", "7"}, {"comm", "other"}, {"cq", "1"}}, 128);
  f.Gauge("rdma_process_workload_info",
          {{"pid", "4242"},
           {"comm", "trainer"},
           {"pod_uid", "0c1e3f3a-2b6d-4f6a-9d3e-7a2b1c0d9e8f"},
           {"slurm_job_id", "4711"}},
          1);
  const auto cq =
      WithId(RunChecks(f.Build(0, testing::AllRan()), nullptr, {}), "queues.cq_capacity");
  ASSERT_EQ(cq.size(), 2U);
  const Scope trainer_scope{{"device", "mlx5_0"},
                            {"pid", "4242"},
                            {"comm", "trainer"},
                            {"cq", "3"},
                            {"pod_uid", "0c1e3f3a-2b6d-4f6a-9d3e-7a2b1c0d9e8f"},
                            {"slurm_job_id", "4711"}};
  const Scope other_scope{{"device", "mlx5_0"}, {"pid", "7"}, {"comm", "other"}, {"cq", "1"}};
  EXPECT_EQ(cq[0].scope, trainer_scope);
  EXPECT_EQ(cq[1].scope, other_scope);
}

TEST(DoctorChecks, CqBetweenOneAndOneAndAHalfTimesWarns) {
  Families f;
  f.Gauge("rdma_cq_capacity_entries", {{"cq", "1"}}, 140);
  f.Gauge("rdma_cq_feeding_wrs", {{"cq", "1"}}, 100);
  const auto findings = CheckCqCapacity(f.Build(0), nullptr, {});
  ASSERT_EQ(findings.size(), 1U);
  EXPECT_EQ(findings[0].severity, Severity::kWarn);
  EXPECT_NE(findings[0].advice.find("at least 150 (1.5x), 256 recommended"), std::string::npos)
      << findings[0].advice;
  // Exactly 1.5x is enough.
  Families enough;
  enough.Gauge("rdma_cq_capacity_entries", {{"cq", "1"}}, 150);
  enough.Gauge("rdma_cq_feeding_wrs", {{"cq", "1"}}, 100);
  EXPECT_EQ(CheckCqCapacity(enough.Build(0), nullptr, {})[0].severity, Severity::kOk);
}

TEST(DoctorChecks, NetdevMtuNamesTheInterfaceAndTheCommand) {
  const auto mtu = WithId(Diagnose(true), "roce.netdev_mtu");
  ASSERT_EQ(mtu.size(), 1U);
  EXPECT_EQ(mtu[0].severity, Severity::kWarn);
  EXPECT_EQ(mtu[0].observed, "netdev MTU 1500");
  EXPECT_EQ(mtu[0].fix, "ip link set dev eth2 mtu 4200");
  const Scope expected{{"device", "mlx5_0"}, {"port", "1"}, {"netdev", "eth2"}};
  EXPECT_EQ(mtu[0].scope, expected);
}

TEST(DoctorChecks, NetdevMtuThresholdIsAnOption) {
  DoctorOptions options;
  options.min_netdev_mtu = 9000;
  const auto quiet = WithId(Diagnose(false, true, options), "roce.netdev_mtu");
  ASSERT_EQ(quiet.size(), 1U);
  EXPECT_EQ(quiet[0].severity, Severity::kOk);  // 9000 is not below 9000
  options.min_netdev_mtu = 9216;
  const auto fires = WithId(Diagnose(false, true, options), "roce.netdev_mtu");
  EXPECT_EQ(fires[0].severity, Severity::kWarn);
  EXPECT_EQ(fires[0].fix, "ip link set dev eth2 mtu 9216");
}

TEST(DoctorChecks, ActiveMtuBelowMaxOnRoceAdvisesTheNetdevMtu) {
  const auto mtu = WithId(Diagnose(true), "links.active_mtu");
  const auto it = std::find_if(mtu.begin(), mtu.end(),
                               [](const Finding& f) { return f.severity == Severity::kWarn; });
  ASSERT_NE(it, mtu.end());
  EXPECT_EQ(it->observed, "active MTU 1024, port maximum 4096");
  EXPECT_EQ(it->fix, "ip link set dev eth2 mtu 4200");
  EXPECT_NE(it->advice.find("eth2 has 1500"), std::string::npos) << it->advice;
}

TEST(DoctorChecks, ActiveMtuAbsentIsSkippedNotHealthy) {
  // An InfiniBand port libibverbs could not query: no MTU series, so no verdict.
  const auto mtu = WithId(Diagnose(false), "links.active_mtu");
  const auto ib = std::find_if(mtu.begin(), mtu.end(), [](const Finding& f) {
    return f.scope == Scope{{"device", "mlx5_1"}, {"port", "1"}};
  });
  ASSERT_NE(ib, mtu.end());
  EXPECT_EQ(ib->severity, Severity::kSkip);
}

TEST(DoctorChecks, PortStateCabledButDownIsCriticalDisabledIsSkipped) {
  const Scope port2{{"device", "mlx5_1"}, {"port", "2"}};
  const auto find = [&](const std::vector<Finding>& findings) {
    const auto state = WithId(findings, "links.port_state");
    return *std::find_if(state.begin(), state.end(),
                         [&](const Finding& f) { return f.scope == port2; });
  };
  const Finding bad = find(Diagnose(true));
  EXPECT_EQ(bad.severity, Severity::kCrit);
  EXPECT_EQ(bad.observed, "INIT (physical LinkUp)");
  EXPECT_NE(bad.advice.find("subnet manager"), std::string::npos);
  EXPECT_EQ(find(Diagnose(false)).severity, Severity::kSkip);
}

TEST(DoctorChecks, UncabledPortIsInformational) {
  Families f;
  f.Gauge("rdma_port_state", {{"device", "d"}, {"port", "1"}}, 1);
  f.Gauge("rdma_port_physical_state", {{"device", "d"}, {"port", "1"}}, 2);
  const auto findings = CheckPortState(f.Build(0), nullptr, {});
  ASSERT_EQ(findings.size(), 1U);
  EXPECT_EQ(findings[0].severity, Severity::kInfo);
  EXPECT_EQ(findings[0].observed, "DOWN (physical Polling)");
}

// Issue 26 item 1: mlx4, mlx5, bnxt_re, irdma, mana and ocrdma report DOWN + Disabled both for
// `ip link set down` and for a pulled cable; the netdev's admin state tells them apart.
struct RocePortCase {
  const char* what;
  std::optional<double> admin_up;
  std::optional<double> carrier;
  Severity severity;
  const char* said;  // in observed or advice
};

TEST(DoctorChecks, RocePortDownIsJudgedByItsNetdev) {
  const RocePortCase cases[] = {
      {"cable pulled", 1, 0, Severity::kWarn, "no carrier"},
      {"ip link set down", 0, std::nullopt, Severity::kSkip, "administratively down"},
      {"link up, RDMA port down", 1, 1, Severity::kCrit, "enable_roce"},
      {"netdev unknown", std::nullopt, std::nullopt, Severity::kInfo, "not known here"},
  };
  for (const RocePortCase& c : cases) {
    Families f;
    const std::vector<Label> port{{"device", "mlx5_0"}, {"port", "1"}};
    f.Gauge("rdma_port_info",
            {{"device", "mlx5_0"},
             {"port", "1"},
             {"link_layer", "Ethernet"},
             {"state", "DOWN"},
             {"phys_state", "Disabled"},
             {"netdev", c.admin_up ? "ens1f0np0" : ""}},
            1);
    f.Gauge("rdma_port_state", port, 1);
    f.Gauge("rdma_port_physical_state", port, 3);
    if (c.admin_up) f.Gauge("rdma_port_netdev_admin_up", port, *c.admin_up);
    if (c.carrier) f.Gauge("rdma_port_netdev_carrier", port, *c.carrier);
    const auto findings = CheckPortState(f.Build(0), nullptr, {});
    ASSERT_EQ(findings.size(), 1U) << c.what;
    EXPECT_EQ(findings[0].severity, c.severity) << c.what;
    EXPECT_NE((findings[0].observed + findings[0].advice).find(c.said), std::string::npos)
        << c.what << ": " << findings[0].observed << " / " << findings[0].advice;
  }
}

TEST(DoctorChecks, InfinibandDisabledIsDeliberatePollingIsNot) {
  for (const auto& [phys, severity] : {std::pair{3.0, Severity::kSkip}, {2.0, Severity::kInfo}}) {
    Families f;
    const std::vector<Label> port{{"device", "mlx5_1"}, {"port", "1"}};
    f.Gauge("rdma_port_info",
            {{"device", "mlx5_1"}, {"port", "1"}, {"link_layer", "InfiniBand"}, {"netdev", ""}}, 1);
    f.Gauge("rdma_port_state", port, 1);
    f.Gauge("rdma_port_physical_state", port, phys);
    const auto findings = CheckPortState(f.Build(0), nullptr, {});
    ASSERT_EQ(findings.size(), 1U);
    EXPECT_EQ(findings[0].severity, severity) << "phys " << phys;
  }
}

TEST(DoctorChecks, CrcErrorsOfANonRdmaInterfaceAreIgnored) {
  for (const Finding& finding : WithId(Diagnose(true), "links.crc_errors")) {
    EXPECT_NE(finding.scope, (Scope{{"netdev", "eno1"}}));
  }
}

// Issue 26 item 5: RNR NAKs *received* (mlx5 rnr_nak_retry_err, rxe rcvd_rnr_err, bnxt_re
// rnr_naks_rcvd) are the peer's starvation; only out_of_buffer and rxe send_rnr_err are local.
TEST(DoctorChecks, ReceiveStarvationSeparatesLocalFromPeerEvidence) {
  for (const char* counter :
       {"rnr_nak_retry_err", "rcvd_rnr_err", "rnr_naks_rcvd", "out_of_buffer", "send_rnr_err"}) {
    const bool local =
        std::string_view(counter) == "out_of_buffer" || std::string_view(counter) == "send_rnr_err";
    const std::vector<Label> key{{"device", "d"}, {"port", "1"}, {"counter", counter}};
    Families before;
    before.Counter("rdma_port_hw_counter_total", key, 100);
    Families now;
    now.Counter("rdma_port_hw_counter_total", key, 200);
    const Snapshot b = before.Build(0);
    const Snapshot n = now.Build(10);
    const auto warns = [](const std::vector<Finding>& findings) {
      return std::any_of(findings.begin(), findings.end(),
                         [](const Finding& f) { return f.severity == Severity::kWarn; });
    };
    EXPECT_EQ(warns(CheckReceiveStarvation(n, &b, {})), local) << counter;
    EXPECT_EQ(warns(CheckPeerReceiveStarvation(n, &b, {})), !local) << counter;
  }
}

TEST(DoctorChecks, CounterChecksWithoutAWindowAreSkipped) {
  const auto findings = Diagnose(true, /*window=*/false);
  for (const char* id :
       {"links.crc_errors", "links.symbol_errors", "links.link_downed", "links.retransmissions",
        "queues.receive_starvation", "queues.peer_receive_starvation", "roce.global_pause",
        "roce.pause_storm"}) {
    const auto mine = WithId(findings, id);
    ASSERT_FALSE(mine.empty()) << id;
    for (const Finding& finding : mine) {
      EXPECT_EQ(finding.severity, Severity::kSkip) << id;
      EXPECT_NE(finding.observed.find("--window"), std::string::npos) << id;
    }
  }
}

TEST(DoctorChecks, ACounterResetGivesNoRate) {
  Families before;
  before.Gauge(
      "rdma_port_info",
      {{"device", "mlx5_0"}, {"port", "1"}, {"link_layer", "Ethernet"}, {"netdev", "eth2"}}, 1);
  before.Counter("rdma_netdev_crc_errors_total", {{"device", "eth2"}}, 900);
  Families now;
  now.Gauge("rdma_port_info",
            {{"device", "mlx5_0"}, {"port", "1"}, {"link_layer", "Ethernet"}, {"netdev", "eth2"}},
            1);
  now.Counter("rdma_netdev_crc_errors_total", {{"device", "eth2"}}, 4);  // driver reloaded
  const Snapshot earlier = before.Build(0);
  const auto findings = CheckCrcErrors(now.Build(10), &earlier, {});
  ASSERT_EQ(findings.size(), 1U);
  EXPECT_EQ(findings[0].severity, Severity::kSkip);
  EXPECT_NE(findings[0].observed.find("reset"), std::string::npos);
}

TEST(DoctorChecks, RetransmissionRateIsSummedPerPortOverTheWindow) {
  const auto retrans = WithId(Diagnose(true), "links.retransmissions");
  ASSERT_EQ(retrans.size(), 1U);
  EXPECT_EQ(retrans[0].severity, Severity::kWarn);
  // (150 + 10) / 10 s.
  EXPECT_EQ(retrans[0].observed.substr(0, 4), "16 r") << retrans[0].observed;
}

TEST(DoctorChecks, IbaThresholdsAreInfinibandDiagsDefaultsAndOverridable) {
  const auto iba = WithId(Diagnose(true), "links.iba_errors");
  const auto wait = std::find_if(iba.begin(), iba.end(), [](const Finding& f) {
    return f.scope.back().second == "port_xmit_wait";
  });
  ASSERT_NE(wait, iba.end());
  EXPECT_EQ(wait->severity, Severity::kWarn);  // 5000 > PortXmitWait=1000
  EXPECT_EQ(wait->fix, "perfquery -R -C mlx5_1 -P 1");
  DoctorOptions options;
  options.iba_thresholds["PortXmitWait"] = 10000;
  options.iba_thresholds["SymbolErrorCounter"] = 100;
  for (const Finding& finding : WithId(Diagnose(true, true, options), "links.iba_errors")) {
    EXPECT_EQ(finding.severity, Severity::kOk) << finding.observed;
  }
}

TEST(DoctorChecks, SaturatedDataCountersAreNotErrors) {
  for (const Finding& finding : WithId(Diagnose(false), "links.counter_saturated")) {
    EXPECT_NE(finding.scope.back().second, "port_xmit_data");
  }
}

TEST(DoctorChecks, PfcOnAnotherPriorityIsAnOption) {
  DoctorOptions options;
  options.roce_priority = 0;  // off on priority 0 in both fixtures
  const auto pfc = WithId(Diagnose(false, true, options), "roce.pfc");
  ASSERT_EQ(pfc.size(), 1U);
  EXPECT_EQ(pfc[0].severity, Severity::kInfo);
  EXPECT_EQ(pfc[0].fix, "dcb pfc set dev eth2 prio-pfc 0:on");
}

TEST(DoctorChecks, PinnedMemoryAtTheLimitIsCriticalAndUnlimitedIsOk) {
  Families f;
  f.Gauge("rdma_process_pinned_bytes", {{"pid", "1"}, {"comm", "a"}}, 64.0 * (1 << 20));
  f.Gauge("rdma_process_locked_memory_limit_bytes", {{"pid", "1"}, {"comm", "a"}},
          64.0 * (1 << 20));
  f.Gauge("rdma_process_pinned_bytes", {{"pid", "2"}, {"comm", "b"}}, 1e12);  // unlimited
  const auto findings = CheckPinnedVsMemlock(f.Build(0), nullptr, {});
  ASSERT_EQ(findings.size(), 2U);
  EXPECT_EQ(findings[0].severity, Severity::kCrit);
  EXPECT_EQ(findings[0].fix, "prlimit --pid 1 --memlock=unlimited:unlimited");
  EXPECT_EQ(findings[1].severity, Severity::kOk);
  const auto warn = WithId(Diagnose(true), "memory.pinned_vs_memlock");
  EXPECT_EQ(warn[0].severity, Severity::kWarn);  // 60 of 64 MiB
  EXPECT_NE(warn[0].advice.find("only 4 MiB left"), std::string::npos) << warn[0].advice;
}

// Issue 26 item 3: a root process pinning 30 MiB under the default 8 MiB limit is not told it
// "may pin at most 8 MiB": ib_umem_get does not apply the limit to CAP_IPC_LOCK holders.
TEST(DoctorChecks, CapIpcLockHoldersGetNoMemlockFinding) {
  for (const double exempt : {1.0, 0.0}) {
    Families f;
    const std::vector<Label> proc{{"pid", "7"}, {"comm", "trainer"}};
    f.Gauge("rdma_process_pinned_bytes", proc, 30.0 * (1 << 20));
    f.Gauge("rdma_process_locked_memory_limit_bytes", proc, 8.0 * (1 << 20));
    f.Gauge("rdma_process_pin_limit_exempt", proc, exempt);
    const Snapshot now = f.Build(0);
    const auto pinned = CheckPinnedVsMemlock(now, nullptr, {});
    const auto memlock = CheckMemlock(now, nullptr, {});
    ASSERT_EQ(pinned.size(), 1U);
    ASSERT_EQ(memlock.size(), 1U);
    EXPECT_EQ(pinned[0].severity, exempt == 1 ? Severity::kOk : Severity::kCrit);
    EXPECT_EQ(memlock[0].severity, exempt == 1 ? Severity::kOk : Severity::kWarn);
    if (exempt == 1) {
      EXPECT_NE(pinned[0].observed.find("CAP_IPC_LOCK"), std::string::npos);
      EXPECT_TRUE(memlock[0].fix.empty());
    }
  }
}

TEST(DoctorChecks, NumaAdviceNamesTheDevicesNode) {
  const auto numa = WithId(Diagnose(true), "host.numa_placement");
  ASSERT_EQ(numa.size(), 1U);
  EXPECT_EQ(numa[0].fix, "numactl --cpunodebind=1 --membind=1 -- trainer");
}

TEST(DoctorChecks, HistoryChecksAreSkippedWithTheReason) {
  for (const char* id : {"memory.mr_leak", "memory.pinned_growth"}) {
    const auto mine = WithId(Diagnose(true), id);
    ASSERT_EQ(mine.size(), 1U);
    EXPECT_EQ(mine[0].severity, Severity::kSkip);
    EXPECT_NE(mine[0].observed.find("history"), std::string::npos);
  }
}

TEST(DoctorChecks, AFailedCollectorSkipsItsChecksWithTheError) {
  auto collectors = testing::AllRan();
  collectors["ethtool"] = {.failed = true, .detail = "SIOCETHTOOL: Operation not permitted"};
  collectors.erase("verbs");  // disabled
  Families f;
  f.Gauge("rdma_port_info",
          {{"device", "mlx5_0"}, {"port", "1"}, {"link_layer", "Ethernet"}, {"netdev", "eth2"}}, 1);
  const auto findings = RunChecks(f.Build(0, collectors), nullptr, {});
  const auto mtu = WithId(findings, "roce.netdev_mtu");
  ASSERT_EQ(mtu.size(), 1U);
  EXPECT_EQ(mtu[0].severity, Severity::kSkip);
  EXPECT_EQ(mtu[0].observed, "collector ethtool failed: SIOCETHTOOL: Operation not permitted");
  const auto cq = WithId(findings, "queues.cq_capacity");
  ASSERT_EQ(cq.size(), 1U);
  EXPECT_NE(cq[0].observed.find("verbs is disabled"), std::string::npos);
  const auto health = WithId(findings, "host.collectors");
  const auto failed = std::find_if(health.begin(), health.end(), [](const Finding& finding) {
    return finding.severity == Severity::kWarn;
  });
  ASSERT_NE(failed, health.end());
  EXPECT_EQ(failed->scope, (Scope{{"collector", "ethtool"}}));
}

TEST(DoctorChecks, ADetachedProbeWarnsWithItsReason) {
  Families f;
  f.Gauge("rdmascope_probe_attached", {{"probe", "verbs"}}, 0);
  auto collectors = testing::AllRan();
  collectors["verbs"].probe_error = "no BTF";
  const auto findings = CheckProbes(f.Build(0, collectors), nullptr, {});
  ASSERT_EQ(findings.size(), 1U);
  EXPECT_EQ(findings[0].severity, Severity::kWarn);
  EXPECT_EQ(findings[0].observed, "not attached: no BTF");
}

}  // namespace
}  // namespace rdmascope::doctor
