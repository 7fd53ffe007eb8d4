// What `serve` keeps for doctor's history checks: the first collection after start (whole, for
// counter rates since start) and a ring of trend snapshots, one per interval (a minute) for up
// to an hour, holding only the series the trend checks read (MR outstanding and leak-suspect
// gauges, pinned memory per process). docs/doctor.md "History" gives the memory bound.
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <string_view>

#include "doctor/samples.h"

namespace rdmascope::doctor {

// The series a kept snapshot holds (checks_memory.cc reads them over time).
inline constexpr std::string_view kTrendSeries[] = {
    "rdma_mr_outstanding_bytes", "rdma_mr_outstanding_regions", "rdma_mr_leak_suspect_bytes",
    "rdma_mr_leak_suspect_regions", "rdma_process_pinned_bytes"};

class History {
 public:
  // At most `max_kept` trend snapshots, at least `interval_seconds` apart, each of at most
  // `max_series` series (the rest is dropped and said in the log once per snapshot).
  explicit History(size_t max_kept = 60, double interval_seconds = 60, size_t max_series = 2048);

  // Offers one full collection. The first one ever is kept whole; a trend copy is kept when
  // `interval_seconds` passed since the last one kept (the oldest is dropped past max_kept).
  // Returns whether a trend copy was kept. Thread-safe.
  bool Offer(const Snapshot& snapshot);

  // The first snapshot and the kept ones; null `first` before any Offer. Thread-safe: the view
  // shares the snapshots, later offers do not change it.
  std::shared_ptr<const HistoryView> View() const;

  size_t kept() const;

 private:
  const size_t max_kept_;
  const double interval_seconds_;
  const size_t max_series_;
  mutable std::mutex mutex_;
  std::shared_ptr<const Snapshot> first_;
  std::deque<std::shared_ptr<const Snapshot>> kept_;
};

}  // namespace rdmascope::doctor
