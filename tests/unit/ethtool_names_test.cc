#include "collectors/ethtool_names.h"

#include <gtest/gtest.h>

namespace rdmascope::ethtool_names {
namespace {

void ExpectQueue(std::string_view name, std::string_view stat, std::string_view queue) {
  const auto split = SplitQueueStat(name);
  ASSERT_TRUE(split) << name;
  EXPECT_EQ(split->stat, stat) << name;
  EXPECT_EQ(split->queue, queue) << name;
}

TEST(SplitQueueStat, VendorShapes) {
  ExpectQueue("rx_queue_3_packets", "rx_queue_packets", "3");
  ExpectQueue("tx_queue_12_bytes", "tx_queue_bytes", "12");
  ExpectQueue("rx_queue_0_xdp_packets", "rx_queue_xdp_packets", "0");  // veth
  ExpectQueue("rx3_packets", "rx_packets", "3");                       // mlx5
  ExpectQueue("tx15_bytes", "tx_bytes", "15");
  ExpectQueue("ch2_events", "ch_events", "2");
  ExpectQueue("[7]: rx_ucast_packets", "rx_ucast_packets", "7");  // bnxt_en
  ExpectQueue("tx-0.tx_packets", "tx_packets", "0");              // i40e
  ExpectQueue("queue_1_tx_cnt", "queue_tx_cnt", "1");             // ena
}

TEST(SplitQueueStat, DeviceWideStatsStay) {
  for (const char* name : {"rx_packets", "rx_prio3_pause", "tx_pause_ctrl_phy", "rx_crc_errors.nic",
                           "rx_queue_x_packets", "rx_queue_3", "rx3", "rx3packets", "[x]: foo",
                           "tx-.foo", "queue_", "rx_pfc_ena_frames_pri3", "", "[1]: "}) {
    EXPECT_FALSE(SplitQueueStat(name)) << name;
  }
}

TEST(Normalise, ExactNamesAndPriorities) {
  auto n = Normalise("rx_crc_errors_phy");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->kind, Kind::kCrcErrors);
  n = Normalise("tx_prio5_pause");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->kind, Kind::kPauseFrames);
  EXPECT_EQ(n->direction, "tx");
  EXPECT_EQ(n->priority, "5");
  n = Normalise("port.rx_priority_2_xoff");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->priority, "2");
  n = Normalise("tx_pause_storm_error_events");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->level, "error");
}

TEST(Normalise, LookalikesAreNotCounted) {
  for (const char* name :
       {"rx_prio3_pause_duration", "rx_prio3_pause_transition", "rx_prio8_pause", "rx_prio33_pause",
        "rx_priority_3_xon.nic", "rx_pfc_ena_frames_pri", "rx_crc_errors_phy2", "rx_packets"}) {
    EXPECT_FALSE(Normalise(name)) << name;
  }
}

}  // namespace
}  // namespace rdmascope::ethtool_names
