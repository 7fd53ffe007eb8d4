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

// Where FEC_GET counts no corrected bits, the driver's `ethtool -S` counter, else corrected
// codewords x 75 bits (FBOSS's estimate for RS(544,514)), as rdma:link_fec_pre_ber:rate12m. A
// 400G port (4 x 106.25 Gb/s = 425e9 b/s) over 10 s carries 4.25e12 bits.
TEST(DoctorLinkFec, PreBerFromTheDriversCountersAndTheCodewordEstimate) {
  // Each (series, stat or "", increase over 10 s) of the port eth2.
  struct Counter {
    const char* name;
    const char* stat;
    double increase;
  };
  const auto check = [](const std::vector<Counter>& counters) {
    const auto build = [&](bool later) {
      Families f;
      const std::vector<Label> port{{"device", "mlx5_0"}, {"port", "1"}, {"netdev", "eth2"}};
      f.Gauge("rdma_link_line_rate_bits_per_second", port, 425e9);
      f.Gauge("rdma_link_lanes", port, 4);
      f.Gauge(
          "rdma_link_fec_info",
          {{"device", "mlx5_0"}, {"port", "1"}, {"netdev", "eth2"}, {"mode", "rs"}, {"auto", "1"}},
          1);
      for (const Counter& c : counters) {
        const double value = 1000 + (later ? c.increase : 0);
        if (*c.stat != 0) {
          f.Counter(c.name, {{"device", "eth2"}, {"stat", c.stat}}, value);
        } else {
          f.Counter(
              c.name,
              {{"device", "mlx5_0"}, {"port", "1"}, {"netdev", "eth2"}, {"source", "netlink"}},
              value);
        }
      }
      return f.Build(later ? 110 : 100);
    };
    const Snapshot before = build(false), now = build(true);
    return CheckFecPreBer(now, &before, {});
  };
  // mlx5's rx_corrected_bits_phy: 850000 bits / 4.25e12 = 2e-7: warning.
  auto f = check({{"rdma_ethtool_stat", "rx_corrected_bits_phy", 850000}});
  ASSERT_EQ(f.size(), 1U);
  EXPECT_EQ(f[0].severity, Severity::kWarn);
  EXPECT_NE(f[0].observed.find("2e-07"), std::string::npos) << f[0].observed;
  EXPECT_NE(f[0].observed.find("the driver's rx_corrected_bits_phy"), std::string::npos);
  // Codewords only (ice): 17000 x 75 = 1.275e6 bits / 4.25e12 = 3e-7, said to be an estimate.
  f = check({{"rdma_link_fec_corrected_codewords_total", "", 17000}});
  ASSERT_EQ(f.size(), 1U);
  EXPECT_EQ(f[0].severity, Severity::kWarn);
  EXPECT_NE(f[0].observed.find("3e-07"), std::string::npos) << f[0].observed;
  EXPECT_NE(f[0].observed.find("estimated from corrected codewords"), std::string::npos);
  // bnxt_en's rx_fec_corrected_blocks alike.
  f = check({{"rdma_ethtool_stat", "rx_fec_corrected_blocks", 17000}});
  ASSERT_EQ(f.size(), 1U);
  EXPECT_EQ(f[0].severity, Severity::kWarn);
  // FEC_GET's bits win over its codewords: 212500 bits = 5e-8, healthy (the estimate, 3e-7,
  // would warn); the driver's bits over the estimate alike.
  f = check({{"rdma_link_fec_corrected_bits_total", "", 212500},
             {"rdma_link_fec_corrected_codewords_total", "", 17000}});
  ASSERT_EQ(f.size(), 1U);
  EXPECT_EQ(f[0].severity, Severity::kOk);
  f = check({{"rdma_ethtool_stat", "rx_corrected_bits", 212500},
             {"rdma_ethtool_stat", "rx_fec_corrected_blocks", 17000}});
  ASSERT_EQ(f.size(), 1U);
  EXPECT_EQ(f[0].severity, Severity::kOk);
  // No counter at all: no finding.
  EXPECT_TRUE(check({}).empty());
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

// Without the partner's modes, the module's advertisement: a 400G port with a 400G module
// running 200G is degraded (the reference 400 Gb/s); with a 100G module, 100G is all it can do.
TEST(DoctorLinkFec, SpeedWithoutPartnerModesAgainstTheModule) {
  const auto check = [](double speed, double module) {
    Families f;
    const std::vector<Label> port{{"device", "mlx5_0"}, {"port", "1"}, {"netdev", "eth2"}};
    f.Gauge("rdma_link_speed_bits_per_second", port, speed);
    f.Gauge("rdma_link_max_speed_bits_per_second", port, 400e9);
    f.Gauge("rdma_link_module_max_speed_bits_per_second", port, module);
    return CheckLinkSpeed(f.Build(100), nullptr, {});
  };
  const auto degraded = check(200e9, 400e9);
  ASSERT_EQ(degraded.size(), 1U);
  EXPECT_EQ(degraded[0].severity, Severity::kWarn);
  EXPECT_EQ(degraded[0].observed, "200 Gb/s");
  EXPECT_EQ(degraded[0].expected,
            "400 Gb/s (the port's fastest mode, which its module (400 Gb/s) carries; no partner "
            "modes)");
  EXPECT_EQ(degraded[0].fix, "ethtool -r eth2");
  const auto slow_module = check(100e9, 100e9);
  ASSERT_EQ(slow_module.size(), 1U);
  EXPECT_EQ(slow_module[0].severity, Severity::kOk);
  EXPECT_EQ(slow_module[0].expected,
            "100 Gb/s (the module's advertised maximum, below the port's 400 Gb/s; no partner "
            "modes)");
  // 100G in the 400G port of a 200G module: below both.
  EXPECT_EQ(check(100e9, 200e9)[0].severity, Severity::kWarn);
}

}  // namespace
}  // namespace rdmascope::doctor
