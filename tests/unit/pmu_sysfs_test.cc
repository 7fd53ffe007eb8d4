#include "sys/pmu_sysfs.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sys/cpu_topology.h"
#include "unit/fixture_tree.h"

namespace rdmascope::sys {
namespace {

class PmuTree : public ::testing::Test {
 protected:
  void Load(const std::string& tree) {
    testing::MaterialiseTree(testing::FixturePath("sysfs/" + tree), root_.path());
  }
  testing::TempDir root_;
};

TEST(PmuFormat, ContiguousAndSplitRanges) {
  const auto simple = ParsePmuFormat("config:8-15\n");
  ASSERT_TRUE(simple);
  uint64_t config[3] = {};
  EXPECT_TRUE(ApplyPmuFormat(*simple, 0x03, config));
  EXPECT_EQ(config[0], 0x0300U);
  EXPECT_FALSE(ApplyPmuFormat(*simple, 0x1ff, config)) << "9 bits into 8";

  const auto split = ParsePmuFormat("config:0-7,32-35");
  ASSERT_TRUE(split);
  uint64_t wide[3] = {};
  EXPECT_TRUE(ApplyPmuFormat(*split, 0x107, wide));
  EXPECT_EQ(wide[0], (1ULL << 32) | 0x07) << "low 8 bits first, then bits 8-11 at 32-35";

  const auto single = ParsePmuFormat("config1:0");
  ASSERT_TRUE(single);
  EXPECT_EQ(single->config, 1);
  EXPECT_FALSE(ParsePmuFormat("config3:0-7"));
  EXPECT_FALSE(ParsePmuFormat("config:9-2"));
  EXPECT_FALSE(ParsePmuFormat("config:0-64"));
  EXPECT_FALSE(ParsePmuFormat("event"));
}

TEST(PmuFormat, CpuLists) {
  EXPECT_EQ(ParseCpuList("0-3,8,10-11\n"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(ParseCpuList("0,28"), (std::vector<int>{0, 28}));
  EXPECT_TRUE(ParseCpuList("3-1").empty());
  EXPECT_TRUE(ParseCpuList("x").empty());
  // Not the kernel's ascending, disjoint runs: refused, so the list stays bounded.
  EXPECT_TRUE(ParseCpuList("0-65535,0-65535").empty());
  EXPECT_TRUE(ParseCpuList("4,2").empty());
  EXPECT_TRUE(ParseCpuList("0-3,3").empty());
}

TEST_F(PmuTree, SkylakeMemoryControllerEvents) {
  Load("pmu_skx.tree");
  const auto read = ResolvePmuEvent(root_.path(), "uncore_imc_0/cas_count_read/");
  ASSERT_TRUE(read) << read.error();
  EXPECT_EQ(read->type, 14U);
  EXPECT_EQ(read->config[0], 0x0304U);
  EXPECT_DOUBLE_EQ(read->scale, 6.103515625e-5);
  EXPECT_EQ(read->unit, "MiB");
  EXPECT_EQ(read->cpus, (std::vector<int>{0, 4})) << "once per socket";
  const auto write = ResolvePmuEvent(root_.path(), "uncore_imc_1/cas_count_write/");
  ASSERT_TRUE(write) << write.error();
  EXPECT_EQ(write->type, 15U);
  EXPECT_EQ(write->config[0], 0x0c04U);
  // Raw terms, and a named event with an extra term.
  const auto raw = ResolvePmuEvent(root_.path(), "cpu/event=0xc0,umask=0x01,edge,cmask=2/");
  ASSERT_TRUE(raw) << raw.error();
  EXPECT_EQ(raw->type, 4U);
  EXPECT_EQ(raw->config[0], 0x020401c0U);
  EXPECT_TRUE(raw->cpus.empty()) << "core PMU: every CPU";
  const auto named = ResolvePmuEvent(root_.path(), "cpu/instructions,umask=0x1/");
  ASSERT_TRUE(named) << named.error();
  EXPECT_EQ(named->config[0], 0x01c0U);
  const auto direct = ResolvePmuEvent(root_.path(), "cpu/config=0x5300c0/");
  ASSERT_TRUE(direct);
  EXPECT_EQ(direct->config[0], 0x5300c0U);
}

TEST_F(PmuTree, IceLakeFreeRunningCounters) {
  // icx_uncore_imc_freerunning_events: read = event=0xff,umask=0x20, write = umask=0x21.
  Load("pmu_icx.tree");
  const auto read = ResolvePmuEvent(root_.path(), "uncore_imc_free_running_0/read/");
  ASSERT_TRUE(read) << read.error();
  EXPECT_EQ(read->type, 24U);
  EXPECT_EQ(read->config[0], 0x20ffU);
  EXPECT_EQ(read->unit, "MiB");
  EXPECT_DOUBLE_EQ(read->scale, 6.103515625e-5);
  const auto write = ResolvePmuEvent(root_.path(), "uncore_imc_free_running_0/write/");
  ASSERT_TRUE(write) << write.error();
  EXPECT_EQ(write->config[0], 0x21ffU);
  EXPECT_FALSE(ResolvePmuEvent(root_.path(), "uncore_imc_free_running_0/data_read/"))
      << "not an ICX name";
}

TEST_F(PmuTree, EpycDataFabricSplitEventField) {
  Load("pmu_epyc.tree");
  const auto event = ResolvePmuEvent(root_.path(), "amd_df/event=0x107,umask=0x38/");
  ASSERT_TRUE(event) << event.error();
  EXPECT_EQ(event->type, 11U);
  EXPECT_EQ(event->config[0], (1ULL << 32) | 0x3807);
  EXPECT_DOUBLE_EQ(event->scale, 1.0) << "no .scale: raw counts";
  EXPECT_EQ(event->cpus, (std::vector<int>{0}));
}

TEST_F(PmuTree, ErrorsNameWhatIsWrong) {
  Load("pmu_skx.tree");
  const auto expect_error = [&](std::string_view spec, std::string_view fragment) {
    const auto event = ResolvePmuEvent(root_.path(), spec);
    ASSERT_FALSE(event) << spec;
    EXPECT_NE(event.error().find(fragment), std::string::npos) << event.error();
  };
  expect_error("uncore_imc_9/cas_count_read/", "no PMU");
  expect_error("uncore_imc_0/no_such_event/", "no event");
  expect_error("uncore_imc_0/event=0x04,bogus=1/", "unknown term");
  expect_error("uncore_imc_0/event=0xzz/", "bad value");
  expect_error("cpu/event=0x1c0/", "does not fit");
  expect_error("cpu/event=0xc0/u", "modifiers");
  expect_error("cycles", "not a pmu/event/");
}

// The PmuFiles seam (the fuzz target's in-memory tree) sees the same attribute texts as the
// files: type, cpumask, format/<term>, events/<name>, .scale and .unit.
TEST(PmuFiles, ResolvesFromMemoryAsFromFiles) {
  const std::filesystem::path sysfs = "/memory";
  const std::filesystem::path dir = sysfs / "bus/event_source/devices/uncore_imc_0";
  const std::map<std::string, std::string> files = {
      {(dir / "type").string(), "14"},
      {(dir / "cpumask").string(), "0,4"},
      {(dir / "format/event").string(), "config:0-7"},
      {(dir / "format/umask").string(), "config:8-15"},
      {(dir / "events/cas_count_read").string(), "event=0x04,umask=0x03"},
      {(dir / "events/cas_count_read.scale").string(), "6.103515625e-5"},
      {(dir / "events/cas_count_read.unit").string(), "MiB"},
  };
  std::vector<std::string> asked;
  const PmuFiles read = [&](const std::filesystem::path& path) -> std::optional<std::string> {
    asked.push_back(path.string());
    const auto file = files.find(path.string());
    if (file == files.end()) return std::nullopt;
    return file->second;
  };
  const auto event = ResolvePmuEvent(sysfs, "uncore_imc_0/cas_count_read/", read);
  ASSERT_TRUE(event) << event.error();
  EXPECT_EQ(event->type, 14U);
  EXPECT_EQ(event->config[0], 0x0304U);
  EXPECT_DOUBLE_EQ(event->scale, 6.103515625e-5);
  EXPECT_EQ(event->unit, "MiB");
  EXPECT_EQ(event->cpus, (std::vector<int>{0, 4}));
  for (const std::string& path : asked) EXPECT_TRUE(path.starts_with("/memory/")) << path;

  EXPECT_FALSE(ResolvePmuEvent(sysfs, "uncore_imc_1/cas_count_read/", read)) << "no type";
  const auto unknown = ResolvePmuEvent(sysfs, "uncore_imc_0/event=0x04,bogus=1/", read);
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().find("unknown term"), std::string::npos) << unknown.error();
}

TEST_F(PmuTree, TopologyAndPmuLists) {
  Load("pmu_skx.tree");
  const CpuTopology topology = ReadCpuTopology(root_.path());
  EXPECT_EQ(topology.online.size(), 8U);
  EXPECT_EQ(topology.NodeOf(5), 1);
  EXPECT_EQ(topology.SocketOf(4), 1);
  EXPECT_EQ(topology.SocketOf(3), 0);
  EXPECT_EQ(ListPmus(root_.path(), "uncore_imc"),
            (std::vector<std::string>{"uncore_imc_0", "uncore_imc_1"}));
}

}  // namespace
}  // namespace rdmascope::sys
