#include <gtest/gtest.h>

#include "collectors/verbs.h"
#include "unit/fixture_tree.h"

namespace rdmascope {
namespace {

VerbsSnapshot Snapshot() {
  VerbsSnapshot snapshot;
  // An undersized CQ (ratio 0.5), a comfortable one (ratio 4) and an idle one.
  snapshot.cqs.push_back({.pid = 7,
                          .comm = "nccl",
                          .device = "mlx5_0",
                          .handle = 1,
                          .requested_entries = 1000,
                          .entries = 1023,
                          .feeding_wrs = 256,
                          .feeding_qps = 2});
  snapshot.cqs.push_back({.pid = 7,
                          .comm = "nccl",
                          .device = "mlx5_0",
                          .handle = 2,
                          .requested_entries = 100,
                          .entries = 127,
                          .feeding_wrs = 254,
                          .feeding_qps = 1});
  snapshot.cqs.push_back({.pid = 9,
                          .comm = "fio",
                          .device = "mlx5_1",
                          .handle = 1,
                          .requested_entries = 10,
                          .entries = 15});
  snapshot.srqs.push_back({.pid = 7,
                           .comm = "nccl",
                           .device = "mlx5_0",
                           .handle = 3,
                           .max_wr = 4096,
                           .limit = 512,
                           .limit_events = 2});
  VerbsProcess nccl{.pid = 7, .comm = "nccl", .qps = 3};
  nccl.async_events[15] = 2;  // SRQ_LIMIT_REACHED
  nccl.async_events[4] = 9;   // COMM_EST: not an error, exported because non-zero
  snapshot.processes.push_back(nccl);
  snapshot.lost_objects = 1;
  return snapshot;
}

TEST(VerbsCollector, GoldenExposition) {
  MetricSet out;
  MapVerbsSnapshot(Snapshot(), 100, out);
  EXPECT_EQ(out.dropped_duplicates(), 0U);
  EXPECT_TRUE(testing::MatchesGolden(testing::Serialise(out.Take()), "verbs.prom"));
}

TEST(VerbsCollector, SeriesBudgetKeepsTheWorstSizedCqs) {
  MetricSet out;
  MapVerbsSnapshot(Snapshot(), 1, out);
  for (const auto& family : out.Take()) {
    if (family.name == "rdma_cq_capacity_entries") {
      ASSERT_EQ(family.metric.size(), 1U);
      EXPECT_EQ(family.metric[0].gauge.value, 127) << "the CQ fed 254 WRs with 127 entries";
    }
    if (family.name == "rdma_srq_max_wrs") ADD_FAILURE() << "no budget left for SRQs";
    if (family.name == "rdmascope_verbs_queues_omitted") {
      EXPECT_EQ(family.metric[0].gauge.value, 3);
    }
  }
}

TEST(VerbsCollector, FeedingCountsAnSrqOncePerReceiveCq) {
  const uint64_t a = 0xa0, b = 0xb0, srq = 0x50;
  const std::vector<VerbsQpLinks> qps = {
      {.send_cq = a, .recv_cq = a, .max_send_wr = 64, .max_recv_wr = 64},
      {.send_cq = b, .recv_cq = b, .srq = srq, .max_send_wr = 16, .max_recv_wr = 0},
      {.send_cq = a, .recv_cq = b, .srq = srq, .max_send_wr = 8, .max_recv_wr = 0},
  };
  const auto feeding = ComputeCqFeeding(qps, {{srq, 256}});
  EXPECT_EQ(feeding.at(a).wrs, 64U + 64 + 8);
  EXPECT_EQ(feeding.at(a).qps, 2U);
  EXPECT_EQ(feeding.at(b).wrs, 16U + 256);
  EXPECT_EQ(feeding.at(b).qps, 2U);
  const auto unknown_srq = ComputeCqFeeding({qps[1]}, {});
  EXPECT_EQ(unknown_srq.at(b).wrs, 16U) << "an SRQ created before the probes: depth unknown";
}

TEST(VerbsCollector, EventNames) {
  EXPECT_EQ(AsyncEventName(0), "CQ_ERR");
  EXPECT_EQ(AsyncEventName(15), "SRQ_LIMIT_REACHED");
  EXPECT_EQ(AsyncEventName(19), "WQ_FATAL");
  EXPECT_EQ(AsyncEventName(25), "TYPE_25");
  EXPECT_EQ(AsyncEventName(31), "OTHER");
}

}  // namespace
}  // namespace rdmascope
