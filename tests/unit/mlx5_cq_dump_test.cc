// The mlx5 raw CQ decoder on dumps built here as the firmware lays them out (see the layout's
// sources in exporter/sys/mlx5_cq_dump.h).
#include "sys/mlx5_cq_dump.h"

#include <gtest/gtest.h>

#include <vector>

#include "unit/mlx5_dump_builder.h"

namespace rdmascope::sys {
namespace {

using testing::Build;
using testing::CqDump;

TEST(Mlx5CqDump, OccupancyFromTheCounters) {
  const auto state = DecodeMlx5CqDump(Build({}), 255);
  ASSERT_TRUE(state) << state.error();
  EXPECT_EQ(state->log_size, 8U);
  EXPECT_EQ(state->producer_counter, 1000U);
  EXPECT_EQ(state->consumer_counter, 900U);
  EXPECT_EQ(state->occupancy(), 100U);
  EXPECT_EQ(state->cqn, 0x4aU);
  EXPECT_EQ(state->arm_state, 0x6U);
}

TEST(Mlx5CqDump, CountersWrapAt24Bits) {
  const auto state = DecodeMlx5CqDump(Build({.producer = 5, .consumer = 0xfffff0}), 255);
  ASSERT_TRUE(state) << state.error();
  EXPECT_EQ(state->occupancy(), 21U);
}

TEST(Mlx5CqDump, RefusesWhatItCannotTrust) {
  EXPECT_FALSE(DecodeMlx5CqDump(Build({}), 1023)) << "log_cq_size 8 is not a 1023-entry CQ";
  EXPECT_FALSE(DecodeMlx5CqDump(Build({.with_command = false}), 255));
  EXPECT_FALSE(DecodeMlx5CqDump(Build({.payload_words = 8}), 255)) << "too short for a cqc";
  auto truncated = Build({});
  truncated.resize(truncated.size() - 40);
  EXPECT_FALSE(DecodeMlx5CqDump(truncated, 255)) << "a segment overrunning the buffer";
  auto zero_length = Build({});
  zero_length[0] = zero_length[1] = 0;
  EXPECT_FALSE(DecodeMlx5CqDump(zero_length, 255));
  EXPECT_FALSE(DecodeMlx5CqDump({}, 255));
}

}  // namespace
}  // namespace rdmascope::sys
