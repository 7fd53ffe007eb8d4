// What `serve` keeps for /doctor: a ring of *counter* snapshots over the last lookback (15
// minutes by default), holding only the series the window checks read, so that counter rates
// are judged over recent collections rather than since start (an error burst weeks ago would
// otherwise fire until restart); and a ring of *trend* snapshots, one per interval (a minute)
// for up to an hour, holding only the series the trend checks read (MR outstanding and
// leak-suspect gauges, pinned memory per process). docs/doctor.md "History mode" gives the
// memory bound.
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <string_view>

#include "doctor/options.h"
#include "doctor/samples.h"

namespace rdmascope::doctor {

// The series a trend snapshot holds (checks_memory.cc reads them over time).
inline constexpr std::string_view kTrendSeries[] = {
    "rdma_mr_outstanding_bytes", "rdma_mr_outstanding_regions", "rdma_mr_leak_suspect_bytes",
    "rdma_mr_leak_suspect_regions", "rdma_process_pinned_bytes"};

// The counters the window checks compare between two collections (the `before` of checks.h):
// links.crc_errors, symbol_errors, link_downed, retransmissions; roce.global_pause,
// pause_storm; queues.receive_starvation, peer_receive_starvation; memory.registration_churn;
// links.fec_pre_ber, fec_uncorrectable, flapping (issue 40).
// DoctorLookback.CounterSnapshotsHoldWhatTheWindowChecksRead fails when a check reads another.
inline constexpr std::string_view kWindowSeries[] = {
    "rdma_netdev_crc_errors_total", "rdma_netdev_symbol_errors_total",
    "rdma_port_symbol_errors_total", "rdma_port_link_downed_total", "rdma_port_hw_counter_total",
    "rdma_netdev_pause_frames_total", "rdma_netdev_pause_storm_events_total",
    "rdma_mr_registrations_total", "rdma_mr_deregistrations_total",
    // issue 40: FEC (checks_link_fec.cc), link-down events (checks_link_down.cc)
    "rdma_link_fec_corrected_bits_total", "rdma_link_fec_corrected_codewords_total",
    "rdma_link_fec_uncorrectable_codewords_total", "rdma_link_down_events_total"};
// And some of the ethtool stats: the netdev's IP packets (IpPacketRate, check_util.h), which
// say whether its Ethernet knobs matter (roce.coalescing, roce.cqe_compression, nic.xps); the
// drivers' own FEC counters where FEC_GET has none (links.fec_pre_ber: mlx5
// rx_corrected_bits_phy, bnxt_en rx_corrected_bits and rx_fec_corrected_blocks).
inline constexpr std::string_view kWindowEthtoolStats[] = {
    "rx_packets", "tx_packets", "rx_corrected_bits_phy", "rx_corrected_bits",
    "rx_fec_corrected_blocks"};
inline constexpr SeriesSelector kWindowSelected[] = {
    {"rdma_ethtool_stat", "stat", kWindowEthtoolStats}};

// What a counter snapshot of the ring holds of a whole collection.
inline Snapshot WindowSeriesOf(const Snapshot& snapshot) {
  return snapshot.Only(kWindowSeries, kWindowSelected);
}

// The counter ring holds at most this many spans of the lookback (plus the snapshot that
// starts the first one): a minute apart with the default 15 minutes, lookback / 15 apart with
// a longer one, so its memory does not grow with the lookback.
inline constexpr double kCounterSlots = 15;

class History {
 public:
  // At most `max_kept` trend snapshots, at least `interval_seconds` apart; counter snapshots
  // at least max(interval, lookback / kCounterSlots) apart, dropped once older than
  // `lookback_seconds`. Each snapshot holds at most `max_series` series (one over it is not
  // kept, and the log says so).
  explicit History(size_t max_kept = 60, double interval_seconds = 60, size_t max_series = 2048,
                   double lookback_seconds = kDefaultLookbackSeconds);

  // Offers one full collection; copies of its trend and window series are kept when their
  // spacing has passed since the last kept ones. Returns whether a trend copy was kept.
  // Thread-safe.
  bool Offer(const Snapshot& snapshot);

  // The kept snapshots; empty before any Offer. Thread-safe: the view shares the snapshots,
  // later offers do not change it.
  std::shared_ptr<const HistoryView> View() const;

  size_t kept() const;

 private:
  bool Fits(const Snapshot& copy, std::string_view what) const;

  const size_t max_kept_;
  const double interval_seconds_;
  const size_t max_series_;
  const double lookback_seconds_;
  const double counter_spacing_seconds_;
  mutable std::mutex mutex_;
  bool started_ = false;
  double started_seconds_ = 0;
  std::deque<std::shared_ptr<const Snapshot>> counters_;
  std::deque<std::shared_ptr<const Snapshot>> kept_;
};

}  // namespace rdmascope::doctor
