// The snapshot index the doctor checks read: lookups by name and labels, histograms, rates
// and counter resets, collector outcomes; the exporter's trend ring and the checks over it
// (its counter ring: doctor_lookback_test.cc).
#include <gtest/gtest.h>

#include <optional>

#include "doctor/check_util.h"
#include "doctor/checks.h"
#include "doctor/history.h"
#include "doctor/samples.h"
#include "unit/doctor_fixtures.h"

namespace rdmascope::doctor {
namespace {

using testing::Families;

TEST(DoctorSamples, FindsByNameAndLabelMatchers) {
  Families f;
  f.Gauge("m", {{"device", "a"}, {"port", "1"}}, 1);
  f.Gauge("m", {{"device", "a"}, {"port", "2"}}, 2);
  f.Gauge("m", {{"device", "b"}, {"port", "1"}}, 3);
  const Snapshot s = f.Build(0);
  EXPECT_EQ(s.Find("m").size(), 3U);
  EXPECT_EQ(s.Find("m", {{"device", "a"}}).size(), 2U);
  EXPECT_EQ(s.Value("m", {{"device", "b"}, {"port", "1"}}), 3);
  EXPECT_FALSE(s.Value("m", {{"device", "c"}}).has_value());
  EXPECT_FALSE(s.Value("absent").has_value());
  // A missing label matches "" as in PromQL.
  EXPECT_EQ(s.Find("m", {{"netdev", ""}}).size(), 3U);
  EXPECT_EQ(s.Exact("m", {{"device", "a"}, {"port", "2"}})->value, 2);
  EXPECT_EQ(s.Exact("m", {{"device", "a"}}), nullptr);  // exact: every label
}

TEST(DoctorSamples, HistogramsAreIndexedAsSumAndCount) {
  Families f;
  f.Histogram("h_bytes", {{"comm", "x"}}, 4096, 3);
  const Snapshot s = f.Build(0);
  EXPECT_EQ(s.Value("h_bytes_sum", {{"comm", "x"}}), 4096);
  EXPECT_EQ(s.Value("h_bytes_count", {{"comm", "x"}}), 3);
}

TEST(DoctorSamples, RateOverTheWindowAndNoneOnAReset) {
  Families before_f;
  before_f.Counter("c_total", {{"d", "1"}}, 100);
  before_f.Counter("c_total", {{"d", "2"}}, 100);
  Families now_f;
  now_f.Counter("c_total", {{"d", "1"}}, 150);
  now_f.Counter("c_total", {{"d", "2"}}, 5);  // reset
  now_f.Counter("c_total", {{"d", "3"}}, 5);  // new
  const Snapshot before = before_f.Build(10);
  const Snapshot now = now_f.Build(20);
  const auto series = now.Find("c_total");
  EXPECT_EQ(Rate(now, before, "c_total", *series[0]), 5);
  EXPECT_EQ(Increase(before, "c_total", *series[0]), 50);
  EXPECT_FALSE(Rate(now, before, "c_total", *series[1]).has_value());
  EXPECT_FALSE(Rate(now, before, "c_total", *series[2]).has_value());
  EXPECT_FALSE(Rate(before, before, "c_total", *before.Find("c_total")[0]).has_value());
}

TEST(DoctorSamples, CollectorOutcomes) {
  std::map<std::string, CollectorOutcome> collectors{
      {"rdma", {}}, {"ethtool", {.failed = true, .detail = "boom"}}};
  const Snapshot s = Families().Build(0, collectors);
  EXPECT_FALSE(s.Unavailable("rdma").has_value());
  EXPECT_EQ(s.Unavailable("ethtool"), "collector ethtool failed: boom");
  EXPECT_EQ(s.Unavailable("mr"), "collector mr is disabled (--collector.mr enables it)");
  // A snapshot that records no collectors (families built by hand) does not guess.
  EXPECT_FALSE(Families().Build(0).Unavailable("mr").has_value());
}

// --- The exporter's history (doctor/history.h) and the checks that read it ----------------

constexpr double kMiB = 1024 * 1024;
const std::vector<Label> kLeaker = {{"pid", "4242"}, {"comm", "leaker"}};
const std::vector<Label> kSteady = {{"pid", "7"}, {"comm", "steady"}};

// One collection at `t`: the leaker's outstanding and pinned bytes are `leaker_mib`, the steady
// process holds 8 MiB throughout; `c_total` stands for every counter /metrics has.
Snapshot Collection(double t, double leaker_mib, double suspect_mib = 1) {
  Families f;
  f.Counter("c_total", {{"d", "1"}}, t);
  f.Gauge("rdma_mr_outstanding_bytes", kLeaker, leaker_mib * kMiB);
  f.Gauge("rdma_mr_leak_suspect_bytes", kLeaker, suspect_mib * kMiB);
  f.Gauge("rdma_process_pinned_bytes", kLeaker, leaker_mib * kMiB);
  f.Gauge("rdma_mr_outstanding_bytes", kSteady, 8 * kMiB);
  f.Gauge("rdma_mr_leak_suspect_bytes", kSteady, 8 * kMiB);
  f.Gauge("rdma_process_pinned_bytes", kSteady, 8 * kMiB);
  return f.Build(t, testing::AllRan());
}

std::vector<double> KeptTimes(const History& history) {
  std::vector<double> times;
  const auto view = history.View();  // held: a range-for would not keep the temporary alive
  for (const auto& kept : view->kept) times.push_back(kept->seconds());
  return times;
}

TEST(DoctorHistory, KeepsOnlyTheTrendSeriesInTheTrendRing) {
  History history;
  EXPECT_TRUE(history.View()->counters.empty());
  history.Offer(Collection(100, 1));
  const auto view = history.View();
  EXPECT_EQ(view->started_seconds, 100);
  ASSERT_EQ(view->kept.size(), 1U);
  EXPECT_FALSE(view->kept[0]->Value("c_total").has_value());
  EXPECT_EQ(view->kept[0]->Find("rdma_mr_outstanding_bytes").size(), 2U);
  EXPECT_EQ(view->kept[0]->SeriesCount(), 6U);
}

TEST(DoctorHistory, OnePerIntervalAndBoundedDroppingTheOldest) {
  History history(/*max_kept=*/3, /*interval_seconds=*/60);
  for (double t : {0, 30, 60, 119, 120, 180, 240}) history.Offer(Collection(t, 1));
  // 30 and 119 came less than a minute after the last kept; 0 and 60 fell off the ring.
  EXPECT_EQ(KeptTimes(history), (std::vector<double>{120, 180, 240}));
}

TEST(DoctorHistory, ASnapshotOverTheSeriesBoundIsNotKept) {
  History history(60, 60, /*max_series=*/5);
  EXPECT_FALSE(history.Offer(Collection(0, 1)));  // 6 trend series
  EXPECT_EQ(history.kept(), 0U);
  EXPECT_EQ(history.View()->counters.size(), 1U);  // no window series: within the bound
}

TEST(DoctorHistory, EarliestIsTheOldestKeptSnapshotHoldingTheSeries) {
  History history;
  history.Offer(Families().Gauge("rdma_process_pinned_bytes", kSteady, 1).Build(0));
  history.Offer(Collection(60, 1));
  const auto view = history.View();
  const std::map<std::string, std::string> leaker{{"pid", "4242"}, {"comm", "leaker"}};
  const std::map<std::string, std::string> steady{{"pid", "7"}, {"comm", "steady"}};
  EXPECT_EQ(view->Earliest("rdma_process_pinned_bytes", leaker)->seconds(), 60);
  EXPECT_EQ(view->Earliest("rdma_process_pinned_bytes", steady)->seconds(), 0);
  EXPECT_EQ(view->Earliest("rdma_process_pinned_bytes", {{"pid", "1"}}), nullptr);
}

std::vector<Finding> WithId(const std::vector<Finding>& findings, std::string_view id) {
  std::vector<Finding> mine;
  for (const Finding& f : findings) {
    if (f.id == id) mine.push_back(f);
  }
  return mine;
}

const Finding* ForPid(const std::vector<Finding>& findings, const std::string& pid) {
  for (const Finding& f : findings) {
    for (const auto& [key, value] : f.scope) {
      if (key == "pid" && value == pid) return &f;
    }
  }
  return nullptr;
}

// A history of an hour (one snapshot a minute) in which the leaker grew from 1 to `to_mib`.
std::vector<Finding> OverAnHour(double to_mib, double suspect_mib = 1,
                                const DoctorOptions& options = {}) {
  History history;
  for (int minute = 0; minute <= 60; ++minute) {
    history.Offer(Collection(minute * 60, 1 + (to_mib - 1) * minute / 60, suspect_mib));
  }
  Snapshot now = Collection(3630, to_mib, suspect_mib);
  now.set_history(history.View());
  return RunChecks(now, history.View()->CounterBase(now.seconds()), options);
}

TEST(DoctorHistory, MrLeakNamesTheGrowingProcessWithOldRegions) {
  const auto leak = WithId(OverAnHour(101), "memory.mr_leak");
  const Finding* leaker = ForPid(leak, "4242");
  ASSERT_NE(leaker, nullptr);
  EXPECT_EQ(leaker->severity, Severity::kWarn);
  // The ring kept the last hour: 61 snapshots, the oldest at minute 1 (29.5 MiB by then).
  EXPECT_EQ(leaker->observed,
            "outstanding MR bytes 2.7 MiB -> 101 MiB over 59.5 min, 1 MiB in regions older "
            "than --collector.mr.leak-age");
  EXPECT_NE(leaker->advice.find("/debug/mr/stacks?pid=4242"), std::string::npos);
  const Finding* steady = ForPid(leak, "7");
  ASSERT_NE(steady, nullptr);
  EXPECT_EQ(steady->severity, Severity::kOk);
}

TEST(DoctorHistory, GrowthWithoutOldRegionsIsNoLeak) {
  const auto leak = WithId(OverAnHour(101, /*suspect_mib=*/0), "memory.mr_leak");
  ASSERT_NE(ForPid(leak, "4242"), nullptr);
  EXPECT_EQ(ForPid(leak, "4242")->severity, Severity::kOk);
}

// The severity of check `id` for `pid`, nullopt when it reported nothing for that process.
std::optional<Severity> SeverityOf(const std::vector<Finding>& findings, std::string_view id,
                                   const std::string& pid) {
  const std::vector<Finding> with_id = WithId(findings, id);  // ForPid points into it
  const Finding* found = ForPid(with_id, pid);
  return found == nullptr ? std::nullopt : std::optional(found->severity);
}

TEST(DoctorHistory, PinnedGrowthAgainstTheRulesSixtyFourMiB) {
  EXPECT_EQ(SeverityOf(OverAnHour(101), "memory.pinned_growth", "4242"), Severity::kWarn);
  EXPECT_EQ(SeverityOf(OverAnHour(40), "memory.pinned_growth", "4242"), Severity::kOk);
  DoctorOptions strict;
  strict.pinned_growth_bytes = 16 * kMiB;
  EXPECT_EQ(SeverityOf(OverAnHour(40, 1, strict), "memory.pinned_growth", "4242"), Severity::kWarn);
  EXPECT_EQ(SeverityOf(OverAnHour(40), "memory.pinned_growth", "7"), Severity::kOk);
}

TEST(DoctorHistory, ASubjectNewerThanTheLastKeptSnapshotIsSkipped) {
  History history;
  history.Offer(Families().Build(0, testing::AllRan()));
  Snapshot now = Collection(30, 50);
  now.set_history(history.View());
  for (const char* id : {"memory.mr_leak", "memory.pinned_growth"}) {
    const std::vector<Finding> with_id = WithId(RunChecks(now, nullptr, {}), id);
    const Finding* leaker = ForPid(with_id, "4242");
    ASSERT_NE(leaker, nullptr) << id;
    EXPECT_EQ(leaker->severity, Severity::kSkip);
    EXPECT_NE(leaker->observed.find("ask again in a minute"), std::string::npos);
  }
}

TEST(DoctorHistory, WithoutAnExporterTheHistoryChecksSaySo) {
  const auto findings = RunChecks(Collection(0, 50), nullptr, {});
  for (const char* id : {"memory.mr_leak", "memory.pinned_growth"}) {
    const auto mine = WithId(findings, id);
    ASSERT_EQ(mine.size(), 1U) << id;
    EXPECT_EQ(mine[0].severity, Severity::kSkip);
    EXPECT_EQ(mine[0].observed,
              "no exporter running: history needs rdmascope serve (use --exporter)");
  }
}

}  // namespace
}  // namespace rdmascope::doctor
