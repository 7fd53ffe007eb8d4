#include "collectors/pinned_memory.h"

#include <gtest/gtest.h>

#include <fstream>

#include "collectors/mr.h"
#include "unit/fixture_tree.h"

namespace rdmascope {
namespace {

namespace fs = std::filesystem;

// A /proc with an RDMA process (uverbs open, 30 MiB pinned), a plain process, and one whose
// status has no VmPin line (a kernel thread).
void MakeProcess(const fs::path& procfs, int pid, const std::string& comm,
                 const std::string& vmpin_line, const std::vector<std::string>& fds) {
  const fs::path dir = procfs / std::to_string(pid);
  fs::create_directories(dir / "fd");
  std::ofstream(dir / "comm") << comm << "\n";
  std::ofstream(dir / "status") << "Name:\t" << comm << "\nVmRSS:\t 1000 kB\n"
                                << vmpin_line << "Threads:\t4\n";
  for (size_t i = 0; i < fds.size(); ++i)
    fs::create_symlink(fds[i], dir / "fd" / std::to_string(i));
}

TEST(PinnedMemory, ParsesVmPin) {
  EXPECT_EQ(ParseVmPinBytes("Name:\tx\nVmPin:\t   30720 kB\nVmHWM:\t1 kB\n"), 30720U * 1024);
  EXPECT_EQ(ParseVmPinBytes("Name:\tx\nVmPin:\t       0 kB\n"), 0U);
  EXPECT_FALSE(ParseVmPinBytes("Name:\tx\nVmRSS:\t 1 kB\n"));
  EXPECT_FALSE(ParseVmPinBytes("Name:\tx\nVmPin:\t lots\n"));
  EXPECT_FALSE(ParseVmPinBytes("Name:\tx\nVmPin:\t 12 MB\n"));
}

// Issue 26 item 3: ib_umem_get refuses only when pinned > RLIMIT_MEMLOCK and the task is not
// capable(CAP_IPC_LOCK) in the initial user namespace.
TEST(PinnedMemory, CapIpcLockInTheInitialUserNamespaceExemptsFromTheLimit) {
  EXPECT_EQ(ParseEffectiveCapabilities("Name:\tx\nCapInh:\t0000000000000000\n"
                                       "CapPrm:\t000001ffffffffff\nCapEff:\t000001ffffffffff\n"),
            0x1ffffffffffULL);
  EXPECT_EQ(ParseEffectiveCapabilities("Name:\tx\nCapEff:\t0000000000004000\n"), 0x4000U);
  EXPECT_FALSE(ParseEffectiveCapabilities("Name:\tx\nCapPrm:\t0000000000004000\n"));
  EXPECT_FALSE(ParseEffectiveCapabilities("Name:\tx\nCapEff:\t4000\n"));
  EXPECT_FALSE(ParseEffectiveCapabilities("Name:\tx\nCapEff:\t00000000000040zz\n"));

  const std::string_view init = "user:[4026531837]";
  EXPECT_TRUE(PinLimitExempt(0x1ffffffffffULL, init));   // root
  EXPECT_TRUE(PinLimitExempt(uint64_t{1} << 14, init));  // CAP_IPC_LOCK alone
  EXPECT_FALSE(PinLimitExempt(0x1ffffffffffULL & ~(uint64_t{1} << 14), init));
  EXPECT_FALSE(PinLimitExempt(0, init));                                // an ordinary user
  EXPECT_FALSE(PinLimitExempt(0x1ffffffffffULL, "user:[4026532412]"));  // rootless container
}

TEST(PinnedMemory, ExemptionReadFromStatusAndUserNamespace) {
  testing::TempDir procfs;
  MakeProcess(procfs.path(), 100, "root_app", "VmPin:\t   30720 kB\nCapEff:\t000001ffffffffff\n",
              {"/dev/infiniband/uverbs0"});
  fs::create_directories(procfs.path() / "100" / "ns");
  fs::create_symlink("user:[4026531837]", procfs.path() / "100" / "ns" / "user");
  MakeProcess(procfs.path(), 101, "user_app", "VmPin:\t   8 kB\nCapEff:\t0000000000000000\n",
              {"/dev/infiniband/uverbs0"});
  fs::create_directories(procfs.path() / "101" / "ns");
  fs::create_symlink("user:[4026531837]", procfs.path() / "101" / "ns" / "user");
  // No ns/user link (not readable without CAP_SYS_PTRACE): cannot tell.
  MakeProcess(procfs.path(), 102, "hidden", "VmPin:\t   8 kB\nCapEff:\t000001ffffffffff\n",
              {"/dev/infiniband/uverbs0"});
  UverbsHolders holders(procfs.path(), "/nonexistent", std::chrono::seconds(0));
  const auto pinned = holders.Read();
  ASSERT_EQ(pinned.size(), 3U);
  EXPECT_EQ(pinned[0].pin_limit_exempt, true);
  EXPECT_EQ(pinned[1].pin_limit_exempt, false);
  EXPECT_EQ(pinned[2].pin_limit_exempt, std::nullopt);
}

TEST(PinnedMemory, OnlyUverbsHolders) {
  testing::TempDir procfs;
  MakeProcess(procfs.path(), 100, "trainer", "VmPin:\t   30720 kB\n",
              {"/dev/null", "socket:[1234]", "/dev/infiniband/uverbs0"});
  MakeProcess(procfs.path(), 200, "bash", "VmPin:\t       0 kB\n", {"/dev/pts/0"});
  MakeProcess(procfs.path(), 300, "kthread", "", {"/dev/infiniband/uverbs1"});
  fs::create_directories(procfs.path() / "self");  // not a pid
  UverbsHolders holders(procfs.path(), "/nonexistent", std::chrono::seconds(0));
  const auto pinned = holders.Read();
  ASSERT_EQ(pinned.size(), 1U);
  EXPECT_EQ(pinned[0].pid, 100U);
  EXPECT_EQ(pinned[0].comm, "trainer");
  EXPECT_EQ(pinned[0].pinned_bytes, 30720U * 1024);
}

// prctl(PR_SET_NAME, "") leaves /proc/PID/comm readable and empty: the process keeps its
// series with comm="unknown", as rdma_process_resources does (ProcessComm), never comm="".
// A comm that cannot be read (the process is exiting) leaves it out of this scrape.
TEST(PinnedMemory, EmptyCommIsUnknownUnreadableCommIsLeftOut) {
  testing::TempDir procfs;
  MakeProcess(procfs.path(), 100, "", "VmPin:\t   8 kB\n", {"/dev/infiniband/uverbs0"});
  MakeProcess(procfs.path(), 101, "exiting", "VmPin:\t   4 kB\n", {"/dev/infiniband/uverbs0"});
  fs::remove(procfs.path() / "101" / "comm");
  UverbsHolders holders(procfs.path(), "/nonexistent", std::chrono::seconds(0));
  const auto pinned = holders.Read();
  ASSERT_EQ(pinned.size(), 1U);
  EXPECT_EQ(pinned[0].pid, 100U);
  EXPECT_EQ(pinned[0].comm, "unknown");
  EXPECT_EQ(pinned[0].pinned_bytes, 8U * 1024);
}

TEST(PinnedMemory, VanishedProcessIsDropped) {
  testing::TempDir procfs;
  MakeProcess(procfs.path(), 100, "trainer", "VmPin:\t   4 kB\n", {"/dev/infiniband/uverbs0"});
  UverbsHolders holders(procfs.path(), "/nonexistent", std::chrono::seconds(3600));
  EXPECT_EQ(holders.Read().size(), 1U);
  fs::remove_all(procfs.path() / "100");
  EXPECT_TRUE(holders.Read().empty()) << "gone between scans: a missing series, no error";
}

TEST(PinnedMemory, LockedMemoryLimitAndHostMemory) {
  const std::string limits =
      "Limit                     Soft Limit           Hard Limit           Units     \n"
      "Max open files            1024                 1048576              files     \n"
      "Max locked memory         8388608              16777216             bytes     \n";
  EXPECT_EQ(ParseLockedMemoryLimit(limits), 8388608U) << "the soft limit";
  EXPECT_FALSE(ParseLockedMemoryLimit(
      "Max locked memory         unlimited            unlimited            bytes\n"));
  EXPECT_FALSE(ParseLockedMemoryLimit("garbage"));
  EXPECT_EQ(ParseMemTotalBytes("MemTotal:       24576000 kB\nMemFree: 1 kB\n"), 24576000ULL * 1024);
  EXPECT_FALSE(ParseMemTotalBytes("MemFree: 1 kB\n"));
}

// A process with mlx5_1 (NUMA node 1) open: three threads last ran on node 0, one on node 1.
TEST(PinnedMemory, ThreadsOffTheDeviceNumaNode) {
  testing::TempDir procfs;
  testing::TempDir sysfs;
  MakeProcess(procfs.path(), 100, "trainer", "VmPin:\t   4 kB\n", {"/dev/infiniband/uverbs1"});
  const std::vector<int> last_cpu = {0, 1, 2, 5};
  for (size_t i = 0; i < last_cpu.size(); ++i) {
    const fs::path task = procfs.path() / "100" / "task" / std::to_string(100 + i);
    fs::create_directories(task);
    std::ofstream stat(task / "stat");
    stat << (100 + i) << " (tr ainer) S";  // a comm with a space: fields count after ')'
    for (int field = 4; field <= 52; ++field) stat << " " << (field == 39 ? last_cpu[i] : 0);
    stat << "\n";
  }
  const auto write = [&](const fs::path& relative, const std::string& text) {
    fs::create_directories((sysfs.path() / relative).parent_path());
    std::ofstream(sysfs.path() / relative) << text << "\n";
  };
  write("devices/system/cpu/online", "0-7");
  write("devices/system/node/node0/cpulist", "0-3");
  write("devices/system/node/node1/cpulist", "4-7");
  write("class/infiniband_verbs/uverbs1/ibdev", "mlx5_1");
  write("class/infiniband/mlx5_1/device/numa_node", "1");
  UverbsHolders holders(procfs.path(), sysfs.path(), std::chrono::seconds(0));
  const auto pinned = holders.Read();
  ASSERT_EQ(pinned.size(), 1U);
  ASSERT_EQ(pinned[0].remote_numa_thread_ratio.size(), 1U);
  EXPECT_DOUBLE_EQ(pinned[0].remote_numa_thread_ratio.at("mlx5_1"), 0.75);

  MetricSet out;
  MapPinned(pinned, out);
  EXPECT_TRUE(testing::MatchesGolden(testing::Serialise(out.Take()), "pinned.prom"));
}

}  // namespace
}  // namespace rdmascope
