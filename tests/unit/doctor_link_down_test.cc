// links.flapping (doctor/checks_link_down.cc): carrier downs over the window by the driver's
// reason, with the alerts' thresholds (1 warns, 3 critical); admin downs not counted; a
// reason's series new in the window counted whole; a fix per reason, names shell-quoted.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "doctor/checks.h"
#include "unit/doctor_fixtures.h"

namespace rdmascope::doctor {
namespace {

using testing::Families;

struct Downs {
  std::string reason;
  double before;  // < 0: no series yet
  double now;
};

std::vector<Finding> Check(const std::string& netdev, const std::vector<Downs>& downs,
                           const std::string& last_reason, bool window = true) {
  Families before;
  Families now;
  for (Families* f : {&before, &now}) {
    f->Gauge("rdma_link_source_available",
             {{"device", "mlx5_0"}, {"port", "1"}, {"netdev", netdev}, {"source", "module"}}, 1);
  }
  for (const Downs& d : downs) {
    const std::vector<Label> labels{{"device", "mlx5_0"},
                                    {"port", "1"},
                                    {"netdev", netdev},
                                    {"reason", d.reason},
                                    {"substate", ""}};
    if (d.before >= 0) before.Counter("rdma_link_down_events_total", labels, d.before);
    now.Counter("rdma_link_down_events_total", labels, d.now);
  }
  if (!last_reason.empty()) {
    now.Gauge("rdma_link_last_down_info",
              {{"device", "mlx5_0"},
               {"port", "1"},
               {"netdev", netdev},
               {"reason", last_reason},
               {"substate", ""}},
              1);
  }
  const Snapshot b = before.Build(0);
  const Snapshot n = now.Build(600);
  return CheckLinkFlapping(n, window ? &b : nullptr, {});
}

TEST(DoctorLinkDown, QuietWithoutDowns) {
  const auto findings = Check("eth2", {}, "");
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].severity, Severity::kOk);
  EXPECT_EQ(findings[0].id, "links.flapping");
  EXPECT_TRUE(findings[0].fix.empty());
}

TEST(DoctorLinkDown, OneDownWarnsWithTheReasonsAdvice) {
  // The no_cable series is new in the window: its 1 is counted whole.
  const auto findings = Check("eth2", {{"no_cable", -1, 1}}, "no_cable");
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].severity, Severity::kWarn);
  EXPECT_NE(findings[0].observed.find("1 carrier downs"), std::string::npos);
  EXPECT_NE(findings[0].observed.find("no_cable"), std::string::npos);
  EXPECT_NE(findings[0].advice.find("plug or reseat"), std::string::npos);
  EXPECT_EQ(findings[0].fix, "ethtool eth2");
  EXPECT_EQ(findings[0].runbook, "docs/runbook.md#rdmalinkwentdown");
}

TEST(DoctorLinkDown, ThreeDownsAreCriticalAcrossReasons) {
  const auto findings =
      Check("eth2", {{"link_training_failure", 4, 6}, {"bad_signal_integrity", -1, 1}},
            "bad_signal_integrity");
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].severity, Severity::kCrit);
  EXPECT_NE(findings[0].advice.find("clean the connectors"), std::string::npos);
  EXPECT_EQ(findings[0].fix, "ethtool -m eth2");
  EXPECT_EQ(findings[0].runbook, "docs/runbook.md#rdmalinkdownrepeatedly");
}

TEST(DoctorLinkDown, AdminDownsAndOldDownsAreNotCounted) {
  const auto findings = Check("eth2", {{"admin_down", -1, 5}, {"no_cable", 2, 2}}, "admin_down");
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].severity, Severity::kOk);
}

TEST(DoctorLinkDown, AResetCountsNothing) {
  const auto findings = Check("eth2", {{"overheat", 7, 1}}, "overheat");
  EXPECT_EQ(findings[0].severity, Severity::kOk);
}

TEST(DoctorLinkDown, WithoutAWindowItIsSkipped) {
  const auto findings = Check("eth2", {{"no_cable", -1, 1}}, "no_cable", false);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].severity, Severity::kSkip);
  EXPECT_NE(findings[0].observed.find("--window"), std::string::npos);
}

TEST(DoctorLinkDown, AHostileNameIsQuotedInTheFix) {
  const auto findings = Check("e$(x)", {{"overheat", -1, 1}}, "overheat");
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].fix, "ethtool -m 'e$(x)'");
}

}  // namespace
}  // namespace rdmascope::doctor
