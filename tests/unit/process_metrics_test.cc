#include "core/process_metrics.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <vector>

#include "core/sysfs.h"

namespace rdmascope {
namespace {

TEST(ProcessStat, ParsesCommWithSpacesAndParens) {
  // pid (comm) state ppid ... utime(14)=250 stime(15)=50 ... starttime(22)=1000 vsize=4096000
  // rss=300
  const std::string stat =
      "1234 (rdma (scope) x) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 3 0 1000 "
      "4096000 300 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
  const auto parsed = ParseProcessStat(stat, 1'700'000'000, 100, 4096);
  ASSERT_TRUE(parsed);
  EXPECT_DOUBLE_EQ(parsed->cpu_seconds, 3.0);
  EXPECT_DOUBLE_EQ(parsed->start_time_seconds, 1'700'000'010.0);
  EXPECT_DOUBLE_EQ(parsed->virtual_bytes, 4096000);
  EXPECT_DOUBLE_EQ(parsed->resident_bytes, 300.0 * 4096);
}

TEST(ProcessStat, RejectsTruncated) {
  EXPECT_FALSE(ParseProcessStat("1234 (x) S 1 2 3", 0, 100, 4096));
  EXPECT_FALSE(ParseProcessStat("garbage", 0, 100, 4096));
}

TEST(ProcessMetrics, ReadsOwnProcess) {
  MetricSet out;
  AddProcessMetrics("/proc", out);
  std::set<std::string> names;
  for (const auto& family : out.Take()) names.insert(family.name);
  EXPECT_TRUE(names.contains("process_resident_memory_bytes"));
  EXPECT_TRUE(names.contains("process_open_fds"));
  EXPECT_TRUE(names.contains("process_start_time_seconds"));
}

TEST(OpenFdCount, CountsTheEntriesOfADirectoryOutsideProcfs) {
  // A fixture directory's size is the filesystem's (4096 on ext4, a multiple of 20 on tmpfs):
  // only procfs reports the descriptor count as the size.
  const auto dir = std::filesystem::path(::testing::TempDir()) / "open_fd_count_fixture";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  for (const char* name : {"0", "1", "2"}) std::ofstream(dir / name) << "";
  EXPECT_EQ(OpenFdCount(dir), 3U);
  EXPECT_EQ(OpenFdCount(dir / "0"), std::nullopt);  // not a directory
  EXPECT_EQ(OpenFdCount(dir / "missing"), std::nullopt);
  std::filesystem::remove_all(dir);
}

TEST(OpenFdCount, FollowsTheProcessDescriptors) {
  const auto before = OpenFdCount("/proc/self/fd");
  ASSERT_TRUE(before);
  std::vector<int> fds;
  for (int i = 0; i < 10; ++i) fds.push_back(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  const auto during = OpenFdCount("/proc/self/fd");
  for (const int fd : fds) ::close(fd);
  ASSERT_TRUE(during);
  EXPECT_EQ(*during, *before + 10);
  EXPECT_EQ(OpenFdCount("/proc/self/fd"), before);
}

TEST(OpenFdCount, LeavesOutTheDescriptorOfAListing) {
  // A listing holds one descriptor open on the directory while it reads it.
  const auto count = OpenFdCount("/proc/self/fd");
  ASSERT_TRUE(count);
  EXPECT_EQ(*count + 1, sysfs::ListDirectory("/proc/self/fd").size());
}

}  // namespace
}  // namespace rdmascope
