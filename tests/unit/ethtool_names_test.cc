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
  ExpectQueue("tx-0.tx_packets", "tx_packets", "0");              // older i40e
  // i40e_gstrings_queue_stats "%s-%u.packets": both directions must stay distinct.
  ExpectQueue("tx-0.packets", "tx_packets", "0");
  ExpectQueue("rx-0.packets", "rx_packets", "0");
  ExpectQueue("rx-12.bytes", "rx_bytes", "12");
  ExpectQueue("queue_1_tx_cnt", "queue_tx_cnt", "1");  // ena
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
  // i40e_ethtool.c, i40e_gstrings_pfc_stats, formatted per priority by
  // i40e_get_stat_strings(): "port.rx_priority_%u_xoff_rx" / "port.tx_priority_%u_xoff_tx".
  n = Normalise("port.rx_priority_2_xoff_rx");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->kind, Kind::kPauseFrames);
  EXPECT_EQ(n->direction, "rx");
  EXPECT_EQ(n->priority, "2");
  n = Normalise("port.tx_priority_7_xoff_tx");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->direction, "tx");
  EXPECT_EQ(n->priority, "7");
  // ice_ethtool.c, ice_get_strings(): "rx_priority_%u_xoff.nic".
  n = Normalise("rx_priority_4_xoff.nic");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->priority, "4");
  n = Normalise("tx_pause_storm_error_events");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->level, "error");
}

TEST(Normalise, LookalikesAreNotCounted) {
  for (const char* name :
       {"rx_prio3_pause_duration", "rx_prio3_pause_transition", "rx_prio8_pause", "rx_prio33_pause",
        "rx_priority_3_xon.nic", "rx_pfc_ena_frames_pri", "rx_crc_errors_phy2", "rx_packets",
        // i40e's xon counters and xon-to-xoff transitions are not pause-on frames.
        "port.rx_priority_3_xon_rx", "port.tx_priority_3_xon_tx", "port.rx_priority_3_xon_2_xoff",
        "port.rx_priority_3_xoff", "port.rx_priority_3_xoff_tx", "port.tx_priority_3_xoff_rx"}) {
    EXPECT_FALSE(Normalise(name)) << name;
  }
}

// bnxt_ethtool.c: bnxt_port_stats_arr holds the port's own discards (rx_stat_discard,
// tx_stat_discard); bnxt_ring_err_stats_arr holds the sum of the rings' discards
// (rx_total_ring_discards, bnxt_get_one_ring_err_stats(): ring rx_discard_pkts, the host had no
// buffer), called rx_total_discard_pkts in bnxt_sw_func_stats before v6.4.
TEST(Normalise, BnxtPortAndRingDiscardsAreDifferentThings) {
  for (const auto& [name, direction] :
       {std::pair{"rx_stat_discard", "rx"}, std::pair{"tx_stat_discard", "tx"}}) {
    const auto n = Normalise(name);
    ASSERT_TRUE(n) << name;
    EXPECT_EQ(n->kind, Kind::kDiscards) << name;
    EXPECT_EQ(n->direction, direction) << name;
  }
  for (const auto& [name, direction] :
       {std::pair{"rx_total_ring_discards", "rx"}, std::pair{"tx_total_ring_discards", "tx"},
        std::pair{"rx_total_discard_pkts", "rx"}, std::pair{"tx_total_discard_pkts", "tx"},
        std::pair{"rx_out_of_buffer", "rx"}}) {
    const auto n = Normalise(name);
    ASSERT_TRUE(n) << name;
    EXPECT_EQ(n->kind, Kind::kRingDiscards) << name;
    EXPECT_EQ(n->direction, direction) << name;
  }
  EXPECT_LT(Normalise("rx_total_ring_discards")->preference,
            Normalise("rx_total_discard_pkts")->preference);
}

}  // namespace
}  // namespace rdmascope::ethtool_names
