#include "collectors/mr.h"

#include <infiniband/verbs.h>

#include <array>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>

#include "collectors/probe_capture.h"
#include "collectors/shared_metrics.h"
#include "core/capture.h"
#include "core/log.h"
#include "core/sysfs.h"

namespace rdmascope {
namespace {

using prometheus::MetricType;

constexpr MetricDesc kRegions{"rdma_mr_outstanding_regions",
                              "Memory regions registered and not yet deregistered.",
                              MetricType::Gauge};
constexpr MetricDesc kBytes{"rdma_mr_outstanding_bytes",
                            "Bytes of the memory regions registered and not yet deregistered.",
                            MetricType::Gauge};
constexpr MetricDesc kRegistrations{"rdma_mr_registrations_total",
                                    "Successful memory registrations (ibv_reg_mr and variants).",
                                    MetricType::Counter};
constexpr MetricDesc kDeregistrations{"rdma_mr_deregistrations_total",
                                      "Successful ibv_dereg_mr calls on tracked regions.",
                                      MetricType::Counter};
constexpr MetricDesc kFailures{"rdma_mr_registration_failures_total",
                               "Registration calls that returned no region.", MetricType::Counter};
constexpr MetricDesc kReleasedRegions{"rdma_mr_exit_released_regions_total",
                                      "Regions still registered when their process exited "
                                      "(released by the kernel at exit), by command.",
                                      MetricType::Counter};
constexpr MetricDesc kReleasedBytes{"rdma_mr_exit_released_bytes_total",
                                    "Bytes of the regions still registered at process exit.",
                                    MetricType::Counter};
constexpr MetricDesc kExecReleasedRegions{
    "rdma_mr_exec_released_regions_total",
    "Regions still registered when their process exec'd (released by the kernel: the uverbs "
    "fd is close-on-exec), by the command before the exec.",
    MetricType::Counter};
constexpr MetricDesc kExecReleasedBytes{
    "rdma_mr_exec_released_bytes_total",
    "Bytes of the regions still registered when their process exec'd, by the command before "
    "the exec.",
    MetricType::Counter};
constexpr MetricDesc kImplicitOdp{
    "rdma_mr_outstanding_implicit_odp_regions",
    "Outstanding implicit ODP registrations (length SIZE_MAX, whole address space on demand): "
    "counted in rdma_mr_outstanding_regions, not in the byte figures.",
    MetricType::Gauge};
constexpr MetricDesc kStackBytes{
    "rdmascope_mr_stack_bytes",
    "Memory held for the call sites of registrations: user stack copies waiting to be "
    "unwound and the unwound sites of outstanding regions (bounded by "
    "--collector.mr.stack-memory-bytes).",
    MetricType::Gauge};
constexpr MetricDesc kStackSites{
    "rdmascope_mr_stack_sites",
    "Unwound call sites kept (one per distinct registering stack with outstanding regions).",
    MetricType::Gauge};
constexpr MetricDesc kStacksDropped{
    "rdmascope_mr_stacks_dropped_total",
    "Registration stacks not unwound, by reason (ring_full: the BPF ring buffer was full; "
    "memory_bound: --collector.mr.stack-memory-bytes reached; process_gone: the process "
    "exited first; copy_failed: the user stack could not be read). Their regions show the "
    "frame-pointer stack.",
    MetricType::Counter};
constexpr MetricDesc kStackSamples{
    "rdmascope_mr_stack_samples_total",
    "Registrations whose user stack was captured, by result (sent: copied to user space; "
    "deduplicated: a site sent before, no copy).",
    MetricType::Counter};
constexpr MetricDesc kStackUnwindSeconds{"rdmascope_mr_stack_unwind_seconds_total",
                                         "Time spent unwinding registration stacks with DWARF CFI.",
                                         MetricType::Counter};
constexpr MetricDesc kStacksUnwound{"rdmascope_mr_stacks_unwound_total",
                                    "Registration stacks unwound.", MetricType::Counter};
constexpr MetricDesc kUnwindWorkerStarts{
    "rdmascope_mr_unwind_worker_starts_total",
    "Sandboxed unwinder worker processes started (--collector.mr.unwind-sandbox).",
    MetricType::Counter};
constexpr MetricDesc kUnwindWorkerRestarts{
    "rdmascope_mr_unwind_worker_restarts_total",
    "Unwinder workers stopped, by reason (deadline: a request overran its deadline and the "
    "worker was killed; died: it crashed or the seccomp filter killed it; protocol: it answered "
    "what the protocol does not allow; start_failed: it could not be started). The stack it "
    "was unwinding says why it has no frames.",
    MetricType::Counter};
constexpr MetricDesc kUnwindWorkerSandbox{
    "rdmascope_mr_unwind_worker_sandbox",
    "Layers of the unwinder worker's sandbox, 1 entered, 0 refused by the host (uid, "
    "namespaces, empty_root, capabilities, no_new_privs, rlimits, seccomp; docs/security.md).",
    MetricType::Gauge};
constexpr MetricDesc kLost{
    "rdma_mr_lost_total",
    "Events not tracked, by reason (regions: --collector.mr.max-regions full; "
    "processes: --collector.mr.max-processes full; calls, exit_events: BPF map or "
    "buffer full; unseen_returns: a call whose return was never seen, "
    "e.g. a longjmp out of it).",
    MetricType::Counter};

constexpr MetricDesc kLeakRegions{
    "rdma_mr_leak_suspect_regions",
    "Outstanding regions registered longer ago than --collector.mr.leak-age.", MetricType::Gauge};
constexpr MetricDesc kLeakBytes{
    "rdma_mr_leak_suspect_bytes",
    "Bytes of the outstanding regions older than --collector.mr.leak-age.", MetricType::Gauge};
constexpr MetricDesc kNotHugeAligned{"rdma_mr_not_hugepage_aligned_bytes_total",
                                     "Bytes registered with an address or length not aligned to "
                                     "2 MiB huge pages (TLB pressure on the NIC).",
                                     MetricType::Counter};
constexpr MetricDesc kNotPageMultiple{"rdma_mr_length_not_page_multiple_total",
                                      "Registrations whose length is not a multiple of 4 KiB.",
                                      MetricType::Counter};
constexpr MetricDesc kAccessFlag{"rdma_mr_access_flag_seen",
                                 "1 for every IBV_ACCESS_* flag the process has registered "
                                 "memory with.",
                                 MetricType::Gauge};
constexpr MetricDesc kByAlignment{
    "rdma_mr_registrations_by_alignment_total",
    "Registrations by the alignment of both address and length: 2MiB (can be backed by huge "
    "pages), 4KiB (page-aligned only), unaligned (implicit ODP registrations in none).",
    MetricType::Counter};
constexpr MetricDesc kByAccessFlag{"rdma_mr_registrations_by_access_flag_total",
                                   "Registrations with each IBV_ACCESS_* flag (a registration "
                                   "counts once under each of its flags).",
                                   MetricType::Counter};
constexpr MetricDesc kReregistrations{
    "rdma_mr_reregistrations_total",
    "Registrations of an (address, length) range the process had deregistered before "
    "(registration churn; ranges remembered in a bounded LRU).",
    MetricType::Counter};
constexpr MetricDesc kReregisteredBytes{"rdma_mr_reregistered_bytes_total",
                                        "Bytes of the registrations counted by "
                                        "rdma_mr_reregistrations_total.",
                                        MetricType::Counter};
constexpr MetricDesc kDuration{"rdma_mr_registration_duration_seconds",
                               "Time spent in ibv_reg_mr and variants (pinning pages), by "
                               "command.",
                               MetricType::Histogram};
constexpr MetricDesc kSize{"rdma_mr_registration_size_bytes",
                           "Lengths of registered memory regions, by command.",
                           MetricType::Histogram};

struct AccessFlag {
  uint64_t bit;
  std::string_view name;
};
constexpr std::array<AccessFlag, 9> kAccessFlags{{
    {IBV_ACCESS_LOCAL_WRITE, "LOCAL_WRITE"},
    {IBV_ACCESS_REMOTE_WRITE, "REMOTE_WRITE"},
    {IBV_ACCESS_REMOTE_READ, "REMOTE_READ"},
    {IBV_ACCESS_REMOTE_ATOMIC, "REMOTE_ATOMIC"},
    {IBV_ACCESS_MW_BIND, "MW_BIND"},
    {IBV_ACCESS_ZERO_BASED, "ZERO_BASED"},
    {IBV_ACCESS_ON_DEMAND, "ON_DEMAND"},
    {IBV_ACCESS_HUGETLB, "HUGETLB"},
    {IBV_ACCESS_RELAXED_ORDERING, "RELAXED_ORDERING"},
}};

// Exported bucket range of the probe's log2 buckets: bucket b counts (2^(b-1), 2^b].
constexpr size_t kFirstLatencyBucket = 10;  // le 1.024 us
constexpr size_t kLastLatencyBucket = 31;   // le 2.1 s
constexpr size_t kFirstSizeBucket = 12;     // le 4 KiB
constexpr size_t kLastSizeBucket = 40;      // le 1 TiB

// `per_unit`: raw units per exported unit (1e9 ns per second). Dividing, not multiplying by
// 1e-9, gives the double nearest the decimal bound, so le="8.192e-06" prints cleanly.
std::vector<MetricSet::Bucket> Cumulative(const std::vector<uint64_t>& counts, size_t first,
                                          size_t last, double per_unit, uint64_t* total) {
  std::vector<MetricSet::Bucket> buckets;
  uint64_t running = 0;
  for (size_t b = 0; b < counts.size(); ++b) {
    running += counts[b];
    if (b >= first && b <= last) {
      buckets.push_back({std::ldexp(1.0, static_cast<int>(b)) / per_unit, running});
    }
  }
  *total = running;
  return buckets;
}

constexpr MetricDesc kPinned{"rdma_process_pinned_bytes",
                             "VmPin of a process holding /dev/infiniband/uverbs* open: memory "
                             "pinned by its registrations (works without eBPF).",
                             MetricType::Gauge};

constexpr MetricDesc kLockedLimit{
    "rdma_process_locked_memory_limit_bytes",
    "The process's RLIMIT_MEMLOCK (soft): registrations fail once its pinned memory reaches it "
    "(absent when unlimited).",
    MetricType::Gauge};
constexpr MetricDesc kPinLimitExempt{
    "rdma_process_pin_limit_exempt",
    "1 when the process holds CAP_IPC_LOCK in the initial user namespace: ib_umem_get lets it pin "
    "beyond RLIMIT_MEMLOCK, so rdma_process_locked_memory_limit_bytes does not bind it (absent "
    "when that cannot be read).",
    MetricType::Gauge};
constexpr MetricDesc kRemoteNuma{
    "rdma_process_remote_numa_thread_ratio",
    "Share of the process's threads that last ran on another NUMA node than the RDMA device it "
    "has open (absent for devices without a NUMA node).",
    MetricType::Gauge};
constexpr MetricDesc kHostMemory{"rdma_host_memory_bytes",
                                 "MemTotal of the host: what pinned memory can grow to at most.",
                                 MetricType::Gauge};

}  // namespace

std::string AccessFlagName(int bit) {
  for (const AccessFlag& flag : kAccessFlags) {
    if (flag.bit == (uint64_t{1} << bit)) return std::string(flag.name);
  }
  return "BIT_" + std::to_string(bit);
}

void MapPinned(const std::vector<PinnedProcess>& processes, MetricSet& out, bool by_comm) {
  if (by_comm) {
    std::map<std::string, uint64_t> sums;
    for (const PinnedProcess& proc : processes) sums[proc.comm] += proc.pinned_bytes;
    for (const auto& [comm, bytes] : sums) {
      out.Add(kPinned, {{"comm", comm}}, static_cast<double>(bytes));
    }
    return;
  }
  for (const PinnedProcess& proc : processes) {
    const std::string pid = std::to_string(proc.pid);
    out.Add(kPinned, {{"pid", pid}, {"comm", proc.comm}}, static_cast<double>(proc.pinned_bytes));
    for (const auto& [device, ratio] : proc.remote_numa_thread_ratio) {
      out.Add(kRemoteNuma, {{"pid", pid}, {"comm", proc.comm}, {"device", device}}, ratio);
    }
    if (proc.locked_limit_bytes) {
      out.Add(kLockedLimit, {{"pid", pid}, {"comm", proc.comm}},
              static_cast<double>(*proc.locked_limit_bytes));
    }
    if (proc.pin_limit_exempt) {
      out.Add(kPinLimitExempt, {{"pid", pid}, {"comm", proc.comm}}, *proc.pin_limit_exempt ? 1 : 0);
    }
  }
}

void MapHostMemory(std::optional<uint64_t> total_bytes, MetricSet& out) {
  if (total_bytes) out.Add(kHostMemory, {}, static_cast<double>(*total_bytes));
}

std::vector<MrProcess> AggregateByComm(const std::vector<MrProcess>& processes,
                                       const std::map<std::string, MrProcess>& retired) {
  std::map<std::string, MrProcess> by_comm = retired;
  for (const MrProcess& proc : processes) {
    MrProcess& sum = by_comm[proc.comm];
    sum.comm = proc.comm;
    sum.AddAll(proc);
  }
  std::vector<MrProcess> out;
  for (auto& [comm, sum] : by_comm) out.push_back(std::move(sum));
  return out;
}

// The DWARF call sites' memory and counters (bpf/mr_stack_sites.h).
void MapStackFigures(const MrSnapshot& snapshot, MetricSet& out) {
  out.Add(kStackBytes, {}, static_cast<double>(snapshot.stack_bytes));
  out.Add(kStackSites, {}, static_cast<double>(snapshot.stack_sites));
  out.Add(kStacksDropped, {{"reason", "ring_full"}},
          static_cast<double>(snapshot.stacks_dropped_ring));
  out.Add(kStacksDropped, {{"reason", "memory_bound"}},
          static_cast<double>(snapshot.stacks_dropped_memory));
  out.Add(kStacksDropped, {{"reason", "process_gone"}},
          static_cast<double>(snapshot.stacks_dropped_gone));
  out.Add(kStacksDropped, {{"reason", "copy_failed"}},
          static_cast<double>(snapshot.stacks_copy_failed));
  out.Add(kStackSamples, {{"result", "sent"}}, static_cast<double>(snapshot.stack_samples));
  out.Add(kStackSamples, {{"result", "deduplicated"}},
          static_cast<double>(snapshot.stack_samples_deduplicated));
  out.Add(kStackUnwindSeconds, {}, snapshot.stack_unwind_seconds);
  out.Add(kStacksUnwound, {}, static_cast<double>(snapshot.stacks_unwound));
  if (snapshot.unwind_worker) {
    out.Add(kUnwindWorkerStarts, {}, static_cast<double>(snapshot.unwind_worker_starts));
    for (const char* reason : {"deadline", "died", "protocol", "start_failed"}) {
      const auto it = snapshot.unwind_worker_restarts.find(reason);
      out.Add(kUnwindWorkerRestarts, {{"reason", reason}},
              it == snapshot.unwind_worker_restarts.end() ? 0.0 : static_cast<double>(it->second));
    }
    for (const char* layer : {"uid", "namespaces", "empty_root", "capabilities", "no_new_privs",
                              "rlimits", "seccomp"}) {
      const auto it = snapshot.unwind_worker_sandbox.find(layer);
      if (it != snapshot.unwind_worker_sandbox.end()) {
        out.Add(kUnwindWorkerSandbox, {{"layer", layer}}, it->second ? 1.0 : 0.0);
      }
    }
  }
}

void MapMrSnapshot(const MrSnapshot& snapshot, MetricSet& out, bool by_comm) {
  uint64_t lost_regions = 0;
  const std::vector<MrProcess> processes =
      by_comm ? AggregateByComm(snapshot.processes, snapshot.retired_counters) : snapshot.processes;
  for (const MrProcess& proc : processes) {
    const std::string pid = std::to_string(proc.pid);
    std::vector<Label> labels{{"comm", proc.comm}};
    if (!by_comm) labels.insert(labels.begin(), Label{"pid", pid});
    auto with_flag = [&labels](std::string_view flag) {
      std::vector<Label> flagged = labels;
      flagged.emplace_back("flag", flag);
      return flagged;
    };
    out.Add(kRegions, labels, static_cast<double>(proc.outstanding_regions));
    out.Add(kBytes, labels, static_cast<double>(proc.outstanding_bytes));
    out.Add(kImplicitOdp, labels, static_cast<double>(proc.outstanding_implicit_odp));
    out.Add(kRegistrations, labels, static_cast<double>(proc.registrations));
    out.Add(kDeregistrations, labels, static_cast<double>(proc.deregistrations));
    out.Add(kFailures, labels, static_cast<double>(proc.failures));
    out.Add(kLeakRegions, labels, static_cast<double>(proc.leak_suspect_regions));
    out.Add(kLeakBytes, labels, static_cast<double>(proc.leak_suspect_bytes));
    out.Add(kNotHugeAligned, labels, static_cast<double>(proc.not_huge_aligned_bytes));
    out.Add(kNotPageMultiple, labels, static_cast<double>(proc.length_not_page_multiple));
    for (int bit = 0; bit < 64; ++bit) {
      if ((proc.access_seen >> bit) & 1U) out.Add(kAccessFlag, with_flag(AccessFlagName(bit)), 1);
    }
    for (const auto& [alignment, count] : {std::pair{"2MiB", proc.aligned_huge},
                                           {"4KiB", proc.aligned_page},
                                           {"unaligned", proc.unaligned}}) {
      std::vector<Label> aligned = labels;
      aligned.emplace_back("alignment", alignment);
      out.Add(kByAlignment, aligned, static_cast<double>(count));
    }
    // Only the flags used: a bounded set (32 bits), absent rather than 0 for the others.
    for (size_t bit = 0; bit < proc.access_registrations.size(); ++bit) {
      if (proc.access_registrations[bit] == 0) continue;
      out.Add(kByAccessFlag, with_flag(AccessFlagName(static_cast<int>(bit))),
              static_cast<double>(proc.access_registrations[bit]));
    }
    out.Add(kReregistrations, labels, static_cast<double>(proc.reregistrations));
    out.Add(kReregisteredBytes, labels, static_cast<double>(proc.reregistered_bytes));
    lost_regions += proc.lost_regions;
  }
  for (const auto& [comm, histograms] : snapshot.histograms) {
    uint64_t count = 0;
    auto buckets =
        Cumulative(histograms.latency, kFirstLatencyBucket, kLastLatencyBucket, 1e9, &count);
    out.AddHistogram(kDuration, {{"comm", comm}}, buckets,
                     static_cast<double>(histograms.latency_sum_ns) / 1e9, count);
    buckets = Cumulative(histograms.size, kFirstSizeBucket, kLastSizeBucket, 1, &count);
    out.AddHistogram(kSize, {{"comm", comm}}, buckets,
                     static_cast<double>(histograms.size_sum_bytes), count);
  }
  for (const auto& [comm, released] : snapshot.released) {
    out.Add(kReleasedRegions, {{"comm", comm}}, static_cast<double>(released.regions));
    out.Add(kReleasedBytes, {{"comm", comm}}, static_cast<double>(released.bytes));
  }
  for (const auto& [comm, released] : snapshot.released_at_exec) {
    out.Add(kExecReleasedRegions, {{"comm", comm}}, static_cast<double>(released.regions));
    out.Add(kExecReleasedBytes, {{"comm", comm}}, static_cast<double>(released.bytes));
  }
  // A counter: the regions lost by exited processes stay in it (their retired counters; by
  // comm they are already in the sums above), else it fell when such a process exited.
  if (!by_comm) {
    for (const auto& [comm, retired] : snapshot.retired_counters) {
      lost_regions += retired.lost_regions;
    }
  }
  out.Add(kLost, {{"reason", "regions"}}, static_cast<double>(lost_regions));
  if (!snapshot.globals_known) return;  // unread: no series rather than 0s
  out.Add(kLost, {{"reason", "processes"}}, static_cast<double>(snapshot.lost_processes));
  out.Add(kLost, {{"reason", "calls"}}, static_cast<double>(snapshot.lost_calls));
  out.Add(kLost, {{"reason", "exit_events"}}, static_cast<double>(snapshot.lost_exits));
  out.Add(kLost, {{"reason", "unseen_returns"}}, static_cast<double>(snapshot.stale_calls));
  MapStackFigures(snapshot, out);
}

namespace {

// Whose reads find the uverbs holders: under a capture session this process's, through the
// boundary (a broker is another process, reading its own host), and the scan is recorded as
// its answer (collectors/probe_capture.h).
std::shared_ptr<sys::PrivilegedProcfs> PinnedProcfs(const MrProbeOptions& options,
                                                    const std::filesystem::path& procfs) {
  if (capture::Active() == nullptr) return options.privileged;
  return std::make_shared<CapturedProcfs>(std::make_shared<sys::DirectProcfs>(procfs));
}

std::runtime_error CaptureError(const std::string& why) {
  return std::runtime_error("capture's eBPF snapshot refused: " + why);
}

}  // namespace

MrCollector::MrCollector(const MrProbeOptions& options, std::filesystem::path procfs,
                         const std::filesystem::path& sysfs,
                         std::unique_ptr<ResourceSource> restrack)
    : pinned_(std::make_unique<UverbsHolders>(procfs, sysfs,
                                              std::chrono::seconds(options.pinned_rescan_seconds),
                                              PinnedProcfs(options, procfs))),
      procfs_(procfs),
      by_comm_(options.aggregate_by_comm),
      replay_(ReplayingCapture()) {
  if (replay_) {
    // No probe, no restrack seed: the reading recorded each sample is already seeded. The
    // attach result as sample 1 (answering while collectors are built) recorded it, for
    // doctor's probe errors.
    try {
      const MrProbeReading first = ReplayedReading();
      if (!first.attached) attach_error_ = first.error;
    } catch (const std::exception& error) {
      log::Warn("mr: the capture's probe reading is refused", {{"err", error.what()}});
    }
    return;
  }
  if (!restrack) {
    // restrack gives pids in our pid namespace (nldev.c fill_res_name_pid, task_pid_vnr),
    // the probes in the initial one: seeding elsewhere would count a process twice.
    if (InInitialPidNamespace(procfs_) == true) {
      restrack = std::make_unique<NetlinkMrSource>();
    } else {
      log::Info(
          "not in the host's initial pid namespace: memory regions registered before "
          "the exporter started are not counted");
    }
  }
  seed_ = std::make_unique<MrSeedTracker>(
      std::move(restrack), options.leak_age_ns,
      [procfs = procfs_](uint32_t tid) { return sys::ThreadGroupOf(procfs, tid); });
  // Around the attach (mr_restrack.h): what both dumps list was registered before any probe
  // could count it; what only the second lists is checked against the probes.
  seed_->BeforeAttach();
  auto probe = [&options, &procfs] {
    // What attaching reads (libraries' ELF, BTF) is not the host's answer a replay needs.
    const capture::UnrecordedScope unrecorded;
    return MrProbe::Attach(options, std::move(procfs));
  }();
  seed_->AfterAttach(std::chrono::steady_clock::now());
  if (probe) {
    probe_ = std::move(*probe);
  } else {
    attach_error_ = probe.error();
    log::Warn("mr probes not attached; memory-registration metrics are absent",
              {{"err", attach_error_}});
    RecordNotRecorded("mr: eBPF probes", "not attached: " + attach_error_);
  }
}

std::optional<uint64_t> MrCollector::ReadHostMemory() const {
  const auto meminfo = sysfs::ReadFile(procfs_ / "meminfo", 4096);
  return meminfo ? ParseMemTotalBytes(*meminfo) : std::nullopt;
}

MrProbeReading MrCollector::LiveReading() const {
  MrProbeReading reading{.attached = probe_ != nullptr, .error = attach_error_};
  if (probe_) {
    // The probes' own reads (each process's stat for its liveness, comm) are inputs of the
    // reading, which is recorded whole: not kept file by file.
    const capture::UnrecordedScope unrecorded;
    reading.kernel_path = probe_->kernel_path();
    reading.links = probe_->link_count();
    reading.snapshot = probe_->Snapshot();
    const auto comm_of = [this](uint32_t pid) {
      return sysfs::ReadAttribute(procfs_ / std::to_string(pid) / "comm").value_or("");
    };
    try {
      reading.seeded_regions = seed_->Apply(
          std::chrono::steady_clock::now(), comm_of, [this] { return probe_->TrackedKeys(); },
          reading.snapshot);
    } catch (const std::exception& error) {
      // The collection fails (mr_restrack.h): the replay of this sample fails alike.
      if (RecordingCapture()) {
        RecordProbeFile(kMrCaptureFile, MrReadingToJson({.attached = true,
                                                         .failed = error.what(),
                                                         .kernel_path = reading.kernel_path,
                                                         .links = reading.links}));
      }
      throw;
    }
  }
  if (RecordingCapture()) RecordProbeFile(kMrCaptureFile, MrReadingToJson(reading));
  return reading;
}

MrProbeReading MrCollector::ReplayedReading() const {
  const auto text = ReplayProbeFile(kMrCaptureFile);
  if (!text) throw CaptureError(text.error());
  auto reading = MrReadingFromJson(*text);
  if (!reading) throw CaptureError(std::string(kMrCaptureFile) + ": " + reading.error());
  if (!reading->failed.empty()) throw std::runtime_error(reading->failed);
  return std::move(*reading);
}

CollectResult MapMrReading(const MrProbeReading& reading, const std::vector<PinnedProcess>& pinned,
                           std::optional<uint64_t> host_memory, bool by_comm, MetricSet& out) {
  out.Add(kProbeAttached, {{"probe", "mr"}}, reading.attached ? 1 : 0);
  // Which path feeds the rdma_mr_* series: 1 for fentry/fexit in the kernel, 0 for uprobes
  // on libibverbs (or none).
  out.Add(kProbeAttached, {{"probe", "mr_kernel"}},
          reading.attached && reading.kernel_path ? 1 : 0);
  if (!reading.attached) {
    MapPinned(pinned, out, by_comm);
    MapHostMemory(host_memory, out);
    return {.no_data = true, .detail = "eBPF probes not attached: " + reading.error};
  }
  out.Add(kProbeLinks, {{"probe", "mr"}}, static_cast<double>(reading.links));
  MapMrSnapshot(reading.snapshot, out, by_comm);
  MapPinned(pinned, out, by_comm);
  MapHostMemory(host_memory, out);
  std::string detail =
      std::to_string(reading.snapshot.processes.size()) + " processes with registrations";
  if (reading.seeded_regions > 0) {
    detail += ", " + std::to_string(reading.seeded_regions) + " regions from before the start";
  }
  return {.detail = detail};
}

CollectResult MrCollector::Collect(MetricSet& out) const {
  const MrProbeReading reading = replay_ ? ReplayedReading() : LiveReading();
  // The processes that registered are scanned for pinned memory even when they hold no uverbs
  // descriptor the scan saw (yet).
  std::vector<uint32_t> registrants;
  for (const MrProcess& proc : reading.snapshot.processes) registrants.push_back(proc.pid);
  const auto pinned = pinned_->Read(registrants);
  return MapMrReading(reading, pinned, ReadHostMemory(), by_comm_, out);
}

}  // namespace rdmascope

namespace rdmascope {
namespace {

// "pid=123&top=3" -> value of one key.
std::optional<uint64_t> QueryNumber(std::string_view query, std::string_view key) {
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    if (pair.size() > key.size() && pair.starts_with(key) && pair[key.size()] == '=') {
      return sysfs::ParseUnsigned(pair.substr(key.size() + 1));
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return std::nullopt;
}

// Process names (comm), symbols and module paths are arbitrary bytes: invalid UTF-8 becomes
// U+FFFD rather than nlohmann's type_error 316 (which made the endpoint a 500).
std::string DumpJson(const nlohmann::json& body) {
  return body.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace

void MrCollector::AddDebugRoutes(DebugRoutes& routes) {
  // A replay answers /debug/mr/stacks with the recorded exporter's answer, if any (cli).
  if (replay_) return;
  routes["/debug/mr/stacks"] = [this](std::string_view query) { return StacksJson(query); };
}

std::string MrCollector::StacksJson(std::string_view query) const {
  nlohmann::json body;
  if (!probe_) {
    body["error"] = "eBPF probes not attached: " + attach_error_;
    return DumpJson(body);
  }
  const auto top = QueryNumber(query, "top").value_or(5);
  const auto pid = QueryNumber(query, "pid");
  std::optional<uint32_t> only;
  if (pid && *pid <= UINT32_MAX) only = static_cast<uint32_t>(*pid);
  const MrStacksLimits limits = stacks_limits_;
  // Only formatting here (an HTTP thread): the stack thread unwound and symbolized the stacks
  // (bpf/mr_stack_sites.h); the report says why a stack has no symbols when it has none.
  MrStacksReport report = probe_->OutstandingStacks(std::min<uint64_t>(top, 100), only, limits);
  size_t frames_left = kMaxStackFrames;
  nlohmann::json processes = nlohmann::json::array();
  for (const MrProcessStacks& proc : report.processes) {
    nlohmann::json stacks = nlohmann::json::array();
    for (const MrStack& site : proc.stacks) {
      nlohmann::json frames = nlohmann::json::array();
      if (frames_left >= site.frames.size()) {
        frames_left -= site.frames.size();
        // Symbols only (function+offset, module): raw addresses would reveal the
        // application's address-space layout (ASLR) to whoever can reach this endpoint.
        // Functions inlined at an address are frames of their own where the module has debug
        // info, except libibverbs' own static inline wrappers (verbs.h: ibv_reg_mr is the
        // inline __ibv_reg_mr), compiled into every caller: the API, not the caller's code.
        for (const sys::Frame& frame : site.frames) {
          if (frame.inlined &&
              (frame.function.starts_with("__ibv_") || frame.function.starts_with("ibv_"))) {
            continue;
          }
          nlohmann::json entry = {{"function", frame.Describe()}, {"module", frame.module}};
          if (frame.inlined) entry["inlined"] = true;
          frames.push_back(std::move(entry));
        }
      } else if (!report.truncated) {
        report.truncated = true;
        report.truncated_reason = "frames left out: frame budget spent";
      }
      nlohmann::json stack = {
          {"outstanding_regions", site.regions},
          {"outstanding_bytes", site.bytes},
          {"oldest_age_seconds", static_cast<double>(site.oldest_age_ns) / 1e9},
          // How the frames were found: "dwarf" (CFI over the captured stack copy),
          // "frame-pointer" (the unwinder's rbp fallback), "frame_pointer" (the BPF walk);
          // "" without a stack (MrStackOrigin).
          {"unwind", StackOriginName(site.origin)},
          {"frames", frames}};
      if (!site.unwind_stop.empty()) stack["unwind_stop"] = site.unwind_stop;
      // Why frames have no name: the process gone, a file refused (sys/elf_checks.h,
      // untrusted_files.h), the time budget, or not symbolized yet.
      if (!site.symbols_missing.empty()) {
        stack["symbols_missing"] = site.symbols_missing;
      } else if (site.frames.empty() && !site.addresses.empty()) {
        stack["symbols_missing"] = "not symbolized";
      }
      stacks.push_back(std::move(stack));
    }
    // One entry per process image: an exec gives the pid a new image (exec_id), whose
    // stacks are its own modules' (sys/image_key.h).
    nlohmann::json entry = {{"pid", proc.image.tgid},
                            {"exec_id", proc.image.exec_id},
                            {"comm", proc.comm},
                            {"outstanding_regions", proc.outstanding_regions},
                            {"outstanding_bytes", proc.outstanding_bytes},
                            {"stacks", stacks}};
    if (workload_source_) {
      nlohmann::json workload = nlohmann::json::object();
      for (auto& [name, value] : workload_source_(proc.image.tgid))
        workload[name] = std::move(value);
      entry["workload"] = std::move(workload);
    }
    processes.push_back(std::move(entry));
  }
  body["processes"] = processes;
  body["regions_walked"] = report.regions_walked;
  body["truncated"] = report.truncated;
  if (report.truncated) body["truncated_reason"] = report.truncated_reason;
  return DumpJson(body);
}

}  // namespace rdmascope
