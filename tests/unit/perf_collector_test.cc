#include <gtest/gtest.h>

#include <cerrno>
#include <map>
#include <memory>

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
        std::pair{"pmu_icx.tree", std::vector<std::string>{"uncore_imc_free_running_0/read/",
                                                           "uncore_imc_free_running_0/write/"}},
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

// Ice Lake-SP names its free-running IMC events read/write (uncore_snbep.c,
// icx_uncore_imc_freerunning_events): memory-controller bytes must come out there too.
TEST(PerfCollector, IceLakeMemoryTrafficInBytes) {
  testing::TempDir root;
  testing::MaterialiseTree(testing::FixturePath("sysfs/pmu_icx.tree"), root.path());
  const auto read = sys::ResolvePerfEvent(root.path(), "uncore_imc_free_running_0/read/");
  ASSERT_TRUE(read) << read.error();
  EXPECT_EQ(MemoryTrafficOf(*read).direction, MemoryTraffic::Direction::kRead);
  EXPECT_DOUBLE_EQ(MemoryTrafficOf(*read).bytes_per_count, 64.0);
  const auto write = sys::ResolvePerfEvent(root.path(), "uncore_imc_free_running_0/write/");
  ASSERT_TRUE(write) << write.error();
  EXPECT_EQ(MemoryTrafficOf(*write).direction, MemoryTraffic::Direction::kWrite);
  const auto dclk = sys::ResolvePerfEvent(root.path(), "uncore_imc_free_running_0/dclk/");
  ASSERT_TRUE(dclk) << dclk.error();
  EXPECT_EQ(MemoryTrafficOf(*dclk).direction, MemoryTraffic::Direction::kNone);
  const auto ddrt = sys::ResolvePerfEvent(root.path(), "uncore_imc_free_running_0/ddrt_read/");
  ASSERT_TRUE(ddrt) << ddrt.error();
  EXPECT_EQ(MemoryTrafficOf(*ddrt).direction, MemoryTraffic::Direction::kNone)
      << "persistent-memory (DDR-T) traffic is not DRAM traffic";
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
  PerfTotals last;
  MetricSet out;
  MapPerf(States(), Samples(1), Topology(), false, last, out);
  EXPECT_EQ(out.dropped_duplicates(), 0U);
  EXPECT_TRUE(testing::MatchesGolden(testing::Serialise(out.Take()), "perf.prom"));
}

TEST(PerfCollector, CountersNeverGoDown) {
  PerfTotals last;
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
  PerfTotals last;
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

// --- CPU hotplug ------------------------------------------------------------------------
// A fake kernel with the hotplug behaviour of kernel/events/core.c: when a CPU goes offline,
// perf_event_exit_cpu() -> __perf_event_exit_context() detaches its events (DETACH_GROUP,
// state OFF); they are not re-enabled when the CPU returns, and read() keeps returning the
// frozen count and time_enabled. perf_event_open() on an offline CPU fails with ENODEV.
class FakeKernel {
 public:
  struct Event {
    int cpu;
    uint64_t value = 0;
    uint64_t enabled = 0;
    bool attached = true;
  };
  std::map<int, int> node_of_online_cpu;  // the CPUs online now, and their nodes
  std::vector<std::shared_ptr<Event>> events;

  void Run(int cpu, uint64_t count) {
    for (auto& event : events) {
      if (event->cpu == cpu && event->attached) event->value += count;
    }
  }
  // Time passes: attached events on online CPUs accumulate enabled time.
  void Tick() {
    for (auto& event : events) {
      if (event->attached && node_of_online_cpu.contains(event->cpu)) event->enabled += 1000;
    }
  }
  void Offline(int cpu) {
    node_of_online_cpu.erase(cpu);
    for (auto& event : events) {
      if (event->cpu == cpu) event->attached = false;
    }
  }
  void Online(int cpu, int node) { node_of_online_cpu[cpu] = node; }
};

class FakeGroup : public PerfCounterGroup {
 public:
  explicit FakeGroup(std::vector<std::shared_ptr<FakeKernel::Event>> events)
      : events_(std::move(events)) {}
  std::optional<std::vector<sys::PerfReading>> Read() const override {
    std::vector<sys::PerfReading> readings;
    for (const auto& event : events_) {
      readings.push_back({event->value, event->enabled, event->enabled});
    }
    return readings;
  }

 private:
  std::vector<std::shared_ptr<FakeKernel::Event>> events_;
};

class FakeHost : public PerfHost {
 public:
  explicit FakeHost(std::shared_ptr<FakeKernel> kernel) : kernel_(std::move(kernel)) {}
  std::vector<int> OnlineCpus() const override {
    std::vector<int> cpus;
    for (const auto& [cpu, node] : kernel_->node_of_online_cpu) cpus.push_back(cpu);
    return cpus;
  }
  sys::CpuTopology ReadTopology() const override {
    // Like sysfs: an offline CPU is in no node's cpulist and has no topology/ directory.
    sys::CpuTopology topology;
    topology.online = OnlineCpus();
    topology.node_of_cpu = kernel_->node_of_online_cpu;
    topology.socket_of_cpu = kernel_->node_of_online_cpu;
    return topology;
  }
  std::expected<std::unique_ptr<PerfCounterGroup>, int> Open(
      const std::vector<perf_event_attr>& attrs, int cpu) const override {
    if (!kernel_->node_of_online_cpu.contains(cpu)) return std::unexpected(ENODEV);
    std::vector<std::shared_ptr<FakeKernel::Event>> group;
    for (size_t i = 0; i < attrs.size(); ++i) {
      group.push_back(std::make_shared<FakeKernel::Event>(FakeKernel::Event{.cpu = cpu}));
      kernel_->events.push_back(group.back());
    }
    return std::make_unique<FakeGroup>(std::move(group));
  }

 private:
  std::shared_ptr<FakeKernel> kernel_;
};

class Hotplug : public ::testing::Test {
 protected:
  std::unique_ptr<PerfCollector> Make(bool per_cpu) {
    kernel_->Online(0, 0);
    kernel_->Online(1, 0);
    return std::make_unique<PerfCollector>(PerfOptions{.events = {"cpu-clock"}, .per_cpu = per_cpu},
                                           "/nonexistent", std::make_unique<FakeHost>(kernel_));
  }
  // rdma_perf_events_total for the series whose `label` is `value`; -1 if absent.
  double Scrape(const PerfCollector& collector, const std::string& label,
                const std::string& value) {
    kernel_->Tick();
    MetricSet out;
    collector.Collect(out);
    for (const auto& family : out.Take()) {
      if (family.name != "rdma_perf_events_total") continue;
      for (const auto& metric : family.metric) {
        for (const auto& l : metric.label) {
          if (l.name == label && l.value == value) return metric.counter.value;
        }
      }
    }
    return -1;
  }
  std::shared_ptr<FakeKernel> kernel_ = std::make_shared<FakeKernel>();
};

TEST_F(Hotplug, CpuThatLeavesAndReturnsIsCountedAgain) {
  const auto collector = Make(/*per_cpu=*/false);
  kernel_->Run(0, 100);
  kernel_->Run(1, 100);
  EXPECT_EQ(Scrape(*collector, "node", "0"), 200);

  kernel_->Run(1, 50);  // counted up to the moment CPU 1 leaves
  kernel_->Offline(1);
  kernel_->Run(0, 100);
  EXPECT_EQ(Scrape(*collector, "node", "0"), 350) << "CPU 1's count stays in the node's sum";

  kernel_->Online(1, 0);
  EXPECT_EQ(Scrape(*collector, "node", "0"), 350) << "the new event has not run yet";
  kernel_->Run(1, 30);
  kernel_->Run(0, 100);
  EXPECT_EQ(Scrape(*collector, "node", "0"), 480) << "300 (CPU 0) + 150 + 30 (CPU 1)";
}

TEST_F(Hotplug, PerCpuSeriesKeepsMovingAfterTheCpuReturns) {
  const auto collector = Make(/*per_cpu=*/true);
  kernel_->Run(1, 100);
  EXPECT_EQ(Scrape(*collector, "cpu", "1"), 100);
  kernel_->Offline(1);
  EXPECT_EQ(Scrape(*collector, "cpu", "1"), 100) << "offline: the series stays, frozen";
  kernel_->Online(1, 0);
  Scrape(*collector, "cpu", "1");
  kernel_->Run(1, 20);
  EXPECT_EQ(Scrape(*collector, "cpu", "1"), 120);
  kernel_->Run(1, 20);
  EXPECT_EQ(Scrape(*collector, "cpu", "1"), 140);
}

// Offline and online again between two scrapes: the online list looks unchanged, but the old
// event is detached (its time_enabled stopped). It must be replaced, not read frozen forever.
TEST_F(Hotplug, CycleBetweenTwoScrapesIsDetected) {
  const auto collector = Make(/*per_cpu=*/true);
  kernel_->Run(1, 100);
  EXPECT_EQ(Scrape(*collector, "cpu", "1"), 100);
  kernel_->Offline(1);
  kernel_->Online(1, 0);
  kernel_->Run(1, 40);  // goes nowhere: no event is attached on CPU 1
  EXPECT_EQ(Scrape(*collector, "cpu", "1"), 100);
  kernel_->Run(1, 40);
  EXPECT_EQ(Scrape(*collector, "cpu", "1"), 140) << "counted by the replacement event";
}

TEST_F(Hotplug, CpuOnlinedLaterIsCounted) {
  const auto collector = Make(/*per_cpu=*/false);
  kernel_->Run(0, 10);
  EXPECT_EQ(Scrape(*collector, "node", "1"), -1) << "no CPU on node 1 yet";
  kernel_->Online(2, 1);
  Scrape(*collector, "node", "1");
  kernel_->Run(2, 70);
  EXPECT_EQ(Scrape(*collector, "node", "1"), 70);
  kernel_->Offline(2);
  EXPECT_EQ(Scrape(*collector, "node", "1"), 70)
      << "an offline CPU keeps its node (sysfs no longer lists it)";
}

}  // namespace
}  // namespace rdmascope
