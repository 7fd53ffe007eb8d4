// User-space side of probes/mr.bpf.c: loads the CO-RE object, sizes its maps, attaches
// entry and return uprobes to every registration entry point of each library, and turns its
// maps into a snapshot at scrape time (dropping processes that exited).
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
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <unordered_set>
#include <vector>

#include "bpf/mr_kernel_probe.h"
#include "bpf/mr_stack_sites.h"
#include "bpf/stack_gc.h"
#include "sys/image_key.h"

struct mr_bpf;
struct ring_buffer;
struct bpf_link;
struct mr_region_key;
struct mr_region;

namespace rdmascope {

struct MrProbeOptions {
  std::vector<std::string> libraries;  // libibverbs.so.1 files (default: the one we link)
  std::vector<std::string> binaries;   // statically linked programs
  uint32_t max_regions = 262144;
  // Which path feeds the MR metrics: fentry/fexit in the kernel (mr_kernel_probe.h) when it
  // can attach, else uprobes on the libraries and binaries above.
  MrTracking tracking = MrTracking::kAuto;
  uint32_t max_processes = 4096;  // ~1.1 KiB of kernel memory each
  // Outstanding regions older than this are leak suspects; 0 disables the (O(regions)) scan.
  uint64_t leak_age_ns = 600ULL * 1000000000ULL;
  // How often every process's fd table is scanned for /dev/infiniband/uverbs* holders.
  uint32_t pinned_rescan_seconds = 30;
  // Per-process series keyed by comm only (pid dropped): bounds cardinality on hosts with
  // many short-lived RDMA processes.
  bool aggregate_by_comm = false;
  // User stack bytes copied at each registration for DWARF unwinding (0: frame pointers
  // only), at most MR_STACK_COPY_MAX (probes/mr.h).
  uint32_t stack_bytes = 16384;
  // Memory for stack copies waiting to be unwound and unwound call sites.
  uint64_t stack_memory_bytes = 16ULL << 20;
  // The ring buffer carrying the copies to user space (a power of two).
  uint32_t stack_ring_bytes = 4U << 20;
  // ELF, CFI and DWARF parsed in a sandboxed worker process (sys/unwind_client.h).
  bool unwind_sandbox = true;
  // Where other users' maps and files are read (serve: the capability broker,
  // sys/capability_broker.h); null: this process reads /proc.
  std::shared_ptr<sys::PrivilegedProcfs> privileged;
};

struct MrProcess {
  uint32_t pid = 0;
  std::string comm;
  uint64_t registrations = 0;
  uint64_t deregistrations = 0;
  uint64_t failures = 0;
  uint64_t lost_regions = 0;
  int64_t outstanding_regions = 0;
  int64_t outstanding_bytes = 0;
  int64_t outstanding_implicit_odp = 0;   // of outstanding_regions; not in outstanding_bytes
  uint64_t access_seen = 0;               // OR of IBV_ACCESS_* flags
  uint64_t not_huge_aligned_bytes = 0;    // address or length not 2 MiB-aligned
  uint64_t length_not_page_multiple = 0;  // registrations, length % 4096 != 0
  // Registrations by the alignment of address and length (probes/mr.h): both multiples of
  // 2 MiB; of 4 KiB only; neither. Implicit ODP registrations are in none.
  uint64_t aligned_huge = 0;
  uint64_t aligned_page = 0;
  uint64_t unaligned = 0;
  // Churn: registrations of a range (address, length) the process deregistered before.
  uint64_t reregistrations = 0;
  uint64_t reregistered_bytes = 0;
  // Registrations per IBV_ACCESS_* bit (index = bit number).
  std::array<uint64_t, 32> access_registrations{};
  uint64_t leak_suspect_regions = 0;  // outstanding for longer than the leak age
  uint64_t leak_suspect_bytes = 0;

  // Adds the monotonic fields (registrations, failures...) of `other`.
  void AddCounters(const MrProcess& other);
  // Adds every field: counters, gauges, and the union of access flags.
  void AddAll(const MrProcess& other);
};

// log2 histograms as the probe fills them (bucket b: (2^(b-1), 2^b]).
struct MrHistograms {
  std::vector<uint64_t> latency;  // ns
  std::vector<uint64_t> size;     // bytes
  uint64_t latency_sum_ns = 0;
  uint64_t size_sum_bytes = 0;
  void Add(const MrHistograms& other);
};

struct MrReleasedAtExit {
  uint64_t regions = 0;
  uint64_t bytes = 0;
};

// How a stack's addresses were found. Its name on /debug/mr/stacks ("unwind") is
// StackOriginName's, the strings that page has always shown.
enum class MrStackOrigin {
  kNone,                // "": no stack
  kUnwoundIpOnly,       // "none": the unwinder got no further than the instruction pointer
  kUnwoundDwarf,        // "dwarf": CFI over the captured copy
  kUnwoundRbp,          // "frame-pointer": the unwinder's rbp fallback over the copy
  kProbeFramePointers,  // "frame_pointer": the probes' own walk (bpf_get_stack)
};
const char* StackOriginName(MrStackOrigin origin);
MrStackOrigin OriginOf(sys::UnwindMethod method);

struct MrStack {
  int32_t stack_id = -1;
  uint64_t site = 0;  // the DWARF-unwound site (mr_region.site), 0 for a frame-pointer stack
  MrStackOrigin origin = MrStackOrigin::kNone;
  std::string unwind_stop;  // why a walk stopped early
  uint64_t regions = 0;
  uint64_t bytes = 0;
  uint64_t oldest_age_ns = 0;
  std::vector<uint64_t> addresses;  // innermost first; empty if the stack was not captured
  // The frames of `addresses` as the stack thread symbolized them (MrStackSites), and why
  // there are none or some have no name ("" otherwise).
  std::vector<sys::Frame> frames;
  std::string symbols_missing;
};

struct MrProcessStacks {
  sys::ImageKey image;  // its stacks are unwound and symbolized with this image's modules
  std::string comm;
  uint64_t outstanding_regions = 0;
  uint64_t outstanding_bytes = 0;
  std::vector<MrStack> stacks;  // by outstanding bytes, largest first
};

struct MrSnapshot {
  std::vector<MrProcess> processes;                  // by pid
  std::map<std::string, MrReleasedAtExit> released;  // by comm, since start
  // Regions the kernel released when their process exec'd (the uverbs fd is O_CLOEXEC), by
  // the old image's comm, since start.
  std::map<std::string, MrReleasedAtExit> released_at_exec;
  std::map<std::string, MrHistograms> histograms;  // by comm: live + exited processes
  // Counter fields (registrations, failures...) of exited processes, by comm, so that
  // per-comm aggregates stay monotonic.
  std::map<std::string, MrProcess> retired_counters;
  uint64_t lost_calls = 0;
  uint64_t lost_processes = 0;
  uint64_t lost_exits = 0;
  uint64_t stale_calls = 0;  // call records whose return was never seen
  // User stacks for DWARF unwinding (mr_stack_sites.h).
  uint64_t stack_bytes = 0;                 // copies waiting plus unwound sites
  uint64_t stack_sites = 0;                 // unwound sites kept
  uint64_t stacks_dropped_ring = 0;         // the ring buffer was full (BPF side)
  uint64_t stacks_dropped_memory = 0;       // the memory bound was reached
  uint64_t stacks_dropped_gone = 0;         // the process exited before its stack was unwound
  uint64_t stacks_copy_failed = 0;          // the user stack could not be read
  uint64_t stack_samples = 0;               // stacks sent by the probes
  uint64_t stack_samples_deduplicated = 0;  // registrations of a site sent before
  uint64_t stacks_unwound = 0;
  double stack_unwind_seconds = 0;
  // The sandboxed unwinder worker, when stacks are unwound by one.
  bool unwind_worker = false;
  std::map<std::string, uint64_t> unwind_worker_restarts;  // by reason
  std::map<std::string, bool> unwind_worker_sandbox;       // by layer: entered
  uint64_t unwind_worker_starts = 0;
  // false: the probes' globals map could not be read; the four counters above are unknown
  // (their series are left out, never served as 0).
  bool globals_known = true;
};

// The regions the probes track, by the keys a restrack dump lists them by
// (collectors/mr_restrack.h: telling a region seeded from restrack from one they counted).
struct MrTrackedKeys {
  bool kernel_path = false;
  std::set<std::pair<uint32_t, uint32_t>> restrack_ids;  // (device index, MRN): kernel path
  std::set<std::pair<uint32_t, uint32_t>> lkeys;         // (tgid, lkey): both paths
};

// Bounds of one /debug/mr/stacks walk: it must stay cheap whatever the host holds.
struct MrStacksLimits {
  uint64_t max_regions = 65536;  // regions read from the map
  std::chrono::milliseconds budget{250};
  // For the stack thread to unwind and symbolize what was queued before the request: a new
  // process's first stacks read its files (milliseconds each on a loaded host).
  std::chrono::milliseconds stack_thread_wait{1000};
};

struct MrStacksReport {
  std::vector<MrProcessStacks> processes;  // by outstanding bytes, largest first
  bool truncated = false;                  // the walk stopped at a limit: partial figures
  std::string truncated_reason;
  uint64_t regions_walked = 0;
};

class MrProbe {
 public:
  static std::expected<std::unique_ptr<MrProbe>, std::string> Attach(const MrProbeOptions& options,
                                                                     std::filesystem::path procfs);
  ~MrProbe();
  MrProbe(const MrProbe&) = delete;
  MrProbe& operator=(const MrProbe&) = delete;

  size_t link_count() const { return links_.size() + (kernel_ ? kernel_->link_count() : 0); }
  // True when the kernel path (fentry/fexit on uverbs/ib_core) feeds the maps, not uprobes.
  bool kernel_path() const { return kernel_ != nullptr; }
  MrSnapshot Snapshot();
  // One walk of the regions map; nullopt if it could not be read to its end.
  std::optional<MrTrackedKeys> TrackedKeys();
  // Call sites of outstanding regions, per live process (all, or one pid), top `top` by bytes.
  // Reads the maps without the scrape lock (scrapes never wait for it), within `limits`.
  MrStacksReport OutstandingStacks(size_t top, std::optional<uint32_t> pid,
                                   const MrStacksLimits& limits = {});
  // Called by Snapshot() for each process whose exit it is about to process, before that
  // process and its regions are dropped: the last moment its figures and the call sites of
  // its outstanding regions can be read (`rdmascope profile` reports the regions left at
  // exit). Runs under the scrape lock; OutstandingStacks() may be called from it.
  void SetExitObserver(std::function<void(const MrProcess& last)> observer) {
    exit_observer_ = std::move(observer);
  }

 private:
  MrProbe() = default;
  // Removes exited processes and images replaced by an exec, and their regions, in one pass
  // over the regions map (only if one of them still had regions: the pass costs two syscalls
  // per tracked region).
  // Counts, per process, outstanding regions older than the leak age (batched map reads).
  // Calls `visit(key, region)` for every region, reading the map in batches, until it
  // returns false. False if the map could not be read to its end (a visitor that stopped
  // early is not a failure): then regions were missed.
  bool ForEachRegion(const std::function<bool(const mr_region_key&, const mr_region&)>& visit);
  // Symbols for the frame-pointer stacks of `report` (OutstandingStacks).
  void AddFramePointerSymbols(MrStacksReport& report,
                              std::chrono::steady_clock::time_point deadline);
  void CountLeakSuspects(std::vector<MrProcess>& processes,
                         const std::map<sys::ImageKey, size_t>& index);
  struct Exited {
    sys::ImageKey image;
    std::string comm;      // from the exit event; empty when found by the /proc safety net
    bool at_exec = false;  // the image was replaced by an exec, the process lives on
  };
  void DropProcesses(const std::vector<Exited>& exited);
  // Deletes the stacks-map entries no region refers to any more (stack_gc.h; defined in
  // stack_gc.cc): at most every few seconds, when processes ended or now and then.
  void CollectUnusedStacks(bool ended);
  // Stack ids of regions in calls in progress (both paths). False if a map is unreadable.
  bool AddInFlightStackIds(std::unordered_set<uint32_t>& ids);
  static int OnExit(void* context, void* data, size_t size);
  static int OnStackSample(void* context, void* data, size_t size);

  // Tries the kernel path as options.tracking asks (defined in mr_kernel_probe.cc): an error
  // only when it was required; kernel_ stays null when uprobes must be attached instead.
  std::expected<void, std::string> AttachKernelPath(const MrProbeOptions& options);

  mr_bpf* skel_ = nullptr;
  std::unique_ptr<MrKernelProbe> kernel_;
  ring_buffer* exits_ = nullptr;
  ring_buffer* stack_ring_ = nullptr;
  // libbpf's ring is not thread-safe: the poller and /debug/mr/stacks consume it under this.
  std::mutex stack_ring_mutex_;
  void ConsumeStackSamples();
  std::unique_ptr<MrStackSites> sites_;
  std::vector<bpf_link*> links_;
  std::filesystem::path procfs_;
  uint64_t ns_per_tick_ = 10000000;
  uint64_t leak_age_ns_ = 0;
  std::mutex mutex_;  // scrapes may run concurrently; map cleanup must not
  // Takes the stack samples in as they come, from the first collection on.
  std::thread stack_poller_;
  std::once_flag poller_started_;
  std::atomic<bool> stop_poller_{false};
  // Starts the stack thread once (the first collection or /debug/mr/stacks request, both after
  // serve dropped its capabilities).
  void StartStackPoller();
  std::map<std::string, MrReleasedAtExit> released_;
  std::map<std::string, MrReleasedAtExit> released_at_exec_;
  std::vector<Exited> pending_exits_;                       // filled by OnExit
  std::map<std::string, MrHistograms> retired_histograms_;  // of exited processes
  std::map<std::string, MrProcess> retired_counters_;       // of exited processes
  std::function<void(const MrProcess&)> exit_observer_;
  StackGc stack_gc_;
  static constexpr size_t kMaxReleasedComms = 1024;
};

}  // namespace rdmascope
