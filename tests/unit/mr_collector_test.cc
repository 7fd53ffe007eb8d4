#include <gtest/gtest.h>

#include <map>

#include "collectors/mr.h"
#include "core/duration.h"
#include "unit/fixture_tree.h"

namespace rdmascope {
namespace {

MrSnapshot Snapshot() {
  MrSnapshot snapshot;
  snapshot.processes.push_back({.pid = 4242,
                                .comm = "trainer",
                                .registrations = 10,
                                .deregistrations = 4,
                                .failures = 1,
                                .outstanding_regions = 6,
                                .outstanding_bytes = 6 * 2097152,
                                .outstanding_implicit_odp = 1,
                                .access_seen = 0x7 | (1ULL << 40),
                                .not_huge_aligned_bytes = 4096,
                                .length_not_page_multiple = 1,
                                .aligned_huge = 9,
                                .aligned_page = 0,
                                .unaligned = 1,
                                .reregistrations = 2,
                                .reregistered_bytes = 2 * 2097152,
                                .access_registrations = {10, 10, 4},
                                .leak_suspect_regions = 2,
                                .leak_suspect_bytes = 2 * 2097152});
  MrHistograms h;
  h.latency.assign(32, 0);
  h.size.assign(48, 0);
  h.latency[12] = 3;  // (2 us, 4 us]
  h.latency[20] = 7;  // (0.5 ms, 1 ms]
  h.latency_sum_ns = 3 * 3000 + 7 * 800000;
  h.size[12] = 1;  // 4 KiB
  h.size[21] = 9;  // 2 MiB
  h.size_sum_bytes = 4096 + 9 * 2097152;
  snapshot.histograms["trainer"] = h;
  snapshot.released["old-job"] = {.regions = 3, .bytes = 3 * 65536};
  snapshot.released_at_exec["launcher"] = {.regions = 2, .bytes = 2 * 4096};
  snapshot.lost_exits = 2;
  snapshot.stale_calls = 3;
  return snapshot;
}

TEST(MrCollector, GoldenExposition) {
  MetricSet out;
  MapMrSnapshot(Snapshot(), out);
  EXPECT_EQ(out.dropped_duplicates(), 0U);
  EXPECT_TRUE(testing::MatchesGolden(testing::Serialise(out.Take()), "mr.prom"));
}

TEST(MrCollector, HistogramBucketsAreCumulativeAndExact) {
  MetricSet out;
  MapMrSnapshot(Snapshot(), out);
  for (const auto& family : out.Take()) {
    if (family.name != "rdma_mr_registration_size_bytes") continue;
    const auto& histogram = family.metric.at(0).histogram;
    EXPECT_EQ(histogram.sample_count, 10U);
    std::map<double, uint64_t> cumulative;
    for (const auto& bucket : histogram.bucket) {
      cumulative[bucket.upper_bound] = bucket.cumulative_count;
    }
    EXPECT_EQ(cumulative.at(4096), 1U) << "a 4096-byte region is in le=4096";
    EXPECT_EQ(cumulative.at(1048576), 1U);
    EXPECT_EQ(cumulative.at(2097152), 10U) << "2 MiB regions are in le=2097152";
    return;
  }
  FAIL() << "no size histogram";
}

// Per-registration details: every alignment class (a real 0 included), the flags used (not
// the unused ones), churn; summed with exited processes' counters when aggregated by comm.
TEST(MrCollector, RegistrationDetails) {
  MrSnapshot snapshot = Snapshot();
  MrProcess retired{.comm = "trainer", .aligned_page = 5, .reregistrations = 1};
  retired.access_registrations[20] = 3;  // IBV_ACCESS_RELAXED_ORDERING
  retired.access_registrations[9] = 1;   // no name in verbs.h's table
  snapshot.retired_counters["trainer"] = retired;
  for (const bool by_comm : {false, true}) {
    MetricSet out;
    MapMrSnapshot(snapshot, out, by_comm);
    std::map<std::string, double> got;
    for (const auto& family : out.Take()) {
      for (const auto& metric : family.metric) {
        std::string key = family.name;
        for (const auto& label : metric.label) {
          if (label.name == "alignment" || label.name == "flag") key += "/" + label.value;
        }
        got[key] = metric.counter.value;
      }
    }
    const double retired_page = by_comm ? 5 : 0, retired_rereg = by_comm ? 1 : 0;
    EXPECT_EQ(got["rdma_mr_registrations_by_alignment_total/2MiB"], 9);
    EXPECT_EQ(got["rdma_mr_registrations_by_alignment_total/4KiB"], retired_page);
    EXPECT_TRUE(got.contains("rdma_mr_registrations_by_alignment_total/4KiB"));
    EXPECT_EQ(got["rdma_mr_registrations_by_alignment_total/unaligned"], 1);
    EXPECT_EQ(got["rdma_mr_registrations_by_access_flag_total/LOCAL_WRITE"], 10);
    EXPECT_EQ(got["rdma_mr_registrations_by_access_flag_total/REMOTE_WRITE"], 10);
    EXPECT_EQ(got["rdma_mr_registrations_by_access_flag_total/REMOTE_READ"], 4);
    EXPECT_FALSE(got.contains("rdma_mr_registrations_by_access_flag_total/REMOTE_ATOMIC"));
    EXPECT_EQ(got.contains("rdma_mr_registrations_by_access_flag_total/RELAXED_ORDERING"), by_comm);
    EXPECT_EQ(got.contains("rdma_mr_registrations_by_access_flag_total/BIT_9"), by_comm);
    EXPECT_EQ(got["rdma_mr_reregistrations_total"], 2 + retired_rereg);
    EXPECT_EQ(got["rdma_mr_reregistered_bytes_total"], 2 * 2097152);
  }
}

}  // namespace
}  // namespace rdmascope

namespace rdmascope {
namespace {

TEST(ParseDuration, PrometheusStyle) {
  EXPECT_EQ(ParseDurationNs("90s"), 90'000'000'000ULL);
  EXPECT_EQ(ParseDurationNs("10m"), 600'000'000'000ULL);
  EXPECT_EQ(ParseDurationNs("1h30m"), 5'400'000'000'000ULL);
  EXPECT_EQ(ParseDurationNs("250ms"), 250'000'000ULL);
  EXPECT_EQ(ParseDurationNs("0s"), 0ULL);
  EXPECT_EQ(ParseDurationNs("2d"), 172'800'000'000'000ULL);
  for (const char* bad : {"", "10", "m", "10x", "1.5h", "-5s", "10 m", "99999999999999d"}) {
    EXPECT_FALSE(ParseDurationNs(bad)) << bad;
  }
}

}  // namespace
}  // namespace rdmascope

namespace rdmascope {
namespace {

// rdma_mr_lost_total is a counter: the regions a full map lost for a process that has exited
// stay counted (tests/fault/bpf_map_full.py saw it fall from 24 to 0 at the exit).
TEST(MrCollector, LostRegionsOfExitedProcessesStayCounted) {
  MrSnapshot snapshot;
  snapshot.processes.push_back({.pid = 7, .comm = "live", .lost_regions = 3});
  snapshot.retired_counters["gone"] = {.comm = "gone", .lost_regions = 24};
  for (const bool by_comm : {false, true}) {
    MetricSet out;
    MapMrSnapshot(snapshot, out, by_comm);
    const std::string text = testing::Serialise(out.Take());
    EXPECT_NE(text.find("rdma_mr_lost_total{reason=\"regions\"} 27\n"), std::string::npos)
        << "by_comm=" << by_comm << "\n"
        << text;
  }
}

TEST(MrCollector, AggregateByCommDropsPidAndSums) {
  MrSnapshot snapshot;
  snapshot.processes.push_back({.pid = 1,
                                .comm = "rank",
                                .registrations = 3,
                                .outstanding_regions = 2,
                                .outstanding_bytes = 100,
                                .access_seen = 1});
  snapshot.processes.push_back({.pid = 2,
                                .comm = "rank",
                                .registrations = 4,
                                .outstanding_regions = 1,
                                .outstanding_bytes = 50,
                                .access_seen = 4});
  snapshot.processes.push_back({.pid = 3, .comm = "other", .registrations = 1});
  // An exited "rank" keeps counting in the counters, not in the gauges.
  snapshot.retired_counters["rank"] = {.comm = "rank", .registrations = 10, .deregistrations = 9};
  MetricSet out;
  MapMrSnapshot(snapshot, out, /*by_comm=*/true);
  MapPinned({{.pid = 1, .comm = "rank", .pinned_bytes = 4096},
             {.pid = 2, .comm = "rank", .pinned_bytes = 8192}},
            out, /*by_comm=*/true);
  EXPECT_EQ(out.dropped_duplicates(), 0U);
  const std::string text = testing::Serialise(out.Take());
  EXPECT_EQ(text.find("pid="), std::string::npos) << text;
  EXPECT_TRUE(testing::MatchesGolden(text, "mr_by_comm.prom"));
}

}  // namespace
}  // namespace rdmascope
