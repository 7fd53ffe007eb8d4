#include "collectors/occupancy.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "collectors/shared_metrics.h"
#include "core/log.h"
#include "core/process_metrics.h"
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
                                "CQs or SRQs the preload library could not track (its stats "
                                "file was full), by kind.",
                                MetricType::Counter};

// A mapped file, unmapped on scope exit.
struct Mapping {
  void* data = MAP_FAILED;
  size_t size = 0;
  ~Mapping() {
    if (data != MAP_FAILED) munmap(data, size);
  }
};

}  // namespace

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
                           .lost_cqs = file->header.lost_cqs,
                           .lost_srqs = file->header.lost_srqs};
  for (const occ_cq& cq : file->cqs) {
    if (!cq.in_use) continue;
    // Counters are read without synchronisation: completed may run ahead of a stale expected.
    const uint64_t expected = cq.expected;
    const uint64_t completed = cq.completed;
    process.cqs.push_back({.device = sysfs::FixedString(cq.device, sizeof cq.device),
                           .handle = cq.handle,
                           .entries = cq.entries,
                           .outstanding = expected > completed ? expected - completed : 0,
                           .peak = cq.peak,
                           .polls = cq.polls,
                           .empty_polls = cq.empty_polls,
                           .polled_entries = cq.polled_entries,
                           .requested_entries = cq.requested_entries});
  }
  for (const occ_srq& srq : file->srqs) {
    if (!srq.in_use) continue;
    const uint64_t posted = srq.posted;
    const uint64_t consumed = srq.consumed;
    process.srqs.push_back({.device = sysfs::FixedString(srq.device, sizeof srq.device),
                            .handle = srq.handle,
                            .max_wr = srq.max_wr,
                            .limit = srq.limit,
                            .posted = posted > consumed ? posted - consumed : 0});
  }
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
  }
}

OccupancyCollector::OccupancyCollector(const OccupancyOptions& options,
                                       std::filesystem::path procfs)
    : dir_(options.dir), procfs_(std::move(procfs)) {}

CollectResult OccupancyCollector::Collect(MetricSet& out) const {
  std::vector<OccupancyProcess> processes;
  size_t rejected = 0;
  for (const std::string& name : sysfs::ListDirectory(dir_)) {
    if (!name.ends_with(".occ")) continue;
    const auto path = dir_ / name;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) continue;
    struct stat st {};
    Mapping map;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
        static_cast<size_t>(st.st_size) == sizeof(occ_file)) {
      map.size = sizeof(occ_file);
      map.data = mmap(nullptr, map.size, PROT_READ, MAP_SHARED, fd, 0);
    }
    ::close(fd);
    if (map.data == MAP_FAILED) {
      ++rejected;
      continue;
    }
    auto process = ParseOccupancyFile({static_cast<const uint8_t*>(map.data), map.size});
    if (!process) {
      ++rejected;
      log::Debug("preload stats file skipped", {{"path", path.string()}, {"err", process.error()}});
      continue;
    }
    // Its process is gone (or the pid now belongs to another): forget the file.
    const auto stat_text = sysfs::ReadFile(procfs_ / std::to_string(process->pid) / "stat", 4096);
    const auto ticks = stat_text ? ParseStartTicks(*stat_text) : std::nullopt;
    if (!ticks || *ticks != process->start_ticks) {
      std::error_code ec;
      std::filesystem::remove(path, ec);
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
  MapOccupancy(processes, out);
  return {.detail = std::to_string(processes.size()) + " processes with the preload library"};
}

}  // namespace rdmascope
