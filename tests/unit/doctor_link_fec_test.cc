// doctor's FEC and link-speed checks (doctor/checks_link_fec.cc): the rules' thresholds, one
// finding per port, copper 10x stricter, NRZ links and links without partner modes not judged,
// a counter reset skipped, the fix shell-quoted.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "doctor/checks.h"
#include "unit/doctor_fixtures.h"

namespace rdmascope::doctor {
namespace {

using testing::Families;

// eth2 as the fixture's port, at a pre-FEC BER of `ber` over 10 s; `media` the module's.
std::vector<Finding> PreBer(double ber, const std::string& media = "optical",
                            double lane_rate = 106.25e9, const std::string& netdev = "eth2",
                            double base = 1e9) {
  const auto build = [&](bool later) {
    Families f;
    const std::vector<Label> port{{"device", "mlx5_0"}, {"port", "1"}, {"netdev", netdev}};
    const std::vector<Label> netlink{
        {"device", "mlx5_0"}, {"port", "1"}, {"netdev", netdev}, {"source", "netlink"}};
    f.Gauge("rdma_link_line_rate_bits_per_second", port, 4 * lane_rate);
    f.Gauge("rdma_link_lanes", port, 4);
    f.Gauge(
        "rdma_link_fec_info",
        {{"device", "mlx5_0"}, {"port", "1"}, {"netdev", netdev}, {"mode", "rs"}, {"auto", "0"}},
        1);
    f.Gauge("rdma_link_module_info",
            {{"device", "mlx5_0"}, {"port", "1"}, {"netdev", netdev}, {"media", media}}, 1);
    f.Counter("rdma_link_fec_corrected_bits_total", netlink,
              later ? base + ber * 4 * lane_rate * 10 : 1e9);
    return f.Build(later ? 110 : 100);
  };
  const Snapshot before = build(false), now = build(true);
  return CheckFecPreBer(now, &before, {});
}

TEST(DoctorLinkFec, PreBerThresholdsPerMedia) {
  auto f = PreBer(2e-7);
  ASSERT_EQ(f.size(), 1U);
  EXPECT_EQ(f[0].severity, Severity::kWarn);
  EXPECT_EQ(f[0].observed.substr(0, 19), "pre-FEC BER 2e-07 o");
  EXPECT_EQ(f[0].fix, "ethtool -I --show-fec eth2");
  EXPECT_EQ(f[0].runbook, "docs/runbook.md#rdmalinkprefecberhigh");
  EXPECT_EQ(PreBer(5e-8)[0].severity, Severity::kOk);
  EXPECT_EQ(PreBer(5e-8)[0].fix, "");
  EXPECT_EQ(PreBer(2e-5)[0].severity, Severity::kCrit);
  EXPECT_EQ(PreBer(2e-5)[0].runbook, "docs/runbook.md#rdmalinkprefecbercritical");
  // A DAC: 10x stricter.
  EXPECT_EQ(PreBer(5e-8, "passive copper")[0].severity, Severity::kWarn);
  EXPECT_EQ(PreBer(5e-9, "passive copper")[0].severity, Severity::kOk);
  EXPECT_EQ(PreBer(2e-6, "copper, linear active equalizers")[0].severity, Severity::kCrit);
  // NRZ lanes (25.78125 Gb/s): not judged, no finding.
  EXPECT_TRUE(PreBer(1e-4, "optical", 25.78125e9).empty());
  // A counter that went down (a link-up reset it): skipped, not healthy.
  EXPECT_EQ(PreBer(0, "optical", 106.25e9, "eth2", 10)[0].severity, Severity::kSkip);
  // A hostile interface name: quoted in the fix.
  EXPECT_EQ(PreBer(2e-7, "optical", 106.25e9, "e$(x)")[0].fix, "ethtool -I --show-fec 'e$(x)'");
}

TEST(DoctorLinkFec, NeedsAWindow) {
  const Snapshot now = testing::Host(true, true);
  const auto ber = CheckFecPreBer(now, nullptr, {});
  ASSERT_EQ(ber.size(), 1U);
  EXPECT_EQ(ber[0].severity, Severity::kSkip);
  const auto uncorrectable = CheckFecUncorrectable(now, nullptr, {});
  ASSERT_EQ(uncorrectable.size(), 1U);
  EXPECT_EQ(uncorrectable[0].severity, Severity::kSkip);
}

TEST(DoctorLinkFec, UncorrectableAndSpeedOnTheFixtureHosts) {
  for (const bool bad : {true, false}) {
    const Snapshot before = testing::Host(bad, false), now = testing::Host(bad, true);
    const auto u = CheckFecUncorrectable(now, &before, {});
    ASSERT_EQ(u.size(), 1U);
    EXPECT_EQ(u[0].severity, bad ? Severity::kCrit : Severity::kOk);
    EXPECT_EQ(u[0].observed, bad ? "3 uncorrectable FEC codewords in 10 s"
                                 : "0 uncorrectable FEC codewords in 10 s");
    const auto s = CheckLinkSpeed(now, &before, {});
    ASSERT_EQ(s.size(), 1U);
    EXPECT_EQ(s[0].severity, bad ? Severity::kWarn : Severity::kOk);
    EXPECT_EQ(s[0].observed, bad ? "200 Gb/s" : "400 Gb/s");
    EXPECT_EQ(s[0].fix, bad ? "ethtool -r eth2" : "");
  }
}

TEST(DoctorLinkFec, SpeedWithoutPartnerModesIsNotJudged) {
  Families f;
  const std::vector<Label> port{{"device", ""}, {"port", ""}, {"netdev", "eno1"}};
  f.Gauge("rdma_link_speed_bits_per_second", port, 100e9);
  f.Gauge("rdma_link_max_speed_bits_per_second", port, 400e9);
  const auto s = CheckLinkSpeed(f.Build(100), nullptr, {});
  ASSERT_EQ(s.size(), 1U);
  EXPECT_EQ(s[0].severity, Severity::kSkip);
  EXPECT_EQ(s[0].scope, (Scope{{"netdev", "eno1"}}));
}

}  // namespace
}  // namespace rdmascope::doctor
