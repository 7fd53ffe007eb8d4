// Injected faults through the code's own seams (issue 18 item 3; docs/testing.md, "Faults"):
// reads of /proc and sysfs that fail, come back short or find the file gone
// (sysfs::SetFaultHookForTesting), and perf_event_open/read failing or short
// (sys::SetPerfSyscallsForTesting). Each gives a missing series (never a made-up 0 or an
// empty label), and the code recovers once the fault is gone.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "bpf/process_liveness.h"
#include "collectors/mr.h"
#include "collectors/perf.h"
#include "collectors/pinned_memory.h"
#include "collectors/resources.h"
#include "core/process_metrics.h"
#include "core/sysfs.h"
#include "sys/perf_events.h"
#include "unit/fixture_tree.h"

namespace rdmascope {
namespace {

namespace fs = std::filesystem;
using testing::WriteText;

// Installs a fault for the paths whose string ends with `suffix`; removed with the object.
class ScopedFault {
 public:
  ScopedFault(std::string suffix, sysfs::InjectedFault fault) {
    sysfs::SetFaultHookForTesting([suffix = std::move(suffix), fault](
                                      const fs::path& path) -> std::optional<sysfs::InjectedFault> {
      if (path.native().ends_with(suffix)) return fault;
      return std::nullopt;
    });
  }
  ~ScopedFault() { sysfs::SetFaultHookForTesting({}); }
  ScopedFault(const ScopedFault&) = delete;
  ScopedFault& operator=(const ScopedFault&) = delete;
};

// The errno of a failed read, 0 when it succeeded.
template <typename T>
int ErrorOf(const std::expected<T, int>& result) {
  return result ? 0 : result.error();
}

// --- the seam itself -----------------------------------------------------------------------

TEST(SysfsFaultSeam, FailShortAndVanish) {
  testing::TempDir root;
  WriteText(root.path() / "attr", "123456\n");
  WriteText(root.path() / "dir" / "a", "");
  {
    const ScopedFault fault("/attr", {.error = EIO});
    EXPECT_EQ(ErrorOf(sysfs::ReadFileChecked(root.path() / "attr", 4096)), EIO);
    EXPECT_FALSE(sysfs::ReadUnsigned(root.path() / "attr"));
  }
  {
    const ScopedFault fault("/attr", {.short_read = 3});
    EXPECT_EQ(sysfs::ReadFile(root.path() / "attr", 4096), "123");
  }
  {
    const ScopedFault fault("/dir", {.error = ENOENT});
    const auto listed = sysfs::ListDirectoryChecked(root.path() / "dir");
    ASSERT_TRUE(listed);
    EXPECT_TRUE(listed->empty()) << "vanished: nothing there";
  }
  {
    const ScopedFault fault("/dir", {.error = EMFILE});
    EXPECT_EQ(ErrorOf(sysfs::ListDirectoryChecked(root.path() / "dir")), EMFILE);
  }
  // The fault gone, the same reads work again.
  EXPECT_EQ(sysfs::ReadUnsigned(root.path() / "attr"), 123456U);
  EXPECT_EQ(sysfs::ListDirectory(root.path() / "dir").size(), 1U);
  EXPECT_EQ(ErrorOf(sysfs::ReadFileChecked(root.path() / "missing", 4096)), ENOENT);
}

// --- /proc/PID/stat cut short ----------------------------------------------------------------

constexpr uint64_t kNsPerTick = 10000000;  // USER_HZ 100

std::string StatLine(uint32_t pid, const std::string& start_ticks) {
  return std::to_string(pid) + " (a b) c) S 1 1 1 0 -1 4194560 100 0 0 0 5 6 0 0 20 0 3 0 " +
         start_ticks + " 123456 789 18446744073709551615\n";
}

TEST(ProcStatShortRead, CutStartTimeIsNoField) {
  const std::string line = StatLine(42, "123456");
  EXPECT_EQ(ParseStartTicks(line), 123456U);
  const auto cut = line.substr(0, line.find(" 123456 ") + 5);  // "... 1234"
  EXPECT_FALSE(ParseStartTicks(cut)) << "a short read ending inside starttime";
  // The last field of the line, complete only with its end of line.
  EXPECT_EQ(ParseStatField("1 (x) S 2 3\n", 5), 3U);
  EXPECT_FALSE(ParseStatField("1 (x) S 2 3", 5));
}

// A short read of a live process's stat must not make it "gone" (its regions and queues would
// be dropped for good): it is unknown, and alive again when the read is whole.
TEST(ProcStatShortRead, LiveProcessIsNotGone) {
  testing::TempDir procfs;
  const std::string line = StatLine(42, "500012");
  const uint64_t start_ns = 500012 * kNsPerTick + 5;
  WriteText(procfs.path() / "42" / "stat", line.substr(0, line.find(" 500012 ") + 5));
  EXPECT_EQ(ProcessLiveness(procfs.path(), 42, start_ns, kNsPerTick), Liveness::kUnknown)
      << "a file cut inside starttime";
  WriteText(procfs.path() / "42" / "stat", line);
  {
    const ScopedFault fault("/42/stat", {.short_read = line.find(" 500012 ") + 4});
    EXPECT_EQ(ProcessLiveness(procfs.path(), 42, start_ns, kNsPerTick), Liveness::kUnknown)
        << "a read cut short inside starttime";
  }
  {
    const ScopedFault fault("/42/stat", {.error = EACCES});
    EXPECT_EQ(ProcessLiveness(procfs.path(), 42, start_ns, kNsPerTick), Liveness::kUnknown);
  }
  {
    const ScopedFault fault("/42/stat", {.error = ESRCH});
    EXPECT_EQ(ProcessLiveness(procfs.path(), 42, start_ns, kNsPerTick), Liveness::kGone)
        << "reaped between open and read";
  }
  EXPECT_EQ(ProcessLiveness(procfs.path(), 42, start_ns, kNsPerTick), Liveness::kAlive);
}

// --- comm unreadable: no comm="" ------------------------------------------------------------

void MakeRdmaProcess(const fs::path& procfs, int pid, const std::string& comm) {
  const fs::path dir = procfs / std::to_string(pid);
  fs::create_directories(dir / "fd");
  WriteText(dir / "comm", comm + "\n");
  WriteText(dir / "status", "Name:\t" + comm + "\nVmPin:\t   4 kB\nThreads:\t1\n");
  fs::create_symlink("/dev/infiniband/uverbs0", dir / "fd" / "3");
}

std::string Exposition(MetricSet& out) { return testing::Serialise(out.Take()); }

TEST(CommUnreadable, PinnedMemoryLeavesTheProcessOut) {
  testing::TempDir procfs;
  MakeRdmaProcess(procfs.path(), 100, "trainer");
  MakeRdmaProcess(procfs.path(), 200, "server");
  UverbsHolders holders(procfs.path(), "/nonexistent", std::chrono::seconds(3600));
  {
    const ScopedFault fault("/100/comm", {.error = ENOENT});
    MetricSet out;
    MapPinned(holders.Read(), out);
    const std::string text = Exposition(out);
    EXPECT_EQ(text.find("comm=\"\""), std::string::npos) << text;
    EXPECT_EQ(text.find("pid=\"100\""), std::string::npos) << text;
    EXPECT_NE(text.find("pid=\"200\",comm=\"server\""), std::string::npos) << text;
  }
  {
    const ScopedFault fault("/100/comm", {.short_read = 0});  // an empty comm file
    MetricSet out;
    MapPinned(holders.Read(), out);
    EXPECT_EQ(Exposition(out).find("comm=\"\""), std::string::npos);
  }
  MetricSet out;
  MapPinned(holders.Read(), out);
  EXPECT_NE(Exposition(out).find("pid=\"100\",comm=\"trainer\""), std::string::npos)
      << "back once the comm reads again";
}

TEST(CommUnreadable, ResourcesOwnerIsUnknownNotEmpty) {
  std::vector<sys::RdmaDeviceResources> devices(1);
  devices[0].name = "mlx5_0";
  devices[0].entries.push_back({.kind = sys::RdmaResourceKind::kPd, .pid = 100});
  MetricSet out;
  MapResources(
      devices, NameFilter(), 10, [](uint32_t) { return std::string(); }, out);
  const std::string text = Exposition(out);
  EXPECT_EQ(text.find("comm=\"\""), std::string::npos) << text;
  EXPECT_NE(text.find("pid=\"100\",comm=\"unknown\""), std::string::npos) << text;

  testing::TempDir procfs;
  WriteText(procfs.path() / "100" / "comm", "trainer\n");
  {
    const ScopedFault fault("/100/comm", {.error = ENOENT});
    EXPECT_EQ(ProcessComm(procfs.path(), 100), "unknown");
  }
  EXPECT_EQ(ProcessComm(procfs.path(), 100), "trainer");
}

// --- BPF map reads -----------------------------------------------------------------------------

// The probes' globals map unread: the counters it holds are left out, not served as 0 (the
// libbpf shim test fault_bpf_calls makes the lookup fail in a running exporter).
TEST(BpfMapReads, UnreadGlobalsAreNoSeries) {
  MrSnapshot snapshot;
  snapshot.processes.push_back({.pid = 7, .comm = "trainer", .outstanding_regions = 1});
  snapshot.globals_known = false;
  MetricSet out;
  MapMrSnapshot(snapshot, out);
  const std::string text = Exposition(out);
  EXPECT_EQ(text.find("reason=\"calls\""), std::string::npos) << text;
  EXPECT_EQ(text.find("reason=\"exit_events\""), std::string::npos) << text;
  EXPECT_NE(text.find("rdma_mr_outstanding_regions{pid=\"7\",comm=\"trainer\"} 1"),
            std::string::npos)
      << text;
  snapshot.globals_known = true;
  MapMrSnapshot(snapshot, out);
  EXPECT_NE(Exposition(out).find("rdma_mr_lost_total{reason=\"calls\"} 0"), std::string::npos);
}

// --- perf_event_open and read -----------------------------------------------------------------

struct FakePerf {
  int open_errno = 0;     // perf_event_open fails with it
  size_t read_limit = 0;  // bytes a read returns at most (0: all)
  uint64_t value = 7;
};
FakePerf fake_perf;

long FakeOpen(perf_event_attr*, pid_t, int, int, unsigned long) {
  if (fake_perf.open_errno != 0) {
    errno = fake_perf.open_errno;
    return -1;
  }
  return ::open("/dev/null", O_RDONLY | O_CLOEXEC);
}

// A group read (PERF_FORMAT_GROUP): { nr, enabled, running, values }, or one event's
// { value, enabled, running }.
ssize_t FakeRead(int, void* buf, size_t count) {
  std::vector<uint64_t> data;
  const size_t words = count / sizeof(uint64_t);
  if (words == 3) {
    data = {fake_perf.value, 1000, 1000};
  } else {
    data = {words - 3, 1000, 1000};
    for (size_t i = 3; i < words; ++i) data.push_back(fake_perf.value + i);
  }
  size_t bytes = data.size() * sizeof(uint64_t);
  if (fake_perf.read_limit != 0) bytes = std::min(bytes, fake_perf.read_limit);
  std::memcpy(buf, data.data(), bytes);
  return static_cast<ssize_t>(bytes);
}

constexpr sys::PerfSyscalls kFakePerfSyscalls{FakeOpen, FakeRead, ::close};

class PerfFaults : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_perf = {};
    sys::SetPerfSyscallsForTesting(&kFakePerfSyscalls);
  }
  void TearDown() override { sys::SetPerfSyscallsForTesting(nullptr); }
};

TEST_F(PerfFaults, OpenFailuresCarryTheirErrno) {
  for (const int err : {EMFILE, ENOENT, EACCES}) {
    fake_perf.open_errno = err;
    const auto group = sys::PerfGroup::Open({perf_event_attr{}, perf_event_attr{}}, -1, 0);
    ASSERT_FALSE(group);
    EXPECT_EQ(group.error(), err);
  }
  EXPECT_NE(sys::PerfOpenErrorReason(EMFILE).find("too many open files"), std::string::npos);
  fake_perf.open_errno = 0;
  EXPECT_TRUE(sys::PerfGroup::Open({perf_event_attr{}}, -1, 0));
}

TEST_F(PerfFaults, ShortGroupReadIsNoReading) {
  auto group = sys::PerfGroup::Open({perf_event_attr{}, perf_event_attr{}}, -1, 0);
  ASSERT_TRUE(group);
  fake_perf.read_limit = 4 * sizeof(uint64_t);  // nr, enabled, running, first value only
  EXPECT_FALSE(group->Read()) << "the second member was not read: no 0 for it";
  fake_perf.read_limit = 0;
  const auto readings = group->Read();
  ASSERT_TRUE(readings);
  ASSERT_EQ(readings->size(), 2U);
  EXPECT_EQ((*readings)[1].value, 11U);
  // Counted one by one (inherit): short is nothing too.
  auto single = sys::PerfGroup::Open({perf_event_attr{}}, -1, 0, /*inherit=*/true);
  ASSERT_TRUE(single);
  fake_perf.read_limit = 2 * sizeof(uint64_t);
  EXPECT_FALSE(single->Read());
}

// rdma_perf_events_total of `event`, by series; none when absent.
std::map<std::string, double> PerfTotals(const std::string& text, const std::string& event) {
  std::map<std::string, double> found;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.starts_with("rdma_perf_events_total{")) continue;
    if (line.find("event=\"" + event + "\"") == std::string::npos) continue;
    const auto space = line.rfind(' ');
    found[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return found;
}

class PerfCollectorFaults : public PerfFaults {
 protected:
  void SetUp() override {
    PerfFaults::SetUp();
    WriteText(sysfs_.path() / "devices/system/cpu/online", "0\n");
  }
  std::unique_ptr<PerfCollector> Make() {
    return std::make_unique<PerfCollector>(
        PerfOptions{.events = {"{cpu-clock,task-clock}"}, .per_cpu = true}, sysfs_.path(),
        SystemPerfHost(sysfs_.path()));
  }
  std::string Scrape(const PerfCollector& collector) {
    MetricSet out;
    collector.Collect(out);
    return Exposition(out);
  }
  testing::TempDir sysfs_;
};

TEST_F(PerfCollectorFaults, ShortGroupReadIsAMissingSeriesNotZero) {
  const auto collector = Make();
  fake_perf.read_limit = 4 * sizeof(uint64_t);
  std::string text = Scrape(*collector);
  EXPECT_TRUE(PerfTotals(text, "task-clock").empty()) << text;
  EXPECT_TRUE(PerfTotals(text, "cpu-clock").empty()) << text;
  fake_perf.read_limit = 0;
  text = Scrape(*collector);
  ASSERT_EQ(PerfTotals(text, "task-clock").size(), 1U) << text;
  EXPECT_EQ(PerfTotals(text, "task-clock").begin()->second, 11);
}

TEST_F(PerfCollectorFaults, OutOfFileDescriptorsAtStartIsRetried) {
  fake_perf.open_errno = EMFILE;
  const auto collector = Make();
  std::string text = Scrape(*collector);
  EXPECT_NE(text.find("rdma_perf_event_supported{event=\"cpu-clock\"} 0"), std::string::npos)
      << text;
  EXPECT_TRUE(PerfTotals(text, "cpu-clock").empty()) << text;
  fake_perf.open_errno = 0;
  Scrape(*collector);  // opens the group
  text = Scrape(*collector);
  EXPECT_NE(text.find("rdma_perf_event_supported{event=\"cpu-clock\"} 1"), std::string::npos)
      << text;
  EXPECT_EQ(PerfTotals(text, "cpu-clock").size(), 1U) << text;
}

TEST_F(PerfCollectorFaults, UnsupportedEventIsNotRetried) {
  fake_perf.open_errno = ENOENT;
  const auto collector = Make();
  fake_perf.open_errno = 0;
  const std::string text = Scrape(*collector);
  EXPECT_NE(text.find("rdma_perf_event_supported{event=\"cpu-clock\"} 0"), std::string::npos)
      << text;
}

}  // namespace
}  // namespace rdmascope
