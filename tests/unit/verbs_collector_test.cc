#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "bpf/process_liveness.h"
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
  nccl.rc_send_wrs = {{"mlx5_0", {128, 4096, 8320}}, {"mlx5_1", {1024, 1024, 1024}}};
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

// A map walk cut short (VerbsProbe::Snapshot sets walk_error): no series at all from it, the
// collector fails with the reason (the runner logs it and serves nothing of the collector).
TEST(VerbsCollector, WalkCutShortServesNothing) {
  VerbsSnapshot snapshot = Snapshot();
  snapshot.walk_error = "cannot walk the verbs probes' CQ map: Bad address";
  MetricSet out;
  try {
    MapVerbsSnapshot(snapshot, 100, out);
    ADD_FAILURE() << "a partial snapshot mapped as if complete";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "cannot walk the verbs probes' CQ map: Bad address");
  }
  EXPECT_EQ(out.sample_count(), 0U);
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

// enum ibv_qp_type: IBV_QPT_RC 2, IBV_QPT_UC 3, IBV_QPT_UD 4.
TEST(VerbsCollector, RcSendWrsAreTheShallowestDeepestAndSummedRcQueuePerDevice) {
  const uint64_t a = 0xa0, b = 0xb0, c = 0xc0, unknown = 0xd0;
  const std::map<uint64_t, std::string> devices = {{a, "mlx5_0"}, {b, "mlx5_0"}, {c, "mlx5_1"}};
  const std::vector<VerbsQpLinks> qps = {
      {.send_cq = a, .max_send_wr = 512, .type = 2},
      {.send_cq = b, .max_send_wr = 64, .type = 2},       // the shallowest RC QP of mlx5_0
      {.send_cq = a, .max_send_wr = 8, .type = 4},        // UD: no connection to keep busy
      {.send_cq = a, .max_send_wr = 0, .type = 2},        // receive-only: no send figure
      {.send_cq = c, .max_send_wr = 2048, .type = 2},     // another device: its own figure
      {.send_cq = unknown, .max_send_wr = 1, .type = 2},  // CQ created before the probes
  };
  const auto range = RcSendWrs(qps, devices);
  EXPECT_EQ(range, (std::map<std::string, RcSendWrsRange>{{"mlx5_0", {64, 512, 576}},
                                                          {"mlx5_1", {2048, 2048, 2048}}}));
  EXPECT_TRUE(RcSendWrs({qps[2]}, devices).empty()) << "no RC QP: no series";
}

TEST(VerbsCollector, EventNames) {
  EXPECT_EQ(AsyncEventName(0), "CQ_ERR");
  EXPECT_EQ(AsyncEventName(15), "SRQ_LIMIT_REACHED");
  EXPECT_EQ(AsyncEventName(19), "WQ_FATAL");
  EXPECT_EQ(AsyncEventName(25), "TYPE_25");
  EXPECT_EQ(AsyncEventName(31), "OTHER");
}

// Objects of a process are deleted only when it is positively gone: a /proc entry that cannot
// be read this time (a transient failure) must not lose a live process's queues for good.
class ProcessLivenessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    procfs_ =
        std::filesystem::temp_directory_path() / ("rdmascope-liveness-" + std::to_string(getpid()));
    std::filesystem::create_directories(procfs_);
  }
  void TearDown() override { std::filesystem::remove_all(procfs_); }
  // A /proc/PID/stat whose field 22 (starttime) is `ticks`; the comm holds spaces and a ')'.
  void WriteStat(uint32_t pid, const std::string& ticks) {
    std::filesystem::create_directories(procfs_ / std::to_string(pid));
    std::ofstream(procfs_ / std::to_string(pid) / "stat")
        << pid << " (a b) c) S 1 1 1 0 -1 4194560 100 0 0 0 5 6 0 0 20 0 3 0 " << ticks
        << " 123456 789 18446744073709551615\n";
  }
  std::filesystem::path procfs_;
  static constexpr uint64_t kNsPerTick = 10000000;  // USER_HZ 100
};

TEST_F(ProcessLivenessTest, SameStartIsAlive) {
  WriteStat(42, "5000");
  EXPECT_EQ(ProcessLiveness(procfs_, 42, 5000 * kNsPerTick + 1234, kNsPerTick), Liveness::kAlive);
}

TEST_F(ProcessLivenessTest, NoSuchPidOrReusedPidIsGone) {
  EXPECT_EQ(ProcessLiveness(procfs_, 43, 5000 * kNsPerTick, kNsPerTick), Liveness::kGone);
  WriteStat(42, "7000");  // another process got the pid
  EXPECT_EQ(ProcessLiveness(procfs_, 42, 5000 * kNsPerTick, kNsPerTick), Liveness::kGone);
}

TEST_F(ProcessLivenessTest, UnreadableOrMalformedIsUnknownNotGone) {
  std::filesystem::create_directories(procfs_ / "44" / "stat");  // read() fails: EISDIR
  EXPECT_EQ(ProcessLiveness(procfs_, 44, 5000 * kNsPerTick, kNsPerTick), Liveness::kUnknown);
  WriteStat(45, "not-a-number");
  EXPECT_EQ(ProcessLiveness(procfs_, 45, 5000 * kNsPerTick, kNsPerTick), Liveness::kUnknown);
  std::filesystem::create_directories(procfs_ / "46");
  std::ofstream(procfs_ / "46" / "stat") << "";  // empty: the task went away mid-read
  EXPECT_EQ(ProcessLiveness(procfs_, 46, 5000 * kNsPerTick, kNsPerTick), Liveness::kUnknown);
}

}  // namespace
}  // namespace rdmascope
