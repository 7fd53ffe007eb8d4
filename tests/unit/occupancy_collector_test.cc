#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "collectors/occupancy.h"
#include "stats_file.h"
#include "unit/fixture_tree.h"

namespace rdmascope {
namespace {

// A stats file as the preload library writes it.
std::unique_ptr<occ_file> File() {
  auto file = std::make_unique<occ_file>();
  std::memset(file.get(), 0, sizeof(occ_file));
  file->header.magic = OCC_MAGIC;
  file->header.version = OCC_VERSION;
  file->header.pid = 4242;
  file->header.start_ticks = 777;
  std::strcpy(file->header.comm, "trainer");
  file->header.max_cqs = OCC_MAX_CQS;
  file->header.max_srqs = OCC_MAX_SRQS;
  file->header.lost_cqs = 1;
  occ_cq& cq = file->cqs[3];  // slots need not be contiguous
  cq.in_use = 1;
  cq.handle = 9;
  cq.entries = 255;
  std::strcpy(cq.device, "mlx5_0");
  cq.expected = 100;
  cq.completed = 60;
  cq.peak = 70;
  cq.polls = 10;
  cq.empty_polls = 4;
  cq.polled_entries = 60;
  cq.requested_entries = 160;
  occ_cq& stale = file->cqs[5];  // completed read ahead of a stale expected
  stale.in_use = 1;
  stale.handle = 10;
  stale.expected = 5;
  stale.completed = 6;
  file->cqs[7].handle = 11;  // destroyed: not in use
  occ_srq& srq = file->srqs[0];
  srq.in_use = 1;
  srq.handle = 2;
  srq.max_wr = 4096;
  srq.limit = 512;
  std::strcpy(srq.device, "mlx5_0");
  srq.posted = 5000;
  srq.consumed = 4000;
  return file;
}

std::span<const uint8_t> Bytes(const occ_file& file) {
  return {reinterpret_cast<const uint8_t*>(&file), sizeof file};
}

TEST(OccupancyCollector, ParsesTheStatsFile) {
  const auto file = File();
  const auto process = ParseOccupancyFile(Bytes(*file));
  ASSERT_TRUE(process) << process.error();
  EXPECT_EQ(process->pid, 4242U);
  EXPECT_EQ(process->start_ticks, 777U);
  EXPECT_EQ(process->comm, "trainer");
  ASSERT_EQ(process->cqs.size(), 2U);
  EXPECT_EQ(process->cqs[0].outstanding, 40U);
  EXPECT_EQ(process->cqs[1].outstanding, 0U) << "never negative";
  ASSERT_EQ(process->srqs.size(), 1U);
  EXPECT_EQ(process->srqs[0].posted, 1000U);
}

TEST(OccupancyCollector, GoldenExposition) {
  const auto process = ParseOccupancyFile(Bytes(*File()));
  ASSERT_TRUE(process);
  MetricSet out;
  MapOccupancy({*process}, out);
  EXPECT_EQ(out.dropped_duplicates(), 0U);
  EXPECT_TRUE(testing::MatchesGolden(testing::Serialise(out.Take()), "occupancy.prom"));
}

TEST(OccupancyCollector, RejectsForeignFiles) {
  auto file = File();
  EXPECT_FALSE(ParseOccupancyFile(Bytes(*file).first(100))) << "short";
  file->header.version = OCC_VERSION + 1;
  const auto newer = ParseOccupancyFile(Bytes(*file));
  ASSERT_FALSE(newer);
  EXPECT_NE(newer.error().find("version"), std::string::npos);
  file->header.magic = 0;
  EXPECT_FALSE(ParseOccupancyFile(Bytes(*file))) << "half-written: magic comes last";
}

}  // namespace
}  // namespace rdmascope
