// The user stacks the MR probes capture at registrations (probes/mr.h, "user stacks"), turned
// into call sites: each sample is unwound with DWARF CFI (sys/dwarf_unwinder) while its process
// still runs, kept as the program counters of its site, and dropped once no outstanding region
// refers to it. The raw copies wait (bounded in bytes) only until the next collection or
// /debug/mr/stacks request unwinds them; the per-image code ranges the probes hash return
// addresses with are written here after an image's first sample.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "sys/dwarf_unwinder.h"

namespace rdmascope {

// Executable mappings of /proc/PID/maps text, sorted and merged (adjacent or overlapping
// ones, then the closest pairs) down to at most `max_ranges`: a superset of the code.
std::vector<std::pair<uint64_t, uint64_t>> ExecutableRanges(std::string_view maps,
                                                            size_t max_ranges);

struct MrStackSitesOptions {
  uint64_t max_bytes = 64ULL << 20;              // raw copies waiting plus unwound sites
  std::chrono::milliseconds unwind_budget{100};  // per Process() call
  // Per stack: the first stack of a process reads its modules' ELF files and CFI (about
  // 0.3 ms here, 10-30 ms under QEMU's TCG); later ones take microseconds.
  sys::UnwindLimits limits{.max_frames = 127, .budget = std::chrono::milliseconds(50)};
  // A stack cut short by its budget is tried again (the files are cached by then).
  uint32_t retries = 2;
};

// One image's site: what OutstandingStacks() shows for its regions.
struct MrUnwoundSite {
  std::vector<uint64_t> pcs;  // innermost first
  sys::UnwindMethod method = sys::UnwindMethod::kNone;
  bool truncated = false;
  std::string stop_reason;
};

struct MrStackSitesStats {
  uint64_t pending_bytes = 0;  // raw copies not unwound yet
  uint64_t unwound_bytes = 0;  // program counters kept
  uint64_t sites = 0;
  uint64_t dropped_memory = 0;  // samples dropped at max_bytes, since start
  uint64_t dropped_gone = 0;    // samples whose process had exited before they were unwound
  uint64_t unwound = 0;         // samples unwound, since start
  uint64_t unwind_ns = 0;       // wall time spent unwinding, since start
};

class MrStackSites {
 public:
  // Image of a process: tgid, exec generation, leader start (mr_proc_key).
  using Image = std::tuple<uint32_t, uint32_t, uint64_t>;
  using SiteKey = std::pair<Image, uint64_t>;

  // The fds of the probes' code_ranges and sites_seen maps (-1 in tests: nothing written).
  MrStackSites(MrStackSitesOptions options, std::filesystem::path procfs, int code_ranges_fd,
               int sites_seen_fd);
  ~MrStackSites();

  // A sample from the ring buffer (struct mr_stack_sample, `size` bytes). Copies it, or
  // drops it at the memory bound. Called from ring_buffer__consume().
  void Add(const void* data, size_t size);
  // Unwinds waiting samples, within the unwind budget. kNo returns at once when another
  // caller is at it; kYes waits for that caller (a round is bounded by the budget too), so
  // that the samples added before the call are unwound when it returns.
  enum class Wait { kNo, kYes };
  void Process(Wait wait = Wait::kNo);
  // The site of a region, if it was unwound (a copy: sites may be dropped meanwhile).
  std::optional<MrUnwoundSite> Find(const Image& image, uint64_t site) const;
  // Drops sites no region refers to at this call and at the previous one (a registration
  // takes its site key before its region is written), and images that are gone.
  void Collect(const std::set<SiteKey>& referenced);
  // Images that ended (exit, exec): their sites, waiting samples and code ranges go.
  void DropImages(const std::vector<Image>& images);
  MrStackSitesStats stats() const;

 private:
  struct Pending {
    Image image;
    uint64_t site;
    std::array<uint64_t, sys::kDwarfRegisters> regs;
    std::vector<uint8_t> stack;
    uint32_t tries = 0;
  };
  void InstallRanges(const Image& image, bool refresh);
  void RetainLiveSessions();  // under mutex_
  void Forget(const SiteKey& key);

  MrStackSitesOptions options_;
  std::filesystem::path procfs_;
  int code_ranges_fd_;
  int sites_seen_fd_;
  std::unique_ptr<sys::DwarfUnwinder> unwinder_;
  std::mutex process_mutex_;  // one Process() at a time
  mutable std::mutex mutex_;  // everything below
  std::deque<Pending> pending_;
  std::map<SiteKey, MrUnwoundSite> sites_;
  std::map<Image, std::pair<uint32_t, std::vector<std::pair<uint64_t, uint64_t>>>> ranges_;
  std::set<SiteKey> candidates_;  // unreferenced at the last Collect()
  MrStackSitesStats stats_;
};

}  // namespace rdmascope
