// The occupancy collector: exact CQ and SRQ fill levels of the applications that run with the
// opt-in preload library (preload/, LD_PRELOAD=librdmascope_preload.so), read from their
// stats files in --collector.occupancy.dir (one per process image, preload/stats_file.h). A file no
// process holds locked (its process exited, was killed or exec'd) holds that process's final
// figures: they are served by the collection that finds it (so the last interval counts),
// handed to the finished-process observer if one is set (`rdmascope profile`), and the file is
// deleted. One read-then-delete path for serve and profile. Under `capture` and `--replay` the
// directory is recorded or replayed (occupancy_capture.h): nothing is deleted or locked, and a
// stale file is served once all the same.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <expected>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "collectors/occupancy_anchor.h"
#include "collectors/occupancy_source.h"
#include "core/collector.h"

namespace rdmascope {

struct OccupancyOptions {
  std::filesystem::path dir = "/run/rdmascope";
  // --collector.occupancy.max-processes: stats files read per collection at most; the rest are
  // skipped and counted (rdmascope_occupancy_files_skipped_total{reason="over_process_cap"}).
  size_t max_processes = 256;
  // --collector.occupancy.max-processes-per-uid: of those, per file owner: one user's flood
  // of files cannot push the other users' processes out of the scrape.
  size_t max_processes_per_uid = 32;
  // The shortest time between two walks of /proc to find processes of other pid namespaces.
  std::chrono::milliseconds pid_walk_interval{5000};
  // Where other users' maps and ns/pid links are read (serve: the capability broker,
  // sys/capability_broker.h); null: this process reads /proc.
  std::shared_ptr<sys::PrivilegedProcfs> privileged;
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
  // As parsed, in its own pid namespace; once the collector has found it, the exporter's pid
  // (pid_ns 0). A pid the exporter could not translate keeps pid_ns: its series then carry a
  // pid_ns label, and nothing looks it up as one of the exporter's pids (the workload
  // collector, profile), where it would name another process.
  uint32_t pid = 0;
  uint64_t start_ticks = 0;
  std::string comm;
  uint64_t pid_ns = 0;  // inode of that pid namespace; 0: `pid` is the exporter's
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

// Why a file of the stats directory was not served (rdmascope_occupancy_files_skipped_total's
// `reason`): a bounded set.
enum class SkipReason {
  kOpenFailed,
  kNotRegular,
  kTooLarge,
  kShortRead,
  kInvalid,          // not a stats file of this exporter's version (magic, version, size)
  kProcessNotFound,  // the process it names is not one the exporter sees alive
  kOwnerMismatch,    // its owner is not that process's uid
  kNotMapped,        // that process does not map it: a forged claim
  kStaleUnanchored,  // its process is gone and no collection saw it live: nothing to trust
  kOverProcessCap,
  kOverUidCap,
  kCount,
};
const char* SkipReasonName(SkipReason reason);

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
  // A stats file whose claim held: its inode, the process (exporter's pid) and its start time.
  struct Anchored {
    uint32_t pid = 0;
    uint64_t start_ticks = 0;
  };
  using Inode = std::pair<dev_t, ino_t>;

  void Skip(SkipReason reason, const std::string& name, const std::string& detail) const;
  void AddSkipCounts(MetricSet& out) const;
  // The exporter's pid of a live file's process once its claim holds (occupancy_anchor.h).
  std::optional<uint32_t> Anchor(const OccupancyProcess& process, const struct stat& st,
                                 const std::string& name) const;

  // A stale file read: deleted (live), or remembered as served (consumed_).
  void Remove(StatsDirectory& dir, const std::string& name, const struct stat& st) const;

  std::filesystem::path dir_;
  std::filesystem::path procfs_;
  // The directory live, or recorded into or replayed from a capture (occupancy_capture.h).
  std::unique_ptr<StatsSource> source_;
  std::shared_ptr<sys::PrivilegedProcfs> privileged_;
  const size_t max_processes_;
  const size_t max_processes_per_uid_;
  mutable PidTranslator pids_;
  mutable std::mutex anchored_mutex_;
  // Files whose claim held at an earlier collection: checked again by the start time of their
  // process only; their final figures (once stale) are served with the pid found then.
  mutable std::map<Inode, Anchored> anchored_;
  // Stale files served where the source does not delete them (capture, replay): passed over
  // while their name is listed, as the live directory would no longer list it.
  mutable std::set<Inode> consumed_;
  mutable std::array<std::atomic<uint64_t>, static_cast<size_t>(SkipReason::kCount)> skipped_{};
  mutable std::mutex observer_mutex_;
  FinishedObserver finished_observer_;
};

}  // namespace rdmascope
