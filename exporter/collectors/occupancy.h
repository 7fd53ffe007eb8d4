// The occupancy collector: exact CQ and SRQ fill levels of the applications that run with the
// opt-in preload library (preload/, LD_PRELOAD=librdmascope_preload.so), read from their
// stats files in --occupancy.dir (one per process image, preload/stats_file.h). A file no
// process holds locked (its process exited, was killed or exec'd) is deleted.
#pragma once

#include <array>
#include <cstdint>
#include <expected>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "core/collector.h"

namespace rdmascope {

struct OccupancyOptions {
  std::filesystem::path dir = "/run/rdmascope";
  // Stale files (their process exited) are skipped but not deleted: `rdmascope profile` reads
  // the final figures of its program's file after the exit and removes its private directory.
  bool keep_stale_files = false;
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
  CollectResult Collect(MetricSet& out) const override;

 private:
  std::filesystem::path dir_;
  std::filesystem::path procfs_;
  bool keep_stale_files_ = false;
};

}  // namespace rdmascope
