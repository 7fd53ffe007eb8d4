// The occupancy collector: exact CQ and SRQ fill levels of the applications that run with the
// opt-in preload library (preload/, LD_PRELOAD=librdmascope_preload.so), read from their
// stats files in --collector.occupancy.dir (one per process image, preload/stats_file.h). A file no
// process holds locked (its process exited, was killed or exec'd) holds that process's final
// figures: they are served by the collection that finds it (so the last interval counts),
// handed to the finished-process observer if one is set (`rdmascope profile`), and the file is
// deleted. One read-then-delete path for serve and profile.
#pragma once

#include <array>
#include <cstdint>
#include <expected>
#include <filesystem>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "core/collector.h"

namespace rdmascope {

struct OccupancyOptions {
  std::filesystem::path dir = "/run/rdmascope";
};

struct OccupancyCq {
  std::string device;
  uint32_t handle = 0;
  uint32_t entries = 0;
  uint64_t outstanding = 0;  // completions expected and not yet polled: upper bound of the fill
  uint64_t peak = 0;
  uint64_t polls = 0;
  uint64_t empty_polls = 0;
  uint64_t polled_entries = 0;
  uint64_t requested_entries = 0;
};

struct OccupancySrq {
  std::string device;
  uint32_t handle = 0;
  uint32_t max_wr = 0;
  uint32_t limit = 0;
  uint64_t posted = 0;  // receives posted and not yet consumed: the fill level
};

// Work requests posted in one direction: log2 histogram of their sizes (the sum of their
// scatter-gather lengths). buckets[b] counts sizes in (2^(b-1), 2^b] bytes, b = 0..31 (b = 0:
// 0 and 1 byte); buckets[32] sizes above 2^31 (preload/stats_file.h).
struct OccupancySizes {
  uint64_t bytes = 0;
  std::array<uint64_t, 33> buckets{};
  uint64_t count() const;
};

struct OccupancyProcess {
  uint32_t pid = 0;  // in its own pid namespace
  uint64_t start_ticks = 0;
  std::string comm;
  uint64_t pid_ns = 0;  // inode of that pid namespace
  uint64_t lost_cqs = 0;
  uint64_t lost_srqs = 0;
  uint64_t lost_qps = 0;
  std::vector<OccupancyCq> cqs;
  std::vector<OccupancySrq> srqs;
  // false when the library counted no message sizes (RDMASCOPE_PRELOAD_MESSAGE_SIZES unset):
  // send and recv are then not figures, and their series are absent.
  bool message_sizes = true;
  OccupancySizes send;  // ibv_post_send
  OccupancySizes recv;  // ibv_post_recv and ibv_post_srq_recv
  // Sampled post-to-poll times of signalled sends: latency_buckets[i] counts times in
  // (2^(i+6), 2^(i+7)] ns (i = 0: up to 128 ns), i = 0..23; [24] longer ones.
  uint64_t latency_sum_ns = 0;
  std::array<uint64_t, 25> latency_buckets{};
  uint32_t sample_period = 0;  // 1 in this many signalled sends timed (0: off)
};

// Decodes a stats file's bytes; an error for a short, foreign or other-version file.
std::expected<OccupancyProcess, std::string> ParseOccupancyFile(std::span<const uint8_t> bytes);

void MapOccupancy(const std::vector<OccupancyProcess>& processes, MetricSet& out);

class OccupancyCollector : public Collector {
 public:
  OccupancyCollector(const OccupancyOptions& options, std::filesystem::path procfs);
  ~OccupancyCollector() override;
  CollectResult Collect(MetricSet& out) const override;

  // Called, from the collecting thread, with the final figures of each process whose stale
  // file a collection read (once per file, just before deleting it).
  using FinishedObserver = std::function<void(const OccupancyProcess&)>;
  void SetFinishedObserver(FinishedObserver observer);

 private:
  std::filesystem::path dir_;
  std::filesystem::path procfs_;
  mutable std::mutex observer_mutex_;
  FinishedObserver finished_observer_;

  // A read lock on <dir>/.readers (stats_file.h) for the collector's life: while it is held,
  // libraries exiting leave their files for us to serve once; without it they delete them.
  // Taken at construction, retried by each collection until held (the directory may appear
  // later: the first preloaded process creates it).
  void HoldReaderLock() const;
  mutable std::mutex reader_mutex_;
  mutable int reader_fd_ = -1;
  mutable bool reader_failure_logged_ = false;
};

}  // namespace rdmascope
