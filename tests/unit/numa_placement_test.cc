// Threads' NUMA nodes and memory per node (sys/numa_placement.*, profile/numa_sampler.*) on a
// fixture procfs and a 2-node sysfs topology: comms with ") 9 9 (", vanished tasks and
// processes, zombies, malformed numa_maps lines, and the host.numa_placement advice.
#include "sys/numa_placement.h"

#include <gtest/gtest.h>

#include <fstream>

#include "profile/numa_sampler.h"
#include "unit/fixture_tree.h"

namespace rdmascope {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using testing::WriteText;

// A /proc/PID/task/TID/stat line (proc(5) fields 1..52) with `cpu` as field 39. Fields 4..38
// are 3: a parser that splits after the first ')' of a comm holding ") 9 9 (" reads field 36
// as 39 and finds CPU 3 (node 1) instead.
std::string StatLine(uint32_t tid, const std::string& comm, int cpu, char state = 'S') {
  std::string line = std::to_string(tid) + " (" + comm + ") " + state;
  for (int field = 4; field <= 52; ++field) {
    line += " " + (field == 39 ? std::to_string(cpu) : field < 39 ? "3" : "0");
  }
  return line + "\n";
}

class NumaFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    // Two nodes: CPUs 0-1 on node 0, 2-3 on node 1.
    WriteText(sysfs() / "devices/system/cpu/online", "0-3\n");
    WriteText(sysfs() / "devices/system/node/node0/cpulist", "0-1\n");
    WriteText(sysfs() / "devices/system/node/node1/cpulist", "2-3\n");
  }
  fs::path sysfs() const { return dir_.path() / "sys"; }
  fs::path procfs() const { return dir_.path() / "proc"; }
  void Task(uint32_t pid, uint32_t tid, const std::string& comm, int cpu, char state = 'S') {
    WriteText(procfs() / std::to_string(pid) / "task" / std::to_string(tid) / "stat",
              StatLine(tid, comm, cpu, state));
  }
  sys::CpuTopology Topology() const { return sys::ReadCpuTopology(sysfs()); }

  TempDir dir_;
};

TEST(StatProcessor, CountsFieldsAfterTheLastParenthesis) {
  EXPECT_EQ(sys::ParseStatProcessor(StatLine(7, "worker", 2)), 2);
  EXPECT_EQ(sys::ParseStatProcessor(StatLine(7, "x) 9 9 (y", 0)), 0);
  EXPECT_EQ(sys::ParseStatComm(StatLine(7, "x) 9 9 (y", 0)), "x) 9 9 (y");
}

TEST(StatProcessor, TruncatedOrMalformedLinesGiveNothing) {
  const std::string line = StatLine(7, "worker", 2);
  EXPECT_EQ(sys::ParseStatProcessor(line.substr(0, line.size() / 2)), std::nullopt);
  EXPECT_EQ(sys::ParseStatProcessor("7 worker S 1 2 3"), std::nullopt);
  EXPECT_EQ(sys::ParseStatProcessor(""), std::nullopt);
}

TEST_F(NumaFixture, ReadsEachThreadsNodeSkippingVanishedZombiesAndUnknownCpus) {
  Task(100, 100, "main", 0);
  Task(100, 101, "x) 9 9 (y", 1);  // node 0, not CPU 3's node 1
  Task(100, 102, "poller", 2);
  Task(100, 103, "gone", 3, 'Z');
  Task(100, 104, "offline", 9);                           // a CPU of no known node: not node 0
  fs::create_directories(procfs() / "100/task/105");      // exited between listing and reading
  WriteText(procfs() / "100/task/106/stat", "106 (cut");  // malformed
  const auto threads = sys::ReadThreadCpus(procfs(), 100, Topology());
  ASSERT_EQ(threads.size(), 3u);
  EXPECT_EQ(threads[0].tid, 100u);
  EXPECT_EQ(threads[0].node, 0);
  EXPECT_EQ(threads[1].comm, "x) 9 9 (y");
  EXPECT_EQ(threads[1].cpu, 1);
  EXPECT_EQ(threads[1].node, 0);
  EXPECT_EQ(threads[2].cpu, 2);
  EXPECT_EQ(threads[2].node, 1);
  EXPECT_TRUE(sys::ReadThreadCpus(procfs(), 999, Topology()).empty());  // vanished process
}

TEST(NumaMaps, BytesPerNodeByTheMappingsPageSize) {
  const auto memory = sys::ParseNumaMaps(
      "55d0c0000000 default file=/usr/bin/app mapped=3 N0=2 N1=1 kernelpagesize_kB=4\n"
      "7f2000000000 default file=/dev/hugepages/buf huge dirty=2 N1=2 kernelpagesize_kB=2048\n"
      "7f3000000000 default anon=512 dirty=512 N0=512 kernelpagesize_kB=4\n"
      "7f4000000000 default file=/usr/lib/libc.so.6\n");  // nothing resident: no N, no size
  EXPECT_EQ(memory.malformed_lines, 0u);
  EXPECT_EQ(memory.bytes_by_node,
            (std::map<int, uint64_t>{{0, 514 * 4096ULL}, {1, 4096ULL + (4ULL << 20)}}));
}

TEST(NumaMaps, MalformedLinesAreSkippedNeverZeroFilled) {
  const auto memory = sys::ParseNumaMaps(
      "7f0000000000 default anon=1 N0=1 kernelpagesize_kB=4\n"
      "7f1000000000 default anon=5 N1=abc kernelpagesize_kB=4\n"     // bad count
      "7f2000000000 default anon=5 N1=5\n"                           // no page size
      "7f3000000000 default anon=5 N1=5 kernelpagesize_kB=0\n"       // impossible page size
      "7f4000000000 default anon=5 N1=5 kernelpagesize_kB=4 N0=1\n"  // size not last
      "zzzz default anon=5 N1=5 kernelpagesize_kB=4\n"               // no address
      "7f5000000000 default anon=5 N1=99999999999999999999 kernelpagesize_kB=4\n"
      "7f6000000000 default anon=5 N=5 kernelpagesize_kB=4\n"  // no node: not an N token
      "\n");
  EXPECT_EQ(memory.malformed_lines, 6u);
  // Only the good line; node 1 appears nowhere (no made-up 0 either).
  EXPECT_EQ(memory.bytes_by_node, (std::map<int, uint64_t>{{0, 4096}}));
}

TEST_F(NumaFixture, SamplerHistogramMajorityAndOffNicShare) {
  Task(200, 200, "main", 0);
  Task(200, 201, "worker", 2);
  WriteText(procfs() / "200/numa_maps",
            "7f0000000000 default anon=3 N0=1 N1=3 kernelpagesize_kB=4\n"
            "garbage N0=1 kernelpagesize_kB=4\n");
  profile::NumaSampler sampler(procfs(), Topology(), 200);
  sampler.Sample();
  Task(200, 201, "worker", 3);  // still node 1
  sampler.Sample();
  Task(200, 201, "worker", 1);  // one sample on node 0
  Task(200, 200, "main", 1);
  sampler.Sample();

  const profile::NumaSummary numa = sampler.Summarize("mlx5_0", 0);
  ASSERT_EQ(numa.threads.size(), 2u);
  EXPECT_EQ(numa.samples, 6u);
  EXPECT_EQ(numa.threads[0].samples_by_node, (std::map<int, uint64_t>{{0, 3}}));
  EXPECT_EQ(numa.threads[0].majority_node, 0);
  EXPECT_EQ(numa.threads[1].samples_by_node, (std::map<int, uint64_t>{{0, 1}, {1, 2}}));
  EXPECT_EQ(numa.threads[1].majority_node, 1);
  EXPECT_EQ(numa.nic_device, "mlx5_0");
  EXPECT_EQ(numa.off_nic_samples, 2u);
  EXPECT_DOUBLE_EQ(*numa.off_nic_share, 2.0 / 6);
  ASSERT_TRUE(numa.memory_bytes_by_node);
  EXPECT_EQ(*numa.memory_bytes_by_node, (std::map<int, uint64_t>{{0, 4096}, {1, 3 * 4096}}));
  EXPECT_DOUBLE_EQ(*numa.memory_off_nic_share, 0.75);
  EXPECT_EQ(numa.malformed_numa_maps_lines, 1u);

  // The NIC's node unknown (-1 from sysfs, or no device): no share, not 0.
  const profile::NumaSummary unknown = sampler.Summarize("rxe0", -1);
  EXPECT_EQ(unknown.nic_node, std::nullopt);
  EXPECT_EQ(unknown.off_nic_share, std::nullopt);
  EXPECT_EQ(unknown.memory_off_nic_share, std::nullopt);
  EXPECT_EQ(unknown.threads.size(), 2u);
}

TEST_F(NumaFixture, ExitedProcessKeepsItsLastReadingAndAddsNoSample) {
  Task(300, 300, "main", 2);
  WriteText(procfs() / "300/numa_maps", "7f0000000000 default anon=2 N1=2 kernelpagesize_kB=4\n");
  profile::NumaSampler sampler(procfs(), Topology(), 300);
  sampler.Sample();
  // A zombie: its task reads Z, its numa_maps is empty.
  Task(300, 300, "main", 0, 'Z');
  WriteText(procfs() / "300/numa_maps", "");
  sampler.Sample();
  fs::remove_all(procfs() / "300");  // reaped
  sampler.Sample();
  const auto numa = sampler.Summarize("mlx5_0", 1);
  EXPECT_EQ(numa.samples, 1u);
  EXPECT_EQ(numa.off_nic_share, 0.0);
  EXPECT_EQ(*numa.memory_bytes_by_node, (std::map<int, uint64_t>{{1, 8192}}));
}

TEST_F(NumaFixture, VanishedProcessMeasuresNothing) {
  profile::NumaSampler sampler(procfs(), Topology(), 404);
  sampler.Sample();
  const auto numa = sampler.Summarize("mlx5_0", 0);
  EXPECT_TRUE(numa.threads.empty());
  EXPECT_EQ(numa.off_nic_share, std::nullopt);
  EXPECT_EQ(numa.memory_bytes_by_node, std::nullopt);
  EXPECT_EQ(profile::NumaPlacementAdvice(numa, 404, "app", {}, 0.5), std::nullopt);
}

TEST(NumaAdvice, WarnsWithTheNumactlFixWhenMostSamplesAreOffTheNicsNode) {
  profile::NumaSummary numa;
  numa.nic_device = "mlx5_1";
  numa.nic_node = 1;
  numa.samples = 10;
  numa.threads.resize(2);
  numa.off_nic_samples = 8;
  numa.off_nic_share = 0.8;
  const auto finding =
      profile::NumaPlacementAdvice(numa, 42, "trainer", {"./trainer", "--epochs", "3"}, 0.5);
  ASSERT_TRUE(finding);
  EXPECT_EQ(finding->id, "host.numa_placement");
  EXPECT_EQ(finding->severity, doctor::Severity::kWarn);
  EXPECT_EQ(finding->fix, "numactl --cpunodebind=1 --membind=1 -- ./trainer --epochs 3");
  EXPECT_NE(finding->observed.find("80%"), std::string::npos) << finding->observed;
  EXPECT_EQ(finding->runbook, "docs/runbook.md#rdmaprocessoffnicnumanode");

  // Threads local, memory remote: still off.
  numa.off_nic_share = 0.1;
  numa.memory_off_nic_share = 0.9;
  EXPECT_EQ(profile::NumaPlacementAdvice(numa, 42, "trainer", {}, 0.5)->severity,
            doctor::Severity::kWarn);
  EXPECT_EQ(profile::NumaPlacementAdvice(numa, 42, "trainer", {}, 0.5)->fix,
            "numactl --cpunodebind=1 --membind=1 -- trainer");
  numa.memory_off_nic_share = 0.2;
  const auto local = profile::NumaPlacementAdvice(numa, 42, "trainer", {}, 0.5);
  EXPECT_EQ(local->severity, doctor::Severity::kOk);
  EXPECT_TRUE(local->fix.empty());
}

}  // namespace
}  // namespace rdmascope
