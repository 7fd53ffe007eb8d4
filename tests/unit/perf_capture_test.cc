// perf counters under capture and replay (collectors/perf_capture.h): a fake perf host
// recorded over two samples, then replayed through the real perf collector with no perf host
// asked; an open's errno replays as that errno; a hostile or missing file gives no count,
// never a made-up 0.
#include "collectors/perf_capture.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <fstream>

#include "core/capture.h"
#include "core/metric_set.h"
#include "unit/fixture_tree.h"
#include "unit/installed_session.h"

namespace rdmascope {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

// Two CPUs; cpu-clock counts `*count` on each, task-clock is refused as an unprivileged user's
// system-wide counting is. Every open is counted, so that a replay asking it fails.
struct FakeState {
  uint64_t count = 0;
  int opens = 0;
};

class FakeGroup : public PerfCounterGroup {
 public:
  FakeGroup(const FakeState* state, size_t members) : state_(state), members_(members) {}
  std::optional<std::vector<sys::PerfReading>> Read() const override {
    // Multiplexed: running is half of enabled, so the collector scales the count x2; enabled
    // time moves between reads (else the collector takes the event for one hotplug detached).
    return std::vector<sys::PerfReading>(members_,
                                         {state_->count, 4 * state_->count, 2 * state_->count});
  }

 private:
  const FakeState* state_;
  size_t members_;
};

class FakeHost : public PerfHost {
 public:
  explicit FakeHost(FakeState* state) : state_(state) {}
  std::vector<int> OnlineCpus() const override { return {0, 1}; }
  sys::CpuTopology ReadTopology() const override {
    return {.online = {0, 1}, .node_of_cpu = {{0, 0}, {1, 0}}, .socket_of_cpu = {{0, 0}, {1, 0}}};
  }
  std::expected<std::unique_ptr<PerfCounterGroup>, int> Open(
      const std::vector<perf_event_attr>& attrs, int) const override {
    ++state_->opens;
    if (attrs.front().config == PERF_COUNT_SW_TASK_CLOCK) return std::unexpected(EACCES);
    return std::make_unique<FakeGroup>(state_, attrs.size());
  }

 private:
  FakeState* state_;
};

using Installed = testing::InstalledSession;

std::unique_ptr<PerfCollector> Make(FakeState* state) {
  return std::make_unique<PerfCollector>(
      PerfOptions{.events = {"cpu-clock", "task-clock"}}, "/nonexistent",
      std::make_unique<CapturedPerfHost>(std::make_unique<FakeHost>(state)));
}

std::string Scrape(const PerfCollector& collector) {
  MetricSet out;
  collector.Collect(out);
  return testing::Serialise(out.Take());
}

struct Recorded {
  TempDir out;
  FakeState live;
  std::vector<std::string> scrapes;
  Recorded() {
    auto writer = capture::Writer::Create(dir(), false).value();
    Installed session(capture::Session::Recording(capture::Layout("/sys", "/proc"), writer.get()));
    EXPECT_TRUE(writer->BeginSample(1).has_value());
    const auto collector = Make(&live);
    for (size_t sample = 1; sample <= 2; ++sample) {
      if (sample > 1) {
        EXPECT_TRUE(writer->BeginSample(sample).has_value());
      }
      live.count += 500;
      scrapes.push_back(Scrape(*collector));
      EXPECT_TRUE(writer->CommitSample().has_value());
    }
    EXPECT_TRUE(writer->WriteIndex("test", {}).has_value());
  }
  fs::path dir() const { return out.path() / "cap"; }
  fs::path group(int sample, int cpu) const {
    return dir() / ("samples/000" + std::to_string(sample)) /
           PerfCaptureDir(
               {perf_event_attr{.type = PERF_TYPE_SOFTWARE, .config = PERF_COUNT_SW_CPU_CLOCK}},
               cpu)
               .value();
  }
  // Each scrape of a replay, and how often the perf host was asked.
  std::vector<std::string> Replay(int* opens) const {
    Installed session(capture::Session::Replaying(capture::Layout("/sys", "/proc"),
                                                  capture::Reader::Open(dir()).value()));
    FakeState state{.count = 777777};
    const auto collector = Make(&state);
    std::vector<std::string> replayed;
    for (int scrape = 0; scrape < 2; ++scrape) {
      session->NextSample();
      replayed.push_back(Scrape(*collector));
    }
    *opens = state.opens;
    return replayed;
  }
};

TEST(PerfCapture, RoundTripThroughThePerfCollector) {
  const Recorded capture;
  EXPECT_EQ(capture.live.opens, 3);  // cpu-clock on each CPU; task-clock refused on the first
  ASSERT_EQ(capture.scrapes.size(), 2U);
  // 2 CPUs x 500 x 2, then 2 x 1000 x 2.
  EXPECT_NE(capture.scrapes[0].find("rdma_perf_events_total{event=\"cpu-clock\",node=\"0\"} 2000"),
            std::string::npos)
      << capture.scrapes[0];
  EXPECT_NE(capture.scrapes[1].find("rdma_perf_event_supported{event=\"task-clock\"} 0"),
            std::string::npos);
  int opens = -1;
  EXPECT_EQ(capture.Replay(&opens), capture.scrapes);
  EXPECT_EQ(opens, 0);  // perf_event_open is never called under replay
}

TEST(PerfCapture, OpenErrnoReplaysAsThatErrno) {
  const Recorded capture;
  Installed session(capture::Session::Replaying(capture::Layout("/sys", "/proc"),
                                                capture::Reader::Open(capture.dir()).value()));
  FakeState state;
  CapturedPerfHost host(std::make_unique<FakeHost>(&state));
  const auto task_clock = host.Open(
      {perf_event_attr{.type = PERF_TYPE_SOFTWARE, .config = PERF_COUNT_SW_TASK_CLOCK}}, 0);
  ASSERT_FALSE(task_clock.has_value());
  EXPECT_EQ(task_clock.error(), EACCES);
  // A group the capture does not hold: ENODATA, not "unsupported by this CPU" (ENOENT).
  const auto other = host.Open({perf_event_attr{.type = PERF_TYPE_HARDWARE, .config = 1}}, 0);
  ASSERT_FALSE(other.has_value());
  EXPECT_EQ(other.error(), ENODATA);
  EXPECT_EQ(state.opens, 0);
}

TEST(PerfCapture, HostileOrMissingReadsGiveNoCount) {
  const Recorded capture;
  // Sample 2: CPU 0's read cut short, CPU 1's gone. As after a failed read live, the count
  // is not advanced from them: it stays at sample 1's, never a half-read or a 0.
  std::ofstream(capture.group(2, 0) / "read") << "1000 2000\n";
  fs::remove(capture.group(2, 1) / "read");
  int opens = -1;
  const auto replayed = capture.Replay(&opens);
  EXPECT_EQ(replayed[0], capture.scrapes[0]);
  EXPECT_NE(capture.scrapes[1].find("event=\"cpu-clock\",node=\"0\"} 4000"), std::string::npos);
  EXPECT_EQ(replayed[1].find("event=\"cpu-clock\",node=\"0\"} 4000"), std::string::npos)
      << replayed[1];
  EXPECT_NE(replayed[1].find("rdma_perf_events_total{event=\"cpu-clock\",node=\"0\"} 2000"),
            std::string::npos)
      << replayed[1];
}

TEST(PerfCapture, ParseReadingsRefusesWhatIsNotOneLinePerMember) {
  EXPECT_TRUE(ParsePerfReadings("1 2 3\n4 5 6\n", 2));
  EXPECT_EQ(ParsePerfReadings(FormatPerfReadings({{7, 8, 9}}), 1).value()[0].running, 9U);
  for (const char* bad : {"1 2 3\n", "1 2 3\n4 5 6\n7 8 9\n", "1 2\n4 5 6\n", "1 2 3 4\n4 5 6",
                          "-1 2 3\n4 5 6", "1 2 x\n4 5 6", "", "1  2 3\n4 5 6"}) {
    EXPECT_FALSE(ParsePerfReadings(bad, 2)) << bad;
  }
}

}  // namespace
}  // namespace rdmascope
