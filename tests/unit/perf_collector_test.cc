#include <gtest/gtest.h>

#include "collectors/perf.h"
#include "sys/perf_events.h"
#include "unit/fixture_tree.h"

namespace rdmascope {
namespace {

using sys::PerfReading;

TEST(PerfEvents, GroupsAndNames) {
  const auto groups = sys::ParseEventGroups(
      {"cycles", "{cycles2,instructions}", "amd_df/event=0x07,umask=0x38/",
       "{uncore_imc_0/event=0x04,umask=0x03/,uncore_imc_0/cas_count_write/}"});
  ASSERT_TRUE(groups) << groups.error();
  ASSERT_EQ(groups->size(), 4U);
  EXPECT_EQ((*groups)[1], (std::vector<std::string>{"cycles2", "instructions"}));
  EXPECT_EQ((*groups)[2], (std::vector<std::string>{"amd_df/event=0x07,umask=0x38/"}))
      << "commas inside a PMU event's terms are not separators";
  EXPECT_EQ((*groups)[3], (std::vector<std::string>{"uncore_imc_0/event=0x04,umask=0x03/",
                                                    "uncore_imc_0/cas_count_write/"}));
  EXPECT_FALSE(sys::ParseEventGroups({"{cycles,instructions"}));
  EXPECT_FALSE(sys::ParseEventGroups({"{cycles,,instructions}"}));
  EXPECT_FALSE(sys::ParseEventGroups({"cycles", "{instructions,cycles}"})) << "twice";
}

TEST(PerfEvents, MultiplexingScale) {
  EXPECT_EQ(sys::ScaledValue({.value = 100, .enabled = 10, .running = 10}), 100.0);
  EXPECT_EQ(sys::ScaledValue({.value = 100, .enabled = 40, .running = 10}), 400.0);
  EXPECT_FALSE(sys::ScaledValue({.value = 0, .enabled = 40, .running = 0}))
      << "never on a counter: no estimate, not 0";
}

// libpfm4 knows perf's generic names, so the event label can be exactly what users type.
TEST(PerfEvents, GenericNamesThroughLibpfm4) {
  const auto misses = sys::ResolvePerfEvent("/nonexistent", "LLC-load-misses");
  ASSERT_TRUE(misses) << misses.error();
  EXPECT_EQ(misses->attr.type, static_cast<uint32_t>(PERF_TYPE_HW_CACHE));
  EXPECT_EQ(misses->attr.config, PERF_COUNT_HW_CACHE_LL | (PERF_COUNT_HW_CACHE_OP_READ << 8) |
                                     (PERF_COUNT_HW_CACHE_RESULT_MISS << 16));
  const auto stalls = sys::ResolvePerfEvent("/nonexistent", "stalled-cycles-frontend");
  ASSERT_TRUE(stalls) << stalls.error();
  EXPECT_EQ(stalls->attr.type, static_cast<uint32_t>(PERF_TYPE_HARDWARE));
  EXPECT_EQ(stalls->attr.config, static_cast<uint64_t>(PERF_COUNT_HW_STALLED_CYCLES_FRONTEND));
  const auto clock = sys::ResolvePerfEvent("/nonexistent", "cpu-clock");
  ASSERT_TRUE(clock);
  EXPECT_EQ(clock->attr.type, static_cast<uint32_t>(PERF_TYPE_SOFTWARE));
  const auto bogus = sys::ResolvePerfEvent("/nonexistent", "no-such-event");
  ASSERT_FALSE(bogus);
  EXPECT_NE(bogus.error().find("libpfm4"), std::string::npos);
}

TEST(PerfCollector, DefaultsFollowTheMemoryControllers) {
  for (const auto& [tree, imc] :
       {std::pair{"pmu_skx.tree", std::vector<std::string>{"uncore_imc_0/cas_count_read/",
                                                           "uncore_imc_0/cas_count_write/",
                                                           "uncore_imc_1/cas_count_read/",
                                                           "uncore_imc_1/cas_count_write/"}},
        std::pair{"pmu_icx.tree",
                  std::vector<std::string>{"uncore_imc_free_running_0/data_read/",
                                           "uncore_imc_free_running_0/data_write/"}},
        std::pair{"pmu_epyc.tree", std::vector<std::string>{}}}) {
    testing::TempDir root;
    testing::MaterialiseTree(testing::FixturePath(std::string("sysfs/") + tree), root.path());
    auto events = DefaultPerfEvents(root.path());
    ASSERT_GE(events.size(), 4U);
    EXPECT_EQ(events[0], "{cycles,instructions}");
    events.erase(events.begin(), events.begin() + 4);
    EXPECT_EQ(events, imc) << tree;
  }
}

TEST(PerfCollector, MemoryTrafficInBytes) {
  testing::TempDir root;
  testing::MaterialiseTree(testing::FixturePath("sysfs/pmu_skx.tree"), root.path());
  const auto read = sys::ResolvePerfEvent(root.path(), "uncore_imc_0/cas_count_read/");
  ASSERT_TRUE(read) << read.error();
  const MemoryTraffic traffic = MemoryTrafficOf(*read);
  EXPECT_EQ(traffic.direction, MemoryTraffic::Direction::kRead);
  EXPECT_DOUBLE_EQ(traffic.bytes_per_count, 64.0) << "6.103515625e-5 MiB: one cache line";
  const auto clockticks = sys::ResolvePerfEvent(root.path(), "uncore_imc_0/clockticks/");
  ASSERT_TRUE(clockticks);
  EXPECT_EQ(MemoryTrafficOf(*clockticks).direction, MemoryTraffic::Direction::kNone);
}

// Two nodes of two CPUs, a multiplexed event, an event that never ran, an unsupported one,
// and a memory controller counted on one CPU per socket.
std::vector<PerfEventState> States() {
  return {{.name = "cycles", .supported = true},
          {.name = "LLC-load-misses", .supported = true},
          {.name = "stalled-cycles-frontend", .supported = false, .reason = "no PMU"},
          {.name = "uncore_imc_0/cas_count_read/",
           .supported = true,
           .traffic = {MemoryTraffic::Direction::kRead, 64}},
          {.name = "uncore_imc_0/cas_count_write/",
           .supported = true,
           .traffic = {MemoryTraffic::Direction::kWrite, 64}}};
}

sys::CpuTopology Topology() {
  sys::CpuTopology topology;
  topology.online = {0, 1, 2, 3};
  topology.node_of_cpu = {{0, 0}, {1, 0}, {2, 1}, {3, 1}};
  topology.socket_of_cpu = topology.node_of_cpu;
  return topology;
}

std::vector<PerfSample> Samples(uint64_t scale) {
  return {{0, 0, {1000 * scale, 100, 100}},
          {0, 1, {2000 * scale, 100, 100}},
          {0, 2, {500 * scale, 100, 50}},  // multiplexed: half the time on a counter
          {0, 3, {0, 100, 0}},             // never ran: no estimate from this CPU
          {1, 0, {10 * scale, 100, 100}},
          {3, 0, {1000 * scale, 100, 100}},
          {3, 2, {3000 * scale, 100, 100}},
          {4, 0, {400 * scale, 100, 100}}};
}

TEST(PerfCollector, GoldenExposition) {
  std::map<std::string, double> last;
  MetricSet out;
  MapPerf(States(), Samples(1), Topology(), false, last, out);
  EXPECT_EQ(out.dropped_duplicates(), 0U);
  EXPECT_TRUE(testing::MatchesGolden(testing::Serialise(out.Take()), "perf.prom"));
}

TEST(PerfCollector, CountersNeverGoDown) {
  std::map<std::string, double> last;
  MetricSet first;
  MapPerf(States(), Samples(2), Topology(), false, last, first);
  MetricSet second;  // a smaller multiplexing estimate on the next scrape
  MapPerf(States(), Samples(1), Topology(), false, last, second);
  for (const auto& family : second.Take()) {
    if (family.name != "rdma_perf_events_total") continue;
    for (const auto& metric : family.metric) {
      if (metric.label[0].value == "cycles" && metric.label[1].value == "0") {
        EXPECT_EQ(metric.counter.value, 6000) << "kept at the first scrape's 2 x 3000";
      }
    }
  }
}

TEST(PerfCollector, PerCpuSeries) {
  std::map<std::string, double> last;
  MetricSet out;
  MapPerf(States(), Samples(1), Topology(), true, last, out);
  size_t cycles_series = 0;
  for (const auto& family : out.Take()) {
    if (family.name != "rdma_perf_events_total") continue;
    for (const auto& metric : family.metric) {
      if (metric.label[0].value == "cycles") {
        ++cycles_series;
        ASSERT_EQ(metric.label.size(), 3U);
        EXPECT_EQ(metric.label[2].name, "cpu");
      }
    }
  }
  EXPECT_EQ(cycles_series, 3U) << "CPU 3 never ran: no series rather than a 0";
}

}  // namespace
}  // namespace rdmascope
