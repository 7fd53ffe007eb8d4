#include "collectors/occupancy.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "collectors/shared_metrics.h"
#include "core/log.h"
#include "core/sysfs.h"
#include "stats_file.h"

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

// A mapped file, unmapped on scope exit.
struct Mapping {
  void* data = MAP_FAILED;
  size_t size = 0;
  ~Mapping() {
    if (data != MAP_FAILED) munmap(data, size);
  }
};

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
    const Label pid{"pid", pid_text};
    const Label comm{"comm", process.comm};
    for (const OccupancyCq& cq : process.cqs) {
      const std::string handle = std::to_string(cq.handle);
      const std::vector<Label> labels{{"device", cq.device}, pid, comm, {"cq", handle}};
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
      const std::vector<Label> labels{{"device", srq.device}, pid, comm, {"srq", handle}};
      out.Add(kSrqPosted, labels, static_cast<double>(srq.posted));
      out.Add(kSrqMax, labels, srq.max_wr);
      out.Add(kSrqLimit, labels, srq.limit);
    }
    out.Add(kUntracked, {pid, comm, {"kind", "cq"}}, static_cast<double>(process.lost_cqs));
    out.Add(kUntracked, {pid, comm, {"kind", "srq"}}, static_cast<double>(process.lost_srqs));
    out.Add(kUntracked, {pid, comm, {"kind", "qp"}}, static_cast<double>(process.lost_qps));
    // Per process, never per QP: a process may have thousands of QPs.
    for (const auto& [direction, sizes] :
         {std::pair{"send", &process.send}, std::pair{"recv", &process.recv}}) {
      if (!process.message_sizes) break;  // not counted: absent, not 0
      uint64_t count = 0;
      const auto buckets = Cumulative(sizes->buckets, 0, 1.0, count);
      const Label dir{"direction", direction};
      out.Add(kPostedWrs, {pid, comm, dir}, static_cast<double>(count));
      out.Add(kPostedBytes, {pid, comm, dir}, static_cast<double>(sizes->bytes));
      out.AddHistogram(kMessageSize, {pid, comm, dir}, buckets, static_cast<double>(sizes->bytes),
                       count);
    }
    uint64_t timed = 0;
    const auto latency = Cumulative(process.latency_buckets, OCC_LATENCY_MIN_LOG2, 1e-9, timed);
    out.AddHistogram(kLatency, {pid, comm}, latency,
                     static_cast<double>(process.latency_sum_ns) * 1e-9, timed);
  }
}

OccupancyCollector::OccupancyCollector(const OccupancyOptions& options,
                                       std::filesystem::path procfs)
    : dir_(options.dir), procfs_(std::move(procfs)) {
  HoldReaderLock();
}

OccupancyCollector::~OccupancyCollector() {
  if (reader_fd_ >= 0) ::close(reader_fd_);
}

void OccupancyCollector::HoldReaderLock() const {
  std::lock_guard lock(reader_mutex_);
  if (reader_fd_ >= 0) return;
  const auto path = dir_ / OCC_READERS_FILE;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  struct flock shared {};
  shared.l_type = F_RDLCK;
  shared.l_whence = SEEK_SET;
  if (fd >= 0 && fcntl(fd, F_OFD_SETLK, &shared) == 0) {
    reader_fd_ = fd;
    return;
  }
  const int err = errno;
  if (fd >= 0) ::close(fd);
  if (!reader_failure_logged_) {
    reader_failure_logged_ = true;
    log::Debug(
        "preload reader lock not held: exiting processes delete their stats files, so "
        "their last interval is not served",
        {{"path", path.string()}, {"err", std::strerror(err)}});
  }
}

void OccupancyCollector::SetFinishedObserver(FinishedObserver observer) {
  std::lock_guard lock(observer_mutex_);
  finished_observer_ = std::move(observer);
}

namespace {

// The inode of a pid namespace link ("pid:[4026531836]"), nullopt if unreadable.
std::optional<uint64_t> PidNamespaceOf(const std::filesystem::path& link) {
  std::error_code ec;
  const std::string text = std::filesystem::read_symlink(link, ec).native();
  if (ec || !text.starts_with("pid:[") || !text.ends_with("]")) return std::nullopt;
  uint64_t inode = 0;
  const char* first = text.data() + 5;
  const char* last = text.data() + text.size() - 1;
  if (std::from_chars(first, last, inode).ptr != last) return std::nullopt;
  return inode;
}

// The last NSpid field of a /proc/<pid>/status: the pid in the process's own namespace.
std::optional<uint32_t> InnermostPid(const std::string& status) {
  const size_t at = status.find("\nNSpid:");
  if (at == std::string::npos) return std::nullopt;
  const size_t end = status.find('\n', at + 1);
  const std::string line = status.substr(at + 7, end == std::string::npos ? end : end - at - 7);
  const size_t start = line.find_last_of(" \t");
  const std::string last = start == std::string::npos ? line : line.substr(start + 1);
  uint32_t pid = 0;
  if (std::from_chars(last.data(), last.data() + last.size(), pid).ec != std::errc{}) {
    return std::nullopt;
  }
  return pid;
}

// A stats file names its process by its pid in its own pid namespace (two containers' apps
// may both be pid 1): the pid label is translated to the exporter's numbering, found in its
// /proc by namespace inode and NSpid, when the exporter sees that namespace (hostPID). A
// process it cannot see keeps its namespace's pid, and a debug line says so.
void TranslatePids(std::vector<OccupancyProcess>& processes, const std::filesystem::path& procfs) {
  const auto own = PidNamespaceOf(procfs / "self/ns/pid");
  std::set<uint64_t> foreign;
  for (const OccupancyProcess& p : processes) {
    if (own && p.pid_ns != 0 && p.pid_ns != *own) foreign.insert(p.pid_ns);
  }
  if (foreign.empty()) return;
  std::map<std::pair<uint64_t, uint32_t>, uint32_t> exporter_pid;
  for (const std::string& name : sysfs::ListDirectory(procfs)) {
    uint32_t pid = 0;
    if (std::from_chars(name.data(), name.data() + name.size(), pid).ptr !=
        name.data() + name.size()) {
      continue;
    }
    const auto ns = PidNamespaceOf(procfs / name / "ns/pid");
    if (!ns || !foreign.contains(*ns)) continue;
    const auto status = sysfs::ReadFile(procfs / name / "status", 16384);
    const auto inner = status ? InnermostPid(*status) : std::nullopt;
    if (inner) exporter_pid[{*ns, *inner}] = pid;
  }
  for (OccupancyProcess& p : processes) {
    if (!foreign.contains(p.pid_ns)) continue;
    const auto it = exporter_pid.find({p.pid_ns, p.pid});
    if (it != exporter_pid.end()) {
      p.pid = it->second;
    } else {
      log::Debug(
          "preload stats file of a pid namespace the exporter does not see: pid label "
          "is the namespace's",
          {{"pid", std::to_string(p.pid)}, {"pid_ns", std::to_string(p.pid_ns)}});
    }
  }
}

}  // namespace

// Whether a process holds the file's liveness lock (stats_file.h): an OFD write lock taken by
// the preload library for its process's life. F_OFD_GETLK takes no lock itself, so a scrape
// never disturbs an application. nullopt if the kernel cannot tell.
static std::optional<bool> HeldByItsProcess(int fd) {
  struct flock lock {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  if (fcntl(fd, F_OFD_GETLK, &lock) != 0) return std::nullopt;
  return lock.l_type != F_UNLCK;
}

CollectResult OccupancyCollector::Collect(MetricSet& out) const {
  HoldReaderLock();
  std::vector<OccupancyProcess> processes;
  std::vector<size_t> finished;  // indexes in `processes` of the stale files' processes
  size_t rejected = 0;
  for (const std::string& name : sysfs::ListDirectory(dir_)) {
    if (!name.ends_with(".occ")) continue;
    const auto path = dir_ / name;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) continue;
    struct stat st {};
    Mapping map;
    const bool regular = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    if (regular && static_cast<size_t>(st.st_size) == sizeof(occ_file)) {
      map.size = sizeof(occ_file);
      map.data = mmap(nullptr, map.size, PROT_READ, MAP_SHARED, fd, 0);
    }
    // Deleted only if the name still is the inode tested (an application may have created a
    // new file there).
    const auto remove_if_same = [&] {
      struct stat now {};
      if (::stat(path.c_str(), &now) == 0 && now.st_ino == st.st_ino && now.st_dev == st.st_dev) {
        std::error_code ec;
        std::filesystem::remove(path, ec);
      }
    };
    if (map.data == MAP_FAILED && regular && st.st_size > 0) {
      // Another size: a library of another version (its magic is at the same place in all
      // of them). Stale ones are deleted as below; live ones are skipped, and said so.
      occ_header header{};
      const bool ours =
          ::pread(fd, &header, sizeof header, 0) == sizeof header && header.magic == OCC_MAGIC;
      const auto held = ours ? HeldByItsProcess(fd) : std::nullopt;
      ::close(fd);
      if (held && !*held) {
        remove_if_same();
      } else {
        ++rejected;
        log::Debug("preload stats file skipped",
                   {{"path", path.string()},
                    {"err", ours ? "stats file version " + std::to_string(header.version) +
                                       ", this exporter reads " + std::to_string(OCC_VERSION)
                                 : "size " + std::to_string(st.st_size) + ", not a stats file"}});
      }
      continue;
    }
    const auto held = map.data == MAP_FAILED ? std::nullopt : HeldByItsProcess(fd);
    ::close(fd);
    // A file being created (not yet sized), a foreign file or an unreadable one: skipped,
    // never deleted.
    if (map.data == MAP_FAILED || !held) {
      ++rejected;
      continue;
    }
    auto process = ParseOccupancyFile({static_cast<const uint8_t*>(map.data), map.size});
    // Nobody holds its lock: its process exited, was killed or exec'd (or died before
    // writing the header: magic still 0). The liveness test needs no /proc, so it holds for
    // processes of other pid namespaces too. Its final figures are served this once (the
    // library leaves the file at exit for this), then the file goes.
    const auto* header = static_cast<const occ_header*>(map.data);
    if (!*held && (process || header->magic == 0)) {
      remove_if_same();
      if (!process) continue;
      finished.push_back(processes.size());
      processes.push_back(std::move(*process));
      continue;
    }
    if (!process) {
      ++rejected;
      log::Debug("preload stats file skipped", {{"path", path.string()}, {"err", process.error()}});
      continue;
    }
    processes.push_back(std::move(*process));
  }
  if (processes.empty()) {
    return {.no_data = true,
            .detail = "no process runs with librdmascope_preload.so (stats files in " +
                      dir_.string() + ")" +
                      (rejected ? "; " + std::to_string(rejected) + " unreadable files" : "")};
  }
  TranslatePids(processes, procfs_);
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
