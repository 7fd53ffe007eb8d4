// serve's /doctor judges counters over its last --doctor.lookback (doctor/history.h counter
// ring), not since start: an error burst older than the lookback no longer fires, one within it
// does, a young exporter judges since start and says so, a counter reset gives no figure for a
// lookback and is then forgotten, and the ring's memory is bounded whatever the lookback.
#include <gtest/gtest.h>
#include <malloc.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <sstream>
#include <string>

#include "doctor/checks.h"
#include "doctor/history.h"
#include "doctor/report.h"
#include "doctor/samples.h"
#include "unit/doctor_fixtures.h"

namespace rdmascope::doctor {
namespace {

using testing::Families;

// One collection at `minute` of a RoCE port (mlx5_0 port 1, netdev eth2) whose netdev counted
// `crc` CRC errors so far, and its port a thousand retransmissions per CRC error.
Snapshot Port(double minute, double crc) {
  Families f;
  f.Gauge("rdma_port_info",
          {{"device", "mlx5_0"},
           {"port", "1"},
           {"link_layer", "Ethernet"},
           {"state", "ACTIVE"},
           {"phys_state", "LinkUp"},
           {"netdev", "eth2"}},
          1);
  f.Counter("rdma_netdev_crc_errors_total", {{"device", "eth2"}}, crc);
  f.Counter("rdma_port_hw_counter_total",
            {{"device", "mlx5_0"}, {"port", "1"}, {"counter", "local_ack_timeout_err"}},
            1000 * crc);
  return f.Build(minute * 60, testing::AllRan());
}

struct Judged {
  std::vector<Finding> findings;
  double window_seconds = 0;  // 0: nothing to judge against
  bool since_start = false;

  const Finding& Get(std::string_view id) const {
    const Finding* found = nullptr;
    for (const Finding& f : findings) {
      if (f.id == id) {
        EXPECT_EQ(found, nullptr) << "one subject expected for " << id;
        found = &f;
      }
    }
    EXPECT_NE(found, nullptr) << id;
    return *found;
  }
};

// /doctor at `now_minute` of an exporter started at minute 0 that collected once a minute
// (its tick), the port having counted `crc(minute)` CRC errors: what doctor::Service::Report does
// without ?window=.
Judged Judge(double now_minute, const std::function<double(double)>& crc,
             double lookback_seconds = kDefaultLookbackSeconds) {
  History history(60, 60, 2048, lookback_seconds);
  for (double minute = 0; minute < now_minute; ++minute) history.Offer(Port(minute, crc(minute)));
  const auto view = history.View();
  Snapshot now = Port(now_minute, crc(now_minute));
  history.Offer(now);
  now.set_history(view);
  Judged judged;
  const Snapshot* base = view->CounterBase(now.seconds());
  judged.findings = RunChecks(now, base, {});
  if (base != nullptr) {
    judged.window_seconds = now.seconds() - base->seconds();
    judged.since_start = view->IsStart(*base);
  }
  return judged;
}

// 500 CRC errors (and 500000 retransmissions) in the minute before `minute`, none otherwise.
std::function<double(double)> BurstAt(double minute) {
  return [minute](double m) { return m >= minute ? 500 : 0; };
}

TEST(DoctorLookback, AnErrorBurstOlderThanTheLookbackNoLongerFires) {
  // 80 minutes ago: since start, this fired until the exporter restarted.
  const Judged judged = Judge(90.5, BurstAt(10));
  EXPECT_FALSE(judged.since_start);
  // The oldest collection within 15 minutes, minute 76: 14.5 minutes.
  EXPECT_EQ(judged.window_seconds, 870);
  const Finding& crc = judged.Get("links.crc_errors");
  EXPECT_EQ(crc.severity, Severity::kOk) << crc.observed;
  EXPECT_EQ(crc.observed, "0 CRC/FCS errors in 870 s (rdma_netdev_crc_errors_total now 500)");
  EXPECT_EQ(judged.Get("links.retransmissions").severity, Severity::kOk);
}

TEST(DoctorLookback, AnErrorBurstWithinTheLookbackFires) {
  const Judged judged = Judge(90.5, BurstAt(85));
  const Finding& crc = judged.Get("links.crc_errors");
  EXPECT_EQ(crc.severity, Severity::kWarn);
  EXPECT_EQ(crc.observed, "500 CRC/FCS errors in 870 s (rdma_netdev_crc_errors_total now 500)");
  const Finding& retrans = judged.Get("links.retransmissions");
  EXPECT_EQ(retrans.severity, Severity::kWarn);
  EXPECT_EQ(retrans.observed.find("575 retransmission events/s over 870 s"), 0U)
      << retrans.observed;
}

TEST(DoctorLookback, NothingOlderThanTheLookbackIsCounted) {
  // The window starts at the oldest collection no older than 15 minutes (minute 76 at 90.5):
  // a burst before it is not counted, one after it is; at most one tick of the lookback's far
  // end goes unseen, never a minute beyond it.
  EXPECT_EQ(Judge(90.5, BurstAt(75)).Get("links.crc_errors").severity, Severity::kOk);
  EXPECT_EQ(Judge(90.5, BurstAt(76)).Get("links.crc_errors").severity, Severity::kOk);
  EXPECT_EQ(Judge(90.5, BurstAt(77)).Get("links.crc_errors").severity, Severity::kWarn);
  // A shorter lookback forgets sooner.
  const Judged five = Judge(90.5, BurstAt(80), 300);
  EXPECT_EQ(five.window_seconds, 270);
  EXPECT_EQ(five.Get("links.crc_errors").severity, Severity::kOk);
}

TEST(DoctorLookback, AYoungExporterJudgesSinceStartAndSaysSo) {
  const Judged judged = Judge(5.5, BurstAt(2));
  EXPECT_TRUE(judged.since_start);
  EXPECT_EQ(judged.window_seconds, 330);
  EXPECT_EQ(judged.Get("links.crc_errors").severity, Severity::kWarn);
  // Once older than the lookback, no longer since start.
  EXPECT_FALSE(Judge(15.5, BurstAt(2)).since_start);
  EXPECT_TRUE(Judge(15, BurstAt(2)).since_start);
}

TEST(DoctorLookback, ACounterResetGivesNoFigureThenIsForgotten) {
  // The driver counted a million errors before the exporter started; at minute 50 the device
  // is re-created and its counters start again from 3.
  const auto reset = [](double minute) { return minute < 50 ? 1e6 : 3; };
  const Judged during = Judge(55, reset);
  const Finding& crc = during.Get("links.crc_errors");
  EXPECT_EQ(crc.severity, Severity::kSkip);  // never a negative increase, nor a warning
  EXPECT_EQ(crc.observed,
            "rdma_netdev_crc_errors_total went down or appeared during the window (counter "
            "reset)");
  const Finding& retrans = during.Get("links.retransmissions");
  EXPECT_EQ(retrans.severity, Severity::kSkip);
  EXPECT_EQ(retrans.observed, "every counter was reset or appeared during the window");
  // A lookback later the reset is out of the window: judged again, and quiet. (Since start,
  // 3 < 1e6 skipped these checks until the exporter restarted.)
  const Judged after = Judge(70, reset);
  EXPECT_EQ(after.Get("links.crc_errors").severity, Severity::kOk);
  EXPECT_EQ(after.Get("links.retransmissions").severity, Severity::kOk);
  EXPECT_EQ(after.Get("links.retransmissions").observed.find("0 retransmission events/s"), 0U);
}

TEST(DoctorLookback, TheRingSpansTheLookbackInAtMostSixteenSnapshots) {
  for (double lookback : {300.0, 900.0, 3600.0, 86400.0}) {
    History history(60, 60, 2048, lookback);
    size_t most = 0;
    // A collection every 10 s (the tick plus /doctor requests) for twice the lookback.
    for (double t = 0; t <= 2 * lookback; t += 10) {
      history.Offer(Port(t / 60, 0));
      most = std::max(most, history.View()->counters.size());
    }
    const auto view = history.View();
    // A minute apart, or a fifteenth of the lookback: 6 for 5 minutes, 16 from 15 minutes.
    EXPECT_LE(most, 16U) << lookback;
    EXPECT_GE(view->counters.size(), std::min(15.0, lookback / 60)) << lookback;
    EXPECT_LE(2 * lookback - view->counters.front()->seconds(), lookback) << lookback;
    // Only the window series: the port's info gauge is not kept.
    EXPECT_EQ(view->counters.back()->SeriesCount(), 2U);
  }
}

TEST(DoctorLookback, AStalledTickGivesTheNewestBaseAndATruthfulWindow) {
  History history;
  for (double minute = 0; minute <= 10; ++minute) history.Offer(Port(minute, 0));
  const auto view = history.View();
  const Snapshot* base = view->CounterBase(40 * 60);
  ASSERT_NE(base, nullptr);
  EXPECT_EQ(base->seconds(), 600);  // 30 minutes: longer than the lookback, and said so
  EXPECT_EQ(History().View()->CounterBase(0), nullptr);
}

// What the counter ring keeps is all the window checks read: on the fixture host where every
// check fires (and on the healthy one), judging against the kept series alone finds the same.
TEST(DoctorLookback, CounterSnapshotsHoldWhatTheWindowChecksRead) {
  for (bool bad : {true, false}) {
    const Snapshot now = testing::Host(bad, true);
    const Snapshot before = testing::Host(bad, false);
    const Snapshot kept = WindowSeriesOf(before);
    EXPECT_LT(kept.SeriesCount(), before.SeriesCount());
    const auto whole = RunChecks(now, &before, {});
    const auto counters_only = RunChecks(now, &kept, {});
    EXPECT_EQ(RenderJson(counters_only, {}), RenderJson(whole, {})) << "bad=" << bad;
  }
}

// Bytes the heap holds for a copy `make` returns (glibc's mallinfo2: allocated chunks).
template <typename Make>
double HeapBytesOf(const Make& make, size_t series) {
  const size_t before = mallinfo2().uordblks;
  const auto copy = std::make_shared<const Snapshot>(make());
  const size_t after = mallinfo2().uordblks;
  EXPECT_EQ(copy->SeriesCount(), series);
  return static_cast<double>(after - before) / static_cast<double>(series);
}

// The figures docs/doctor.md "Memory bound" gives: what one kept series costs.
TEST(DoctorLookback, MemoryPerSeries) {
  // An mlx5 port's hw_counters (the names ConnectX-6 gives), two ports.
  static constexpr const char* kMlx5 =
      "duplicate_request implied_nak_seq_err lifespan local_ack_timeout_err np_cnp_sent "
      "np_ecn_marked_roce_packets out_of_buffer out_of_sequence packet_seq_err req_cqe_error "
      "req_cqe_flush_error req_remote_access_errors req_remote_invalid_request resp_cqe_error "
      "resp_cqe_flush_error resp_local_length_error resp_remote_access_errors rnr_nak_retry_err "
      "roce_adp_retrans roce_adp_retrans_to roce_slow_restart roce_slow_restart_cnps "
      "roce_slow_restart_trans rp_cnp_handled rp_cnp_ignored rx_atomic_requests rx_dct_connect "
      "rx_icrc_encapsulated rx_read_requests rx_write_requests";
  Families f;
  size_t counters = 0;
  for (const char* device : {"mlx5_0", "mlx5_1"}) {
    std::istringstream names(kMlx5);
    for (std::string counter; names >> counter;) {
      f.Counter("rdma_port_hw_counter_total",
                {{"device", device}, {"port", "1"}, {"counter", counter}}, 123456789);
      ++counters;
    }
  }
  size_t trends = 0;
  for (int pid = 100000; pid < 100100; ++pid) {
    f.Gauge("rdma_process_pinned_bytes", {{"pid", std::to_string(pid)}, {"comm", "trainer_worker"}},
            1 << 30);
    ++trends;
  }
  f.Gauge("rdma_port_info", {{"device", "mlx5_0"}}, 1);  // not kept by either
  const Snapshot whole = f.Build(0);
  const double counter_bytes = HeapBytesOf([&] { return whole.Only(kWindowSeries); }, counters);
  const std::string_view trend_names[] = {"rdma_process_pinned_bytes"};
  const double trend_bytes = HeapBytesOf([&] { return whole.Only(trend_names); }, trends);
  std::printf("bytes per kept series: counter %.0f, trend %.0f\n", counter_bytes, trend_bytes);
  // The bounds docs/doctor.md states: 16 x 2048 counter series and 60 x 2048 trend series.
  EXPECT_LT(counter_bytes, 512);
  EXPECT_LT(trend_bytes, 320);
}

}  // namespace
}  // namespace rdmascope::doctor
