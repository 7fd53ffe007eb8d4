// Unwinds a user stack captured at an event, as `perf record --call-graph dwarf` does: the
// event hands over the user registers and a bounded copy of the stack (from SP upwards), and
// the unwinder follows the DWARF call frame information (.eh_frame, .debug_frame) of the
// process's modules with elfutils' libdwfl. Frame pointers are not needed, which is why: most
// programs and libraries are built without them, and the BPF frame-pointer walk stops (or
// wanders) at the first function that uses rbp as a general register.
//
// The stack is read only from the copy, never from the process: the process has moved on
// since the event (or exited), and its stack no longer holds those frames.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sys/debug_files.h"
#include "sys/elf_cache.h"
#include "sys/image_key.h"
#include "sys/process_access.h"
#include "sys/symbolizer.h"

namespace rdmascope::sys {

// x86-64 user registers in DWARF numbering (the psABI's): 0 rax, 1 rdx, 2 rcx, 3 rbx, 4 rsi,
// 5 rdi, 6 rbp, 7 rsp, 8..15 r8..r15, 16 the return address column (rip).
inline constexpr size_t kDwarfRegisters = 17;
inline constexpr size_t kDwarfRbp = 6;
inline constexpr size_t kDwarfRsp = 7;
inline constexpr size_t kDwarfRip = 16;

struct CapturedStack {
  ImageKey image;  // the process image the stack was captured in: unwound with its modules only
  std::array<uint64_t, kDwarfRegisters> regs{};
  std::span<const uint8_t> stack;  // bytes copied from regs[kDwarfRsp] upwards
};

struct UnwindLimits {
  size_t max_frames = 127;  // the instruction pointer included
  std::chrono::microseconds budget{2000};
};

enum class UnwindMethod {
  kNone,          // nothing past the instruction pointer
  kDwarf,         // CFI unwound at least one frame past the first
  kFramePointer,  // the rbp chain (no CFI for the code, or it got further than CFI)
};

// What ended a walk, for the code that acts on it: a stack cut short by its time budget is
// tried again, one whose image is gone is dropped. UnwoundStack::stop_reason says it to people:
// for the outcomes past kStopped it is OutcomeReason(outcome), the names /debug/mr/stacks has
// always shown.
enum class UnwindOutcome : uint8_t {
  kStopped,     // at the outermost frame, or where stop_reason says (the copy's end, no CFI...)
  kFrameLimit,  // "frame limit"
  kTimeBudget,  // "time budget"
  // "process gone": the image's process exited, its pid runs another process, or it exec'd
  // (ImageKey): there are no modules of that image left to unwind against.
  kImageGone,
};
inline constexpr UnwindOutcome kLastUnwindOutcome = UnwindOutcome::kImageGone;
// The stable text of an outcome ("" for kStopped).
const char* OutcomeReason(UnwindOutcome outcome);

struct UnwoundStack {
  // Innermost first: [0] is regs[kDwarfRip] (an exact instruction address), then return
  // addresses (which point after their call instruction).
  std::vector<uint64_t> pcs;
  UnwindMethod method = UnwindMethod::kNone;
  // Stopped by a limit (frames, time) or by the end of the copy: the stack goes on.
  bool truncated = false;
  // Why the walk stopped, "" at the outermost frame. Module names and module offsets only,
  // never an absolute address (they reveal the process's layout): "stack copy ends", "frame
  // limit", "time budget", "process gone", "no CFI for libfoo.so+0x1a2b", ...
  std::string stop_reason;
  UnwindOutcome outcome = UnwindOutcome::kStopped;
};

const char* MethodName(UnwindMethod method);

// What the MR stack sites need of an unwinder: DwarfUnwinder in the process, or UnwindClient,
// which runs one in a sandboxed worker (sys/unwind_client.h).
class StackUnwinder {
 public:
  virtual ~StackUnwinder() = default;
  virtual UnwoundStack Unwind(const CapturedStack& captured, const UnwindLimits& limits) = 0;
  virtual std::vector<Frame> Symbolize(const ImageKey& image, std::span<const uint64_t> addresses,
                                       const SymbolizeOptions& options, std::string* missing) = 0;
  // Drops the sessions of images not in `live`.
  virtual void Retain(const std::vector<ImageKey>& live) = 0;
};

// Thread-safe. Caches one libdwfl session per process image (ImageKey: its modules, their ELF
// files and CFI) until the process exits (its pidfd, or its start time in PID/stat) or Retain()
// drops it: a warm unwind reads no file. A session is made only while its image runs (the maps
// are read through ProcessAccess::Maps(image), which checks it), so a stack of an image that
// exec'd since is never unwound or named with the next image's modules: a sample of the new
// image gets a session of its own. The sessions' ELF files come from an ElfCache: the processes of
// one program share them (the CFI is parsed per session).
class DwarfUnwinder final : public StackUnwinder {
 public:
  // `procfs`: where PID/maps and PID/stat are read, and the files through PID/root (a fake
  // tree in tests; the vDSO is only found under the real /proc). `elf_cache`: shared with
  // other unwinders, or nullptr for one of its own.
  explicit DwarfUnwinder(std::filesystem::path procfs = "/proc",
                         std::shared_ptr<ElfCache> elf_cache = nullptr);
  // The process's maps and files as `access` gives them (in the sandboxed worker: from its
  // parent, sys/unwind_worker.h); debug files from `debug_files` when given (the worker: all
  // of a module's candidates in one question), else through `access`.
  DwarfUnwinder(std::shared_ptr<ProcessAccess> access, std::shared_ptr<ElfCache> elf_cache,
                std::shared_ptr<DebugFileSource> debug_files = nullptr);
  ~DwarfUnwinder();
  DwarfUnwinder(const DwarfUnwinder&) = delete;
  DwarfUnwinder& operator=(const DwarfUnwinder&) = delete;

  // CFI first; the rbp chain when CFI gets no further than the first frame (or when the
  // chain goes further). Never reads the process's memory; never fails: a stack that cannot
  // be unwound is its instruction pointer and a stop_reason.
  UnwoundStack Unwind(const CapturedStack& captured, const UnwindLimits& limits = {}) override;
  // The rbp chain alone (what a frame-pointer walk sees), inside the copy: each frame pointer
  // above the last, each return address inside a module. Exposed for tests and comparison.
  UnwoundStack UnwindFramePointers(const CapturedStack& captured, const UnwindLimits& limits = {});
  // Frames of an unwound stack of `image` with this unwinder's modules (no second reading of
  // the process's ELF files): names demangled, and inline frames where there is debug info
  // unless `inline_frames` is false (see SymbolizeOptions).
  std::vector<Frame> Symbolize(const ImageKey& image, const UnwoundStack& unwound,
                               bool inline_frames = true);
  // Any addresses of `image` (options.first says what the first one is), within
  // options.deadline. `missing` (when given): why frames have no name ("process gone", "file
  // refused: libfoo.so: ...", "symbolization time budget spent"), "" when every address was
  // looked up with every file.
  std::vector<Frame> Symbolize(const ImageKey& image, std::span<const uint64_t> addresses,
                               const SymbolizeOptions& options,
                               std::string* missing = nullptr) override;
  void Retain(const std::vector<ImageKey>& live) override;
  // The ELF cache's figures (shared with any other unwinder of the same cache).
  ElfCacheStats elf_stats() const;

 private:
  struct Process;
  struct Walk;
  // The session of `image` (nullptr and `why` when there is none: `gone` when the image no
  // longer runs). `exited_ok`: a cached session of an image that has ended since is good
  // enough (its modules are still the image's).
  std::shared_ptr<Process> ProcessFor(const ImageKey& image, std::string& why, bool& gone,
                                      bool exited_ok = false);
  // Unwind() in a session, under its mutex.
  UnwoundStack UnwindIn(Process& process, const CapturedStack& captured,
                        const UnwindLimits& limits);
  // A session in which a file was refused is not kept (sys/module_files.h ProcessFiles).
  void DropIfRefused(const std::shared_ptr<Process>& process);
  // Both under the process's mutex; `deadline` ends the walk (UnwindLimits::budget from the
  // start of Unwind).
  UnwoundStack WalkDwarf(Process& process, const CapturedStack& captured, size_t max_frames,
                         std::chrono::steady_clock::time_point deadline);
  UnwoundStack WalkFramePointers(Process& process, const CapturedStack& captured, size_t max_frames,
                                 std::chrono::steady_clock::time_point deadline);

  const std::shared_ptr<ProcessAccess> access_;
  const std::shared_ptr<DebugFileSource> debug_files_;  // may be nullptr
  const std::shared_ptr<ElfCache> elf_cache_;
  std::mutex mutex_;  // guards processes_ only
  std::map<ImageKey, std::shared_ptr<Process>> processes_;
  static constexpr size_t kMaxProcesses = 256;
};

}  // namespace rdmascope::sys
