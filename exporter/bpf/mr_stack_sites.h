// The user stacks the MR probes capture at registrations (probes/mr.h, "user stacks"), turned
// into call sites: each sample is unwound with DWARF CFI (sys/dwarf_unwinder) and symbolized
// while its process still runs, kept as the program counters and frames of its site, and
// dropped once no outstanding region refers to it. All of it happens on the stack thread
// (MrProbe's poller, Process()): an HTTP request only waits, bounded, for what was queued
// before it, and formats (no ELF or DWARF is parsed on an HTTP thread). The raw copies wait
// (bounded in bytes) only until the stack thread unwinds them, in memory left out of core
// dumps and zeroed before it is freed; the per-image code ranges the probes hash return
// addresses with are written here after an image's first sample.
#pragma once

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sys/dwarf_unwinder.h"
#include "sys/image_key.h"
#include "sys/unwind_client.h"

namespace rdmascope {

// Executable mappings of /proc/PID/maps text, sorted and merged (adjacent or overlapping
// ones, then the closest pairs) down to at most `max_ranges`: a superset of the code.
// O(n log n) in the number of mappings (a sort, then the gaps joined smallest first).
std::vector<std::pair<uint64_t, uint64_t>> ExecutableRanges(std::string_view maps,
                                                            size_t max_ranges);

struct MrStackSitesOptions {
  uint64_t max_bytes = 64ULL << 20;              // raw copies waiting plus unwound sites
  std::chrono::milliseconds unwind_budget{100};  // per Process() call
  // Per stack: the first stack of a process reads its modules' ELF files and CFI (about
  // 0.3 ms here, 10-30 ms under QEMU's TCG); later ones take microseconds.
  sys::UnwindLimits limits{.max_frames = 127, .budget = std::chrono::milliseconds(50)};
  // Per stack's symbols: the first lookups in a module read its symbol table (and DWARF, for
  // inline frames); frames left when it is spent have no name, and the stack says so.
  std::chrono::milliseconds symbolize_budget{250};
  // A stack cut short by its budget is tried again (the files are cached by then).
  uint32_t retries = 2;
  // Parse in a sandboxed worker (sys/unwind_client.h) rather than in this process; only on
  // the real /proc (a fixture tree is unwound in the process).
  bool sandboxed_worker = false;
  sys::UnwindClientOptions worker;
  // Where maps and other users' files are read (serve: the capability broker); null: here.
  std::shared_ptr<sys::PrivilegedProcfs> privileged;
  // Whether an image still runs (the probes' process map: an exec marks it ended); unset:
  // the start time alone is checked (a fixture tree). Sessions are only made while it does.
  sys::ImageCurrent image_current;
};

// A stack's frames as the stack thread symbolized them (sys::Frame: names and offsets only).
struct MrSymbols {
  std::vector<sys::Frame> frames;
  std::string missing;  // why some or all frames have no name ("" when every one was tried)
};

// One image's site: what OutstandingStacks() shows for its regions.
struct MrUnwoundSite {
  std::vector<uint64_t> pcs;  // innermost first
  sys::UnwindMethod method = sys::UnwindMethod::kNone;
  bool truncated = false;
  std::string stop_reason;
  MrSymbols symbols;  // of pcs, the first an exact instruction address
};

// A stack's bytes copied from the ring buffer: anonymous pages marked MADV_DONTDUMP (a core
// dump of the exporter carries no tenant's stack) and zeroed with explicit_bzero before they
// are unmapped (no copy of them is left for the next allocation to read).
class StackBytes {
 public:
  StackBytes() = default;
  StackBytes(const uint8_t* bytes, size_t size);
  ~StackBytes();
  StackBytes(StackBytes&& other) noexcept;
  StackBytes& operator=(StackBytes&& other) noexcept;
  StackBytes(const StackBytes&) = delete;
  StackBytes& operator=(const StackBytes&) = delete;

  std::span<const uint8_t> span() const { return {data_, size_}; }
  size_t size() const { return size_; }

 private:
  void Free();
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;
};

struct MrStackSitesStats {
  uint64_t pending_bytes = 0;  // raw copies not unwound yet
  uint64_t unwound_bytes = 0;  // program counters kept
  uint64_t sites = 0;
  uint64_t dropped_memory = 0;    // samples dropped at max_bytes, since start
  uint64_t dropped_gone = 0;      // samples whose process had exited before they were unwound
  uint64_t unwound = 0;           // samples unwound, since start
  uint64_t unwind_ns = 0;         // wall time spent unwinding, since start
  bool sandboxed = false;         // stacks are unwound by the sandboxed worker
  sys::UnwindClientStats worker;  // its figures
};

class MrStackSites {
 public:
  // A site of one image (mr_site_key).
  using SiteKey = std::pair<sys::ImageKey, uint64_t>;

  // The fds of the probes' code_ranges and sites_seen maps (-1 in tests: nothing written).
  MrStackSites(MrStackSitesOptions options, std::filesystem::path procfs, int code_ranges_fd,
               int sites_seen_fd);
  ~MrStackSites();

  // A sample from the ring buffer (struct mr_stack_sample, `size` bytes). Copies it, or
  // drops it at the memory bound. Called from ring_buffer__consume().
  void Add(const void* data, size_t size);
  // The stack thread's work: unwinds and symbolizes waiting samples, and symbolizes the
  // frame-pointer stacks asked for (RequestSymbols), within the unwind budget.
  void Process();
  // An HTTP request's wait for the stack thread: until everything queued before the call is
  // processed, or `deadline`. False at the deadline. Wakes the stack thread (wake_fd()).
  bool WaitProcessed(std::chrono::steady_clock::time_point deadline);
  // Work is queued (a round of Process() stopped at its budget): the stack thread goes on at
  // once rather than waiting for the next sample.
  bool HasWork() const;
  // Readable when the stack thread has work a request waits for (an eventfd; drained by
  // Process()).
  int wake_fd() const { return wake_fd_; }
  // The site of a region, if it was unwound (a copy: sites may be dropped meanwhile).
  std::optional<MrUnwoundSite> Find(const sys::ImageKey& image, uint64_t site) const;
  // The frames of a frame-pointer stack of the probes' stacks map (`stack_id`), as the stack
  // thread symbolized them; nullopt, and the stack queued for the stack thread, when not yet.
  std::optional<MrSymbols> FramePointerSymbols(const sys::ImageKey& image, int32_t stack_id,
                                               const std::vector<uint64_t>& addresses);
  // Drops sites no region refers to at this call and at the previous one (a registration
  // takes its site key before its region is written), and images that are gone.
  void Collect(const std::set<SiteKey>& referenced);
  // Images that ended (exit, exec): their sites, waiting samples and code ranges go.
  void DropImages(const std::vector<sys::ImageKey>& images);
  MrStackSitesStats stats() const;

 private:
  struct Pending {
    sys::ImageKey image;
    uint64_t site;
    std::array<uint64_t, sys::kDwarfRegisters> regs;
    StackBytes stack;
    uint32_t tries = 0;
  };
  struct SymbolRequest {
    sys::ImageKey image;
    int32_t stack_id;
    std::vector<uint64_t> addresses;
  };
  MrSymbols SymbolizeFrames(const sys::ImageKey& image, const std::vector<uint64_t>& pcs,
                            sys::FirstAddress first,
                            std::chrono::steady_clock::time_point deadline);
  void ProcessSymbolRequests(std::chrono::steady_clock::time_point deadline);
  // Under mutex_: nothing queued or being worked on.
  bool Idle() const { return pending_.empty() && symbol_requests_.empty() && in_flight_ == 0; }
  void InstallRanges(const sys::ImageKey& image, bool refresh);
  void RetainLiveSessions();  // under mutex_
  void Forget(const SiteKey& key);

  MrStackSitesOptions options_;
  std::filesystem::path procfs_;
  int code_ranges_fd_;
  int sites_seen_fd_;
  std::unique_ptr<sys::StackUnwinder> unwinder_;
  sys::UnwindClient* worker_ = nullptr;  // unwinder_, when it is the sandboxed worker
  std::mutex process_mutex_;             // one Process() at a time
  mutable std::mutex mutex_;             // everything below
  std::deque<Pending> pending_;
  std::map<SiteKey, MrUnwoundSite> sites_;
  std::map<sys::ImageKey, std::pair<uint32_t, std::vector<std::pair<uint64_t, uint64_t>>>> ranges_;
  std::set<SiteKey> candidates_;  // unreferenced at the last Collect()
  std::deque<SymbolRequest> symbol_requests_;
  std::map<std::pair<sys::ImageKey, int32_t>, MrSymbols> frame_pointer_symbols_;
  static constexpr size_t kMaxFramePointerSymbols = 4096;
  size_t in_flight_ = 0;               // samples and requests taken from the queues
  std::condition_variable processed_;  // with mutex_: Idle() became true
  int wake_fd_ = -1;
  MrStackSitesStats stats_;
};

}  // namespace rdmascope
