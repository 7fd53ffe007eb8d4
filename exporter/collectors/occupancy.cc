#include "collectors/occupancy.h"

#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "collectors/occupancy_capture.h"
#include "collectors/shared_metrics.h"
#include "core/log.h"
#include "core/sysfs.h"
#include "stats_file.h"
#include "sys/untrusted_file.h"

namespace rdmascope {
namespace {

using prometheus::MetricType;

constexpr MetricDesc kCqOutstanding{
    "rdma_cq_outstanding_entries",
    "Completions expected on the CQ and not yet polled (signalled sends and receives posted): "
    "an upper bound of its fill level (preload library).",
    MetricType::Gauge};
constexpr MetricDesc kCqPeak{"rdma_cq_outstanding_peak_entries",
                             "Highest rdma_cq_outstanding_entries since the CQ was created.",
                             MetricType::Gauge};
constexpr MetricDesc kCqPolls{"rdma_cq_polls_total", "ibv_poll_cq calls on the CQ.",
                              MetricType::Counter};
constexpr MetricDesc kCqEmptyPolls{"rdma_cq_empty_polls_total",
                                   "ibv_poll_cq calls that returned no completion.",
                                   MetricType::Counter};
constexpr MetricDesc kCqPolled{"rdma_cq_polled_completions_total",
                               "Completions ibv_poll_cq returned.", MetricType::Counter};
constexpr MetricDesc kCqRequested{"rdma_cq_poll_requested_entries_total",
                                  "Entries ibv_poll_cq asked for (batch fullness = polled "
                                  "completions / requested entries).",
                                  MetricType::Counter};
constexpr MetricDesc kSrqPosted{"rdma_srq_posted_wrs",
                                "Receive WRs posted to the SRQ and not yet consumed: its fill "
                                "level (preload library).",
                                MetricType::Gauge};
constexpr MetricDesc kUntracked{"rdma_preload_untracked_queues_total",
                                "CQs, SRQs or QPs the preload library could not track (its "
                                "stats file or tables were full, or their device context was "
                                "not tracked), by kind.",
                                MetricType::Counter};

constexpr MetricDesc kPostedWrs{"rdma_process_posted_work_requests_total",
                                "Work requests the process posted (ibv_post_send: send; "
                                "ibv_post_recv, ibv_post_srq_recv: recv), preload library.",
                                MetricType::Counter};
constexpr MetricDesc kPostedBytes{"rdma_process_posted_bytes_total",
                                  "Bytes of the work requests posted (sum of their "
                                  "scatter-gather lengths; recv: receive buffer sizes).",
                                  MetricType::Counter};
constexpr MetricDesc kMessageSize{"rdma_process_message_size_bytes",
                                  "Sizes of the work requests posted (sum of their "
                                  "scatter-gather lengths), preload library.",
                                  MetricType::Histogram};
constexpr MetricDesc kFilesSkipped{
    "rdmascope_occupancy_files_skipped_total",
    "Files of the preload stats directory not served, by reason: not a regular file, too "
    "large, cut short, not a stats file, a claim on a process the kernel does not confirm "
    "(gone, other owner, not mapped by it), a stale file never seen live, or beyond the caps.",
    MetricType::Counter};
constexpr MetricDesc kLatency{"rdma_process_completion_latency_seconds",
                              "Time from ibv_post_send to the ibv_poll_cq that returned its "
                              "completion, for a sample of signalled sends (1 in "
                              "RDMASCOPE_PRELOAD_SAMPLE), preload library.",
                              MetricType::Histogram};

static_assert(std::tuple_size_v<decltype(OccupancySizes::buckets)> == OCC_SIZE_BUCKETS);
static_assert(std::tuple_size_v<decltype(OccupancyProcess::latency_buckets)> ==
              OCC_LATENCY_BUCKETS);

// Adds `from`'s counters (one shard of the stats file) to `to`.
void AddSizes(const occ_sizes& from, OccupancySizes& to) {
  to.bytes += from.bytes;
  for (size_t b = 0; b < to.buckets.size(); ++b) to.buckets[b] += from.buckets[b];
}

void AddShard(const occ_shard& shard, OccupancyProcess& to) {
  AddSizes(shard.send, to.send);
  AddSizes(shard.recv, to.recv);
  to.latency_sum_ns += shard.latency_sum_ns;
  for (size_t i = 0; i < to.latency_buckets.size(); ++i) {
    to.latency_buckets[i] += shard.latency_buckets[i];
  }
}

// Cumulative Prometheus buckets of a log2 histogram: bucket i's upper bound is
// 2^(i + min_log2) * scale; the last one (above every bound) is +Inf, added from the count.
template <size_t N>
std::vector<MetricSet::Bucket> Cumulative(const std::array<uint64_t, N>& buckets, int min_log2,
                                          double scale, uint64_t& count) {
  std::vector<MetricSet::Bucket> out;
  count = 0;
  for (size_t i = 0; i < N; ++i) {
    count += buckets[i];
    if (i + 1 < N) {
      out.push_back({std::ldexp(scale, static_cast<int>(i) + min_log2), count});
    }
  }
  return out;
}

}  // namespace

uint64_t OccupancySizes::count() const {
  uint64_t total = 0;
  for (const uint64_t n : buckets) total += n;
  return total;
}

std::expected<OccupancyProcess, std::string> ParseOccupancyFile(std::span<const uint8_t> bytes) {
  if (bytes.size() != sizeof(occ_file)) {
    return std::unexpected("size " + std::to_string(bytes.size()) + ", want " +
                           std::to_string(sizeof(occ_file)));
  }
  const auto* file = reinterpret_cast<const occ_file*>(bytes.data());
  if (file->header.magic != OCC_MAGIC) return std::unexpected("not a preload stats file");
  if (file->header.version != OCC_VERSION) {
    return std::unexpected("stats file version " + std::to_string(file->header.version) +
                           ", this exporter reads " + std::to_string(OCC_VERSION));
  }
  OccupancyProcess process{.pid = file->header.pid,
                           .start_ticks = file->header.start_ticks,
                           .comm = sysfs::FixedString(file->header.comm, sizeof file->header.comm),
                           .pid_ns = file->header.pid_ns,
                           .lost_cqs = file->header.lost_cqs,
                           .lost_srqs = file->header.lost_srqs,
                           .lost_qps = file->header.lost_qps,
                           .message_sizes = file->header.sizes_off == 0,
                           .sample_period = file->header.sample_period};
  for (const occ_cq& cq : file->cqs) {
    if (!cq.in_use) continue;
    // Each counter is the owner thread's word plus the other threads' (stats_file.h). Read
    // without synchronisation: completed may run ahead of a stale expected.
    const occ_poll_counters& own = cq.polled;
    const occ_poll_counters& shared = cq.polled_shared;
    const uint64_t expected = cq.expected + cq.expected_shared;
    const uint64_t completed = own.completed + shared.completed;
    process.cqs.push_back(
        {.device = sysfs::FixedString(cq.device, sizeof cq.device),
         .handle = cq.handle,
         .entries = cq.entries,
         .outstanding = expected > completed ? expected - completed : 0,
         .peak = cq.peak,
         // Each word only grows: the sum does too, across scrapes.
         .polls = own.empty_polls + shared.empty_polls + own.nonempty_polls + shared.nonempty_polls,
         .empty_polls = own.empty_polls + shared.empty_polls,
         .polled_entries = own.polled_entries + shared.polled_entries,
         .requested_entries = own.requested_entries + shared.requested_entries});
  }
  for (const occ_srq& srq : file->srqs) {
    if (!srq.in_use) continue;
    const uint64_t posted = srq.posted + srq.posted_shared;
    const uint64_t consumed = srq.consumed + srq.consumed_shared;
    process.srqs.push_back({.device = sysfs::FixedString(srq.device, sizeof srq.device),
                            .handle = srq.handle,
                            .max_wr = srq.max_wr,
                            .limit = srq.limit,
                            .posted = posted > consumed ? posted - consumed : 0});
  }
  for (const occ_shard& shard : file->shards) AddShard(shard, process);
  AddShard(file->shard_shared, process);
  return process;
}

void MapOccupancy(const std::vector<OccupancyProcess>& processes, MetricSet& out) {
  for (const OccupancyProcess& process : processes) {
    // Label holds string_views: the numbers' text must outlive the labels.
    const std::string pid_text = std::to_string(process.pid);
    // A pid of another namespace says so (pid_ns): the same number in the exporter's
    // namespace is another process (collectors/workload.cc leaves such series out).
    const std::string pid_ns_text = std::to_string(process.pid_ns);
    std::vector<Label> who{{"pid", pid_text}, {"comm", process.comm}};
    if (process.pid_ns != 0) who.emplace_back("pid_ns", pid_ns_text);
    // `before`, the process's labels, then `after` (the order the series always had).
    const auto with = [&](std::initializer_list<Label> before, std::initializer_list<Label> after) {
      std::vector<Label> labels(before);
      labels.insert(labels.end(), who.begin(), who.end());
      labels.insert(labels.end(), after);
      return labels;
    };
    for (const OccupancyCq& cq : process.cqs) {
      const std::string handle = std::to_string(cq.handle);
      const std::vector<Label> labels = with({{"device", cq.device}}, {{"cq", handle}});
      out.Add(kCqCapacity, labels, cq.entries);
      out.Add(kCqOutstanding, labels, static_cast<double>(cq.outstanding));
      out.Add(kCqPeak, labels, static_cast<double>(cq.peak));
      out.Add(kCqPolls, labels, static_cast<double>(cq.polls));
      out.Add(kCqEmptyPolls, labels, static_cast<double>(cq.empty_polls));
      out.Add(kCqPolled, labels, static_cast<double>(cq.polled_entries));
      out.Add(kCqRequested, labels, static_cast<double>(cq.requested_entries));
    }
    for (const OccupancySrq& srq : process.srqs) {
      const std::string handle = std::to_string(srq.handle);
      const std::vector<Label> labels = with({{"device", srq.device}}, {{"srq", handle}});
      out.Add(kSrqPosted, labels, static_cast<double>(srq.posted));
      out.Add(kSrqMax, labels, srq.max_wr);
      out.Add(kSrqLimit, labels, srq.limit);
    }
    out.Add(kUntracked, with({}, {{"kind", "cq"}}), static_cast<double>(process.lost_cqs));
    out.Add(kUntracked, with({}, {{"kind", "srq"}}), static_cast<double>(process.lost_srqs));
    out.Add(kUntracked, with({}, {{"kind", "qp"}}), static_cast<double>(process.lost_qps));
    // Per process, never per QP: a process may have thousands of QPs.
    for (const auto& [direction, sizes] :
         {std::pair{"send", &process.send}, std::pair{"recv", &process.recv}}) {
      if (!process.message_sizes) break;  // not counted: absent, not 0
      uint64_t count = 0;
      const auto buckets = Cumulative(sizes->buckets, 0, 1.0, count);
      const std::vector<Label> labels = with({}, {{"direction", direction}});
      out.Add(kPostedWrs, labels, static_cast<double>(count));
      out.Add(kPostedBytes, labels, static_cast<double>(sizes->bytes));
      out.AddHistogram(kMessageSize, labels, buckets, static_cast<double>(sizes->bytes), count);
    }
    uint64_t timed = 0;
    const auto latency = Cumulative(process.latency_buckets, OCC_LATENCY_MIN_LOG2, 1e-9, timed);
    out.AddHistogram(kLatency, who, latency, static_cast<double>(process.latency_sum_ns) * 1e-9,
                     timed);
  }
}

const char* SkipReasonName(SkipReason reason) {
  switch (reason) {
    case SkipReason::kOpenFailed:
      return sys::RefusalName(sys::Refusal::kOpenFailed);
    case SkipReason::kNotRegular:
      return sys::RefusalName(sys::Refusal::kNotRegular);
    case SkipReason::kTooLarge:
      return sys::RefusalName(sys::Refusal::kTooLarge);
    case SkipReason::kShortRead:
      return sys::RefusalName(sys::Refusal::kShortRead);
    case SkipReason::kInvalid:
      return "invalid";
    case SkipReason::kProcessNotFound:
      return AnchorFailureName(AnchorFailure::kProcessNotFound);
    case SkipReason::kOwnerMismatch:
      return AnchorFailureName(AnchorFailure::kOwnerMismatch);
    case SkipReason::kNotMapped:
      return AnchorFailureName(AnchorFailure::kNotMapped);
    case SkipReason::kStaleUnanchored:
      return "stale_unanchored";
    case SkipReason::kOverProcessCap:
      return "over_process_cap";
    case SkipReason::kOverUidCap:
      return "over_uid_cap";
    case SkipReason::kCount:
      break;
  }
  return "invalid";
}

namespace {

SkipReason FromRefusal(sys::Refusal refusal) {
  switch (refusal) {
    case sys::Refusal::kOpenFailed:
      return SkipReason::kOpenFailed;
    case sys::Refusal::kNotRegular:
      return SkipReason::kNotRegular;
    case sys::Refusal::kTooLarge:
      return SkipReason::kTooLarge;
    case sys::Refusal::kShortRead:
      return SkipReason::kShortRead;
  }
  return SkipReason::kOpenFailed;
}

SkipReason FromAnchor(AnchorFailure failure) {
  switch (failure) {
    case AnchorFailure::kProcessNotFound:
      return SkipReason::kProcessNotFound;
    case AnchorFailure::kOwnerMismatch:
      return SkipReason::kOwnerMismatch;
    case AnchorFailure::kNotMapped:
      return SkipReason::kNotMapped;
  }
  return SkipReason::kProcessNotFound;
}

// The stats files' names with their owners, in the order they are read: files whose claim
// held before first (a flood of new files cannot push a known process out), then by name.
struct Candidate {
  std::string name;
  struct stat st;
  bool known;
};

}  // namespace

OccupancyCollector::OccupancyCollector(const OccupancyOptions& options,
                                       std::filesystem::path procfs)
    : dir_(options.dir),
      procfs_(procfs),
      source_(MakeStatsSource(
          options.dir, procfs,
          options.privileged ? options.privileged : std::make_shared<sys::DirectProcfs>(procfs))),
      privileged_(source_->procfs()),
      max_processes_(options.max_processes),
      max_processes_per_uid_(options.max_processes_per_uid),
      pids_(std::move(procfs), options.pid_walk_interval, privileged_) {}

OccupancyCollector::~OccupancyCollector() = default;

void OccupancyCollector::SetFinishedObserver(FinishedObserver observer) {
  std::lock_guard lock(observer_mutex_);
  finished_observer_ = std::move(observer);
}

void OccupancyCollector::Skip(SkipReason reason, const std::string& name,
                              const std::string& detail) const {
  skipped_[static_cast<size_t>(reason)].fetch_add(1, std::memory_order_relaxed);
  // Files beyond the caps are summed up in one line per collection (Collect): a flood of
  // 10,000 files must not become 10,000 log lines per scrape.
  if (reason == SkipReason::kOverProcessCap || reason == SkipReason::kOverUidCap) return;
  log::Debug("preload stats file skipped",
             {{"file", name}, {"reason", SkipReasonName(reason)}, {"detail", detail}});
}

void OccupancyCollector::AddSkipCounts(MetricSet& out) const {
  for (size_t i = 0; i < skipped_.size(); ++i) {
    out.Add(kFilesSkipped, {{"reason", SkipReasonName(static_cast<SkipReason>(i))}},
            static_cast<double>(skipped_[i].load(std::memory_order_relaxed)));
  }
}

std::optional<uint32_t> OccupancyCollector::Anchor(const OccupancyProcess& process,
                                                   const struct stat& st,
                                                   const std::string& name) const {
  const Inode inode{st.st_dev, st.st_ino};
  {
    // Anchored before: the same process still (its start time), so the claim still holds.
    std::lock_guard lock(anchored_mutex_);
    if (const auto it = anchored_.find(inode); it != anchored_.end()) {
      if (StartTicks(procfs_, it->second.pid) == it->second.start_ticks) return it->second.pid;
      anchored_.erase(it);
    }
  }
  const auto pid = pids_.ExporterPid(process.pid_ns, process.pid);
  if (!pid) {
    Skip(SkipReason::kProcessNotFound, name,
         "pid " + std::to_string(process.pid) + " of pid namespace " +
             std::to_string(process.pid_ns) + " not seen in " + procfs_.string());
    return std::nullopt;
  }
  const auto start = StartTicks(procfs_, *pid);
  const auto anchored = AnchorInProc(procfs_, *privileged_, *pid, st);
  if (!anchored || !start) {
    pids_.Forget(process.pid_ns, process.pid);
    const AnchorFailure failure = anchored ? AnchorFailure::kProcessNotFound : anchored.error();
    Skip(FromAnchor(failure), name,
         "claims pid " + std::to_string(*pid) + ", owner uid " + std::to_string(st.st_uid));
    return std::nullopt;
  }
  std::lock_guard lock(anchored_mutex_);
  anchored_[inode] = {.pid = *pid, .start_ticks = *start};
  return *pid;
}

void OccupancyCollector::Remove(StatsDirectory& dir, const std::string& name,
                                const struct stat& st) const {
  dir.RemoveIfSame(name, st);
  if (source_->deletes()) return;
  std::lock_guard lock(anchored_mutex_);
  consumed_.insert({st.st_dev, st.st_ino});
}

CollectResult OccupancyCollector::Collect(MetricSet& out) const {
  auto directory = source_->OpenDirectory();
  if (!directory) {
    AddSkipCounts(out);
    return {.no_data = true,
            .detail = "no process runs with librdmascope_preload.so (no " + dir_.string() + ")"};
  }
  StatsDirectory& dir = **directory;
  const bool trusted = dir.Private();
  std::vector<std::string> names = dir.Names();

  // Owners first (lstat reads the inode, opens nothing), to apply the caps before any open.
  std::vector<Candidate> candidates;
  std::set<Inode> listed;
  size_t rejected = 0;
  {
    std::lock_guard lock(anchored_mutex_);
    for (std::string& name : names) {
      if (!name.ends_with(".occ")) continue;
      auto st = dir.Lstat(name);
      if (!st) {
        if (st.error().empty()) continue;  // gone
        ++rejected;
        Skip(SkipReason::kInvalid, name, st.error());
        continue;
      }
      listed.insert({st->st_dev, st->st_ino});
      if (consumed_.contains({st->st_dev, st->st_ino})) continue;  // served: gone, as live
      const bool known = anchored_.contains({st->st_dev, st->st_ino});
      candidates.push_back({std::move(name), *st, known});
    }
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& a, const Candidate& b) { return a.known && !b.known; });

  std::vector<OccupancyProcess> processes;
  std::vector<size_t> finished;  // indexes in `processes` of the stale files' processes
  std::map<uid_t, size_t> per_uid;
  size_t opened = 0;
  size_t over_cap = 0;
  std::vector<uint8_t> bytes;
  for (const Candidate& candidate : candidates) {
    const std::string& name = candidate.name;
    if (!S_ISREG(candidate.st.st_mode)) {
      ++rejected;
      Skip(SkipReason::kNotRegular, name, "mode " + std::to_string(candidate.st.st_mode & S_IFMT));
      continue;
    }
    if (opened >= max_processes_) {
      ++rejected;
      ++over_cap;
      Skip(SkipReason::kOverProcessCap, name, std::to_string(max_processes_) + " files read");
      continue;
    }
    if (per_uid[candidate.st.st_uid] >= max_processes_per_uid_) {
      ++rejected;
      ++over_cap;
      Skip(SkipReason::kOverUidCap, name,
           "uid " + std::to_string(candidate.st.st_uid) + " has " +
               std::to_string(max_processes_per_uid_) + " files read");
      continue;
    }
    ++opened;
    ++per_uid[candidate.st.st_uid];
    auto file = dir.Open(name, sizeof(occ_file));
    if (!file) {
      ++rejected;
      Skip(FromRefusal(file.error()), name, "");
      continue;
    }
    const struct stat& st = (*file)->stat();
    if (st.st_size == 0) continue;  // being created: locked, not yet sized (stats_file.h)
    const auto held = (*file)->Held();
    if (static_cast<size_t>(st.st_size) != sizeof(occ_file)) {
      // Another size: a library of another version (its magic is at the same place in all
      // of them). Stale ones are deleted as below; live ones are skipped, and said so.
      occ_header header{};
      const bool ours = (*file)->ReadHead(&header, sizeof header) && header.magic == OCC_MAGIC;
      if (ours && held && !*held) {
        Remove(dir, name, st);
        continue;
      }
      ++rejected;
      Skip(SkipReason::kInvalid, name,
           ours ? "stats file version " + std::to_string(header.version) +
                      ", this exporter reads " + std::to_string(OCC_VERSION)
                : "size " + std::to_string(st.st_size) + ", not a stats file");
      continue;
    }
    if (!held) {
      ++rejected;
      Skip(SkipReason::kOpenFailed, name, "its lock cannot be tested");
      continue;
    }
    if (auto read = (*file)->ReadAll(bytes); !read) {
      ++rejected;
      Skip(FromRefusal(read.error()), name, std::to_string(bytes.size()) + " bytes read");
      continue;
    }
    auto process = ParseOccupancyFile(bytes);
    const auto* header = reinterpret_cast<const occ_header*>(bytes.data());
    if (!*held) {
      // Nobody holds its lock: its process exited, was killed or exec'd (or died before
      // writing the header: magic still 0). The liveness test needs no /proc, so it holds for
      // processes of other pid namespaces too. Its final figures are served this once (the
      // library leaves the file at exit for this), then the file goes: only when its claim
      // held while it lived (or the directory is private), as nothing can be checked now.
      Remove(dir, name, st);
      if (!process) {
        if (header->magic != 0) ++rejected;
        continue;
      }
      std::optional<uint32_t> pid;
      {
        std::lock_guard lock(anchored_mutex_);
        if (const auto it = anchored_.find({st.st_dev, st.st_ino}); it != anchored_.end()) {
          pid = it->second.pid;
          anchored_.erase(it);
        }
      }
      if (!pid && !trusted) {
        ++rejected;
        Skip(SkipReason::kStaleUnanchored, name, "claims pid " + std::to_string(process->pid));
        continue;
      }
      if (!pid) {
        // Private directory: the namespace's pid translated as for a live one (untranslated:
        // it keeps its namespace, see OccupancyProcess::pid).
        pid = pids_.ExporterPid(process->pid_ns, process->pid);
      }
      if (pid) {
        process->pid = *pid;
        process->pid_ns = 0;  // in the exporter's numbering now
      }
      finished.push_back(processes.size());
      processes.push_back(std::move(*process));
      continue;
    }
    if (!process) {
      ++rejected;
      Skip(SkipReason::kInvalid, name, process.error());
      continue;
    }
    if (trusted) {
      // No other party writes here: the claim is the file's own, translated where it can be
      // (a process the exporter cannot see keeps its namespace's pid, said at debug level).
      if (const auto translated = pids_.ExporterPid(process->pid_ns, process->pid)) {
        process->pid = *translated;
        process->pid_ns = 0;
      } else {
        log::Debug(
            "preload stats file of a pid namespace the exporter does not see: pid label "
            "is the namespace's",
            {{"pid", std::to_string(process->pid)}, {"pid_ns", std::to_string(process->pid_ns)}});
      }
    } else {
      const auto pid = Anchor(*process, st, name);
      if (!pid) {
        ++rejected;
        continue;
      }
      process->pid = *pid;
      process->pid_ns = 0;
    }
    processes.push_back(std::move(*process));
  }
  if (over_cap > 0) {
    log::Debug("preload stats files skipped beyond the caps",
               {{"files", std::to_string(over_cap)},
                {"max_processes", std::to_string(max_processes_)},
                {"max_processes_per_uid", std::to_string(max_processes_per_uid_)}});
  }
  {
    // Anchors of files no longer there are forgotten (over-cap files keep theirs: still listed).
    std::lock_guard lock(anchored_mutex_);
    std::erase_if(anchored_, [&](const auto& entry) { return !listed.contains(entry.first); });
    std::erase_if(consumed_, [&](const Inode& inode) { return !listed.contains(inode); });
  }
  AddSkipCounts(out);
  if (processes.empty()) {
    return {.no_data = true,
            .detail = "no process runs with librdmascope_preload.so (stats files in " +
                      dir_.string() + ")" +
                      (rejected ? "; " + std::to_string(rejected) + " unreadable files" : "")};
  }
  MapOccupancy(processes, out);
  if (!finished.empty()) {
    std::lock_guard lock(observer_mutex_);
    if (finished_observer_) {
      for (size_t i : finished) finished_observer_(processes[i]);
    }
  }
  return {.detail = std::to_string(processes.size()) + " processes with the preload library"};
}

}  // namespace rdmascope
