#include "core/process_metrics.h"

#include <gtest/gtest.h>

#include <set>

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

}  // namespace
}  // namespace rdmascope
