// The pure parts of `rdmascope profile`'s session and advice: histograms read back from the
// collectors' exposition (through the real mr collector mapping), window deltas, frames as
// /debug/mr/stacks prints them, and doctor's queue-depth check fed the measured latency.
#include "profile/profile_session.h"

#include <gtest/gtest.h>

#include "collectors/mr.h"
#include "core/metric_set.h"
#include "doctor/checks_sizing.h"
#include "doctor/samples.h"
#include "profile/profile_advice.h"

namespace rdmascope::profile {
namespace {

const prometheus::ClientMetric& Only(const std::vector<prometheus::MetricFamily>& families,
                                     const std::string& name) {
  for (const auto& family : families) {
    if (family.name == name) return family.metric.at(0);
  }
  throw std::runtime_error("no family " + name);
}

// The MR probe's log2 buckets -> mr collector exposition -> back: the same buckets (the
// latency bounds are seconds, 2^b ns / 1e9, which log2 must not round up a bucket).
TEST(ProfileSession, Log2HistogramsRoundTripThroughTheMrCollector) {
  MrSnapshot snapshot;
  MrHistograms& h = snapshot.histograms["app"];
  h.size.assign(41, 0);
  h.size[12] = 2;   // 4 KiB
  h.size[13] = 20;  // 8 KiB
  h.size[16] = 5;   // 64 KiB
  h.size_sum_bytes = 2 * 4096 + 20 * 8192 + 5 * 65536;
  h.latency.assign(32, 0);
  h.latency[15] = 3;  // (16.4, 32.8] us
  h.latency[20] = 1;
  h.latency_sum_ns = 3 * 20000 + 900000;
  MetricSet set;
  MapMrSnapshot(snapshot, set);
  const auto families = set.Take();

  const Log2Histogram sizes =
      Log2FromPrometheus(Only(families, "rdma_mr_registration_size_bytes").histogram, 1);
  EXPECT_EQ(sizes.count, 27U);
  EXPECT_DOUBLE_EQ(sizes.sum, 2 * 4096 + 20 * 8192 + 5 * 65536);
  ASSERT_GE(sizes.buckets.size(), 17U);
  EXPECT_EQ(sizes.buckets[12], 2U);
  EXPECT_EQ(sizes.buckets[13], 20U);
  EXPECT_EQ(sizes.buckets[16], 5U);
  EXPECT_EQ(sizes.Quantile(0.5), 8192);

  const Log2Histogram latency =
      Log2FromPrometheus(Only(families, "rdma_mr_registration_duration_seconds").histogram, 1e9);
  EXPECT_EQ(latency.count, 4U);
  ASSERT_GE(latency.buckets.size(), 21U);
  EXPECT_EQ(latency.buckets[15], 3U);
  EXPECT_EQ(latency.buckets[16], 0U);
  EXPECT_EQ(latency.buckets[20], 1U);
  EXPECT_NEAR(latency.sum, 960000, 1e-3);
}

TEST(ProfileSession, WindowIsAfterMinusBaseline) {
  const Log2Histogram before{.buckets = {0, 2, 1}, .count = 3, .sum = 10};
  const Log2Histogram after{.buckets = {1, 5, 1, 4}, .count = 11, .sum = 60};
  const Log2Histogram window = Subtract(after, before);
  EXPECT_EQ(window.buckets, (std::vector<uint64_t>{1, 3, 0, 4}));
  EXPECT_EQ(window.count, 8U);
  EXPECT_DOUBLE_EQ(window.sum, 50);
}

TEST(ProfileSession, FramesAsDebugStacksPrintsThem) {
  Frame frame = ParseFrame("leak_buffers+0x1c", "profile_workload");
  EXPECT_EQ(frame.function, "leak_buffers");
  EXPECT_EQ(frame.offset, 0x1cU);
  EXPECT_EQ(frame.module, "profile_workload");
  frame = ParseFrame("libfoo.so.1+0x2a40", "libfoo.so.1");  // no symbol: named by module
  EXPECT_EQ(frame.function, "??");
  EXPECT_EQ(frame.offset, 0x2a40U);
  frame = ParseFrame("??", "");
  EXPECT_EQ(frame.function, "??");
  EXPECT_EQ(frame.offset, 0U);
  frame = ParseFrame("operator+(A const&, A const&)+0x10", "app");
  EXPECT_EQ(frame.function, "operator+(A const&, A const&)");
  EXPECT_EQ(frame.offset, 0x10U);
  frame = ParseFrame("f+0xzz", "app");  // not an offset: kept whole
  EXPECT_EQ(frame.function, "f+0xzz");
}

ProfileData WithLatency() {
  ProfileData data;
  data.messages.completion_latency_ns.buckets.assign(15, 0);
  data.messages.completion_latency_ns.buckets[14] = 10;  // (8192, 16384] ns: p50 ~12288 ns
  data.messages.completion_latency_ns.count = 10;
  return data;
}

TEST(ProfileAdvice, MeasuredCompletionLatencyIsTheRoundTrip) {
  // Interpolated inside the bucket (its p10: 8192 + 0.1 x 8192 ns), not its upper bound
  // (16384 ns, up to 2x too long).
  EXPECT_DOUBLE_EQ(MeasuredOptions(WithLatency()).rtt_seconds, 9011.2e-9);
  // Not measured (no preload library): doctor's assumption stays.
  EXPECT_DOUBLE_EQ(MeasuredOptions(ProfileData{}).rtt_seconds, doctor::DoctorOptions{}.rtt_seconds);
}

// Post to poll includes the wait behind other sends in a full send queue (Little's law): the
// p50 follows the queue's depth, so the round trip is the latency of the requests that waited
// least. 100 sends took ~10 us (the round trip), 900 waited ~80 us behind a full queue.
TEST(ProfileAdvice, QueueingInTheSendQueueIsNotTheRoundTrip) {
  ProfileData data;
  data.duration_seconds = 10;
  data.messages.completion_latency_ns.buckets.assign(18, 0);
  data.messages.completion_latency_ns.buckets[14] = 100;  // (8192, 16384] ns
  data.messages.completion_latency_ns.buckets[17] = 900;  // (65536, 131072] ns
  data.messages.completion_latency_ns.count = 1000;
  data.messages.completion_latency_ns.sum = 100 * 10e3 + 900 * 80e3;  // ns
  data.messages.send_bytes.buckets.assign(13, 0);
  data.messages.send_bytes.buckets[12] = 100000;  // 10,000 sends/s over the 10 s window
  data.messages.send_bytes.count = 100000;
  EXPECT_LE(MeasuredOptions(data).rtt_seconds, 16384e-9) << "the p10, in the round trip's bucket";
  const auto note = QueueingNote(data);
  ASSERT_TRUE(note);
  // 10,000 sends/s x 73 us mean = 0.73 sends in flight on average.
  EXPECT_NE(note->find("10000 sends/s x 73 us mean post-to-poll = 0.73 sends in flight"),
            std::string::npos)
      << *note;
  EXPECT_NE(note->find("most of the latency is waiting behind other sends"), std::string::npos)
      << *note;
  EXPECT_FALSE(QueueingNote(ProfileData{})) << "no sends, no latency: nothing to say";
}

// Doctor's own queues.qp_depth with the measured latency: a 100 Gb/s port (12.5 GB/s) x
// the p10 round trip (9.01 us) / 4096-byte messages (the preload counters) = 28 WRs, more than
// the 16 created.
TEST(ProfileAdvice, DoctorQpDepthUsesTheMeasuredLatency) {
  MetricSet set;
  const MetricDesc depth{"rdma_process_qp_min_send_wrs", "h", prometheus::MetricType::Gauge};
  const MetricDesc rate{"rdma_port_rate_bytes_per_second", "h", prometheus::MetricType::Gauge};
  const MetricDesc bytes{"rdma_process_posted_bytes_total", "h", prometheus::MetricType::Counter};
  const MetricDesc wrs{"rdma_process_posted_work_requests_total", "h",
                       prometheus::MetricType::Counter};
  set.Add(depth, {{"device", "mlx5_0"}, {"pid", "42"}, {"comm", "app"}}, 16);
  set.Add(rate, {{"device", "mlx5_0"}, {"port", "1"}}, 12.5e9);
  set.Add(bytes, {{"pid", "42"}, {"comm", "app"}, {"direction", "send"}}, 4096.0 * 1000);
  set.Add(wrs, {{"pid", "42"}, {"comm", "app"}, {"direction", "send"}}, 1000);
  const doctor::Snapshot now(set.Take(), 10);
  const auto findings = doctor::CheckQpDepth(now, nullptr, MeasuredOptions(WithLatency()));
  ASSERT_EQ(findings.size(), 1U);
  EXPECT_EQ(findings[0].id, "queues.qp_depth");
  EXPECT_EQ(findings[0].severity, doctor::Severity::kWarn);
  EXPECT_NE(findings[0].expected.find("at least 28 WRs"), std::string::npos)  // 9.01 us
      << findings[0].expected;
  // With doctor's assumed 80 us the same host needs 245: the measurement changes the advice.
  const auto assumed = doctor::CheckQpDepth(now, nullptr, doctor::DoctorOptions{});
  ASSERT_EQ(assumed.size(), 1U);
  EXPECT_NE(assumed[0].expected.find("at least 245 WRs"), std::string::npos) << assumed[0].expected;
}

}  // namespace
}  // namespace rdmascope::profile
