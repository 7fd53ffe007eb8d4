// The sizing checks (checks_sizing.cc) on constructed snapshots: QP send depth against the
// bandwidth-delay product, QPs per core, SRQ depth and limit against nodes x flows x 1.2,
// registration churn. The firing/quiet pair on the fixture host is in doctor_checks_test.cc.
#include <gtest/gtest.h>

#include "doctor/checks_sizing.h"
#include "unit/doctor_fixtures.h"

namespace rdmascope::doctor {
namespace {

using testing::Families;

const std::vector<Label> kTrainer{{"device", "mlx5_0"}, {"pid", "4242"}, {"comm", "trainer"}};

Families QpHost(double min_send_wrs) {
  Families f;
  f.Gauge("rdma_port_rate_bytes_per_second", {{"device", "mlx5_0"}, {"port", "1"}}, 12.5e9);
  f.Gauge("rdma_process_qp_min_send_wrs", kTrainer, min_send_wrs);
  return f;
}

// The practitioners' figure: 100 Gb/s, 4 KiB requests -> about 256 send WRs. 80 us x
// 12.5 GB/s = 1,000,000 bytes = 244.1 messages of 4 KiB: 245 needed, 256 as a power of two.
TEST(DoctorSizing, DefaultsReproduceThePractitioners256For100GbAnd4KiB) {
  const DoctorOptions defaults;
  EXPECT_EQ(BdpWorkRequests(12.5e9, defaults.rtt_seconds, defaults.message_size_bytes), 245);
  const auto findings = CheckQpDepth(QpHost(128).Build(0), nullptr, defaults);
  ASSERT_EQ(findings.size(), 1U);
  EXPECT_EQ(findings[0].severity, Severity::kWarn);
  EXPECT_EQ(findings[0].scope, (Scope{{"device", "mlx5_0"}, {"pid", "4242"}, {"comm", "trainer"}}));
  EXPECT_NE(findings[0].advice.find("max_send_wr at least 245, 256 recommended"), std::string::npos)
      << findings[0].advice;
  EXPECT_NE(findings[0].advice.find("52.2%"), std::string::npos) << "128 of 245";
  EXPECT_EQ(CheckQpDepth(QpHost(245).Build(0), nullptr, defaults)[0].severity, Severity::kOk);
}

// Applications spread traffic over many QPs: the process fills the link when its RC send
// queues together hold the bandwidth-delay product, whatever the shallowest one holds.
TEST(DoctorSizing, QpDepthJudgesTheProcesssSummedSendQueues) {
  Families many = QpHost(64);  // eight QPs of 64: 512 in flight against 245 needed
  many.Gauge("rdma_process_qp_total_send_wrs", kTrainer, 512);
  const auto spread = CheckQpDepth(many.Build(0), nullptr, {});
  ASSERT_EQ(spread.size(), 1U);
  EXPECT_EQ(spread[0].severity, Severity::kOk);
  EXPECT_NE(spread[0].observed.find("512 send WRs across the RC QPs, smallest send queue 64 WRs"),
            std::string::npos)
      << spread[0].observed;
  EXPECT_NE(spread[0].observed.find("the traffic needs at least 4 QPs in parallel"),
            std::string::npos)
      << spread[0].observed;
  Families few = QpHost(64);  // two QPs of 64
  few.Gauge("rdma_process_qp_total_send_wrs", kTrainer, 128);
  const auto shallow = CheckQpDepth(few.Build(0), nullptr, {});
  EXPECT_EQ(shallow[0].severity, Severity::kWarn);
  EXPECT_NE(shallow[0].advice.find("hold 128 WRs together"), std::string::npos)
      << shallow[0].advice;
  EXPECT_NE(shallow[0].advice.find("an assumed round trip"), std::string::npos)
      << "the RTT is an assumption and says so";
  EXPECT_NE(shallow[0].expected.find("an assumed 80 us round trip, --doctor.rtt"),
            std::string::npos)
      << shallow[0].expected;
}

// InfiniBand QDR signals at 40 Gb/s and carries 32: the bandwidth-delay product uses the data
// rate (rdma_port_data_rate_bytes_per_second) where the exporter serves it.
TEST(DoctorSizing, QpDepthUsesThePortsDataRate) {
  Families f;
  f.Gauge("rdma_port_rate_bytes_per_second", {{"device", "mlx5_0"}, {"port", "1"}}, 5e9);
  f.Gauge("rdma_port_data_rate_bytes_per_second", {{"device", "mlx5_0"}, {"port", "1"}}, 4e9);
  f.Gauge("rdma_process_qp_min_send_wrs", kTrainer, 64);
  // 4e9 x 80 us / 4096 = 78.1 -> 79 needed (the signalling rate would say 98).
  const auto findings = CheckQpDepth(f.Build(0), nullptr, {});
  EXPECT_NE(findings[0].expected.find("at least 79 WRs"), std::string::npos)
      << findings[0].expected;
}

TEST(DoctorSizing, QpDepthUsesTheMessageSizeThePreloadLibraryMeasured) {
  // 64 KiB sends: 1,000,000 / 65536 = 15.3 -> 16 WRs suffice, so 64 is plenty.
  Families f = QpHost(64);
  const std::vector<Label> send{{"pid", "4242"}, {"comm", "trainer"}, {"direction", "send"}};
  f.Counter("rdma_process_posted_bytes_total", send, 1000 * 65536.0);
  f.Counter("rdma_process_posted_work_requests_total", send, 1000);
  const auto findings = CheckQpDepth(f.Build(0), nullptr, {});
  ASSERT_EQ(findings.size(), 1U);
  EXPECT_EQ(findings[0].severity, Severity::kOk);
  EXPECT_NE(
      findings[0].observed.find("64 KiB messages, measured by the preload library over 1000 sends"),
      std::string::npos)
      << findings[0].observed;
  EXPECT_EQ(findings[0].expected,
            "at least 16 WRs across the RC QPs (data rate x an assumed 80 us round trip, "
            "--doctor.rtt, / message size), at most 16 x 16 in one QP");
  // Without the preload figure, --doctor.message-size decides.
  DoctorOptions small;
  small.message_size_bytes = 1024;
  EXPECT_EQ(CheckQpDepth(QpHost(512).Build(0), nullptr, small)[0].severity, Severity::kWarn)
      << "1 KiB messages need 977 WRs";
}

// The pitfall's other half: "far too large for the link". 100 Gb/s, 4 KiB: 256 recommended;
// a 16,384-deep send queue is 64 x that (info), 4,096 is exactly 16 x (ok).
TEST(DoctorSizing, QpDepthFarTooLargeIsReported) {
  Families f = QpHost(256);
  f.Gauge("rdma_process_qp_max_send_wrs", kTrainer, 16384);
  const auto findings = CheckQpDepth(f.Build(0), nullptr, {});
  ASSERT_EQ(findings.size(), 1U);
  EXPECT_EQ(findings[0].severity, Severity::kInfo);
  EXPECT_NE(findings[0].observed.find("deepest 16384 WRs"), std::string::npos)
      << findings[0].observed;
  EXPECT_NE(findings[0].advice.find("64 x the 256 the link can keep busy"), std::string::npos)
      << findings[0].advice;
  Families fine = QpHost(256);
  fine.Gauge("rdma_process_qp_max_send_wrs", kTrainer, 4096);
  EXPECT_EQ(CheckQpDepth(fine.Build(0), nullptr, {})[0].severity, Severity::kOk);
  DoctorOptions strict;
  strict.qp_depth_excess = 8;
  Families again = QpHost(256);
  again.Gauge("rdma_process_qp_max_send_wrs", kTrainer, 4096);
  EXPECT_EQ(CheckQpDepth(again.Build(0), nullptr, strict)[0].severity, Severity::kInfo)
      << "--doctor.qp-depth-excess 8";
  Families shallow = QpHost(64);
  shallow.Gauge("rdma_process_qp_max_send_wrs", kTrainer, 16384);
  EXPECT_EQ(CheckQpDepth(shallow.Build(0), nullptr, {})[0].severity, Severity::kWarn)
      << "a shallow QP is the finding that costs throughput";
}

TEST(DoctorSizing, QpDepthWithoutAnActivePortIsSkippedNotHealthy) {
  Families f;
  f.Gauge("rdma_process_qp_min_send_wrs", kTrainer, 1);
  const auto findings = CheckQpDepth(f.Build(0), nullptr, {});
  ASSERT_EQ(findings.size(), 1U);
  EXPECT_EQ(findings[0].severity, Severity::kSkip);
  EXPECT_NE(findings[0].observed.find("no active port of mlx5_0"), std::string::npos);
}

TEST(DoctorSizing, QpsPerCoreCountsConnectedQpsOnly) {
  Families f;
  f.Gauge("rdma_host_online_cpus", {}, 8);
  f.Gauge("rdma_process_qps",
          {{"device", "mlx5_0"}, {"pid", "1"}, {"comm", "osd"}, {"type", "RC"}, {"state", "RTS"}},
          12);
  f.Gauge("rdma_process_qps",
          {{"device", "mlx5_1"}, {"pid", "1"}, {"comm", "osd"}, {"type", "RC"}, {"state", "RTS"}},
          4);
  f.Gauge("rdma_process_qps",
          {{"device", "mlx5_0"}, {"pid", "2"}, {"comm", "app"}, {"type", "RC"}, {"state", "RTS"}},
          2);
  f.Gauge("rdma_process_qps",
          {{"device", "mlx5_0"}, {"pid", "2"}, {"comm", "app"}, {"type", "RC"}, {"state", "INIT"}},
          100);
  const auto findings = CheckQpsPerCore(f.Build(0), nullptr, {});
  ASSERT_EQ(findings.size(), 2U);
  EXPECT_EQ(findings[0].scope, (Scope{{"pid", "1"}, {"comm", "osd"}}));
  EXPECT_EQ(findings[0].severity, Severity::kOk) << "16 on 8 CPUs, both devices summed";
  EXPECT_EQ(findings[1].severity, Severity::kInfo) << "INIT QPs carry nothing";
  EXPECT_EQ(findings[1].observed, "2 connected (RTS) QPs on 8 online CPUs: 0.25 per core");
  EXPECT_NE(findings[1].advice.find("(16 for all 8 CPUs)"), std::string::npos);
}

TEST(DoctorSizing, SrqSizingNeedsTheWorkloadAndChecksDepthAndLimit) {
  const auto srq = [](double depth, double limit) {
    Families f;
    const std::vector<Label> labels{
        {"device", "mlx5_0"}, {"pid", "7"}, {"comm", "server"}, {"srq", "1"}};
    f.Gauge("rdma_srq_max_wrs", labels, depth);
    f.Gauge("rdma_srq_limit_wrs", labels, limit);
    return f.Build(0);
  };
  const auto unknown = CheckSrqSizing(srq(4096, 100), nullptr, {});
  ASSERT_EQ(unknown.size(), 1U);
  EXPECT_EQ(unknown[0].severity, Severity::kSkip);
  EXPECT_NE(unknown[0].observed.find("--doctor.nodes and --doctor.flows"), std::string::npos);
  DoctorOptions options;
  options.nodes = 32;
  options.flows = 4;  // 32 x 4 x 1.2 = 153.6 -> 154
  const auto low_limit = CheckSrqSizing(srq(4096, 100), nullptr, options);
  EXPECT_EQ(low_limit[0].severity, Severity::kWarn);
  EXPECT_NE(low_limit[0].advice.find("arm srq_limit at 154"), std::string::npos)
      << low_limit[0].advice;
  const auto shallow = CheckSrqSizing(srq(128, 0), nullptr, options);
  EXPECT_EQ(shallow[0].severity, Severity::kWarn);
  EXPECT_NE(shallow[0].advice.find("max_wr above 154 (256 recommended)"), std::string::npos)
      << shallow[0].advice;
  EXPECT_EQ(CheckSrqSizing(srq(4096, 154), nullptr, options)[0].severity, Severity::kOk);
  EXPECT_EQ(CheckSrqSizing(srq(4096, 0), nullptr, options)[0].severity, Severity::kOk)
      << "an unarmed limit is queues.srq_limit's finding";
}

TEST(DoctorSizing, RegistrationChurnNeedsAWindowAndMostRegistrationsUndone) {
  const auto host = [](double seconds, double registered, double deregistered) {
    Families f;
    f.Counter("rdma_mr_registrations_total", {{"pid", "9"}, {"comm", "rpc"}}, registered);
    f.Counter("rdma_mr_deregistrations_total", {{"pid", "9"}, {"comm", "rpc"}}, deregistered);
    return f.Build(seconds);
  };
  const Snapshot start = host(0, 1000, 1000);
  EXPECT_EQ(CheckRegistrationChurn(start, nullptr, {})[0].severity, Severity::kSkip);
  const auto churn = CheckRegistrationChurn(host(10, 3000, 2950), &start, {});
  EXPECT_EQ(churn[0].severity, Severity::kWarn) << churn[0].observed;
  EXPECT_NE(churn[0].advice.find("200 registrations/s, 97.5%"), std::string::npos)
      << churn[0].advice;
  // As fast, but kept: a pool filling up, not churn.
  EXPECT_EQ(CheckRegistrationChurn(host(10, 3000, 1000), &start, {})[0].severity, Severity::kOk);
  // Slow churn is below the alert's 100/s.
  EXPECT_EQ(CheckRegistrationChurn(host(10, 1500, 1500), &start, {})[0].severity, Severity::kOk);
}

}  // namespace
}  // namespace rdmascope::doctor
