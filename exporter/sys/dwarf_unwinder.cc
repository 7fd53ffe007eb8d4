#include "sys/dwarf_unwinder.h"

#include <dwarf.h>
#include <elf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <libelf.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <list>
#include <optional>
#include <set>
#include <utility>

#include "sys/module_files.h"
#include "sys/untrusted_files.h"

// How libdwfl is used (elfutils 0.188, libdwfl/dwfl_frame.c, frame_unwind.c):
// - dwfl_attach_state() can be called once per Dwfl, and the Dwfl holds what is expensive: the
//   modules reported from /proc/PID/maps, their ELF files, symbol tables and parsed CFI. perf
//   (tools/perf/util/unwind-libdw.c) makes a Dwfl per sample; we keep one per process, whose
//   thread callbacks read the registers and stack of the sample being unwound (Process::walk,
//   set under the process's mutex). dwfl_getthread_frames() starts a fresh thread state on each
//   call, so one attached Dwfl unwinds any number of samples.
// - Per step, libdwfl tries .eh_frame, then .debug_frame, then the x86-64 backend's fallback
//   (backends/x86_64_unwind.c): one frame-pointer step from rbp. So a libdwfl walk may already
//   contain rbp steps; Unwind() tells which method got past the first frame by looking for CFI
//   at each pc.
// - libdwfl has no guard against a CFA that does not move (only the backend's rbp step checks
//   that rsp went up): our frame callback stops when the stack pointer does not increase.
// - A module's ELF file is opened by sys/module_files.cc (never by a path in the exporter's
//   namespace: /proc/PID/map_files or RESOLVE_IN_ROOT, device and inode checked, the bytes
//   checked by sys/elf_checks.h) and comes from the ElfCache: one read-only mapping of each
//   file for the sessions of all processes, each session with its own Elf* over it
//   (elf_cache.cc says why not one Elf*). Debug info only from the process's own root. A
//   session in which a file was refused is dropped once its request ends.
// - The parsed CFI is not shared: libdwfl makes a module's Dwarf_CFI itself on its first
//   lookup (dwfl_module_eh_cfi.c, dwfl_module_dwarf_cfi.c: into the module, with the module's
//   backend; there is no call to hand it one), and a Dwarf_CFI is not thread-safe (libdw/fde.c
//   and cie.c add the FDEs and CIEs a lookup parses to the Dwarf_CFI's tsearch trees, with no
//   lock). Each session builds its own: a few microseconds for a stack through a program and
//   libc (an .eh_frame_hdr table makes a lookup a binary search), next to the ~60 us of making
//   the session (maps, pidfd, start time): most of a second process's first unwind (75-95 us
//   here, against 250-280 us without sharing).
namespace rdmascope::sys {
namespace {

using Clock = std::chrono::steady_clock;

// When the instruction pointer lies in no module (a library dlopen()ed after the session was
// made), the maps are read again, at most this often: an instruction pointer in anonymous
// code (a JIT) would otherwise re-read them at every unwind.
constexpr auto kReportInterval = std::chrono::seconds(1);

std::string Hex(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

// "libfoo.so+0x1a2b": an address as a stop reason may show it (no absolute address).
std::string Where(Dwfl_Module* module, uint64_t address) {
  Dwarf_Addr start = 0;
  const char* file = nullptr;
  const char* name =
      dwfl_module_info(module, nullptr, &start, nullptr, nullptr, nullptr, &file, nullptr);
  const char* path = file != nullptr ? file : name;
  const std::string base = path != nullptr ? std::filesystem::path(path).filename().string() : "?";
  return base + "+" + Hex(address - start);
}

// Whether libdwfl unwinds `pc` (already moved back into the call for return addresses) with
// CFI rather than with the backend's rbp step: an FDE of .eh_frame or .debug_frame covers it.
bool HasCfi(Dwfl_Module* module, Dwarf_Addr pc) {
  for (const auto find : {dwfl_module_eh_cfi, dwfl_module_dwarf_cfi}) {
    Dwarf_Addr bias = 0;
    Dwarf_CFI* cfi = find(module, &bias);
    Dwarf_Frame* frame = nullptr;
    if (cfi != nullptr && dwarf_cfi_addrframe(cfi, pc - bias, &frame) == 0) {
      std::free(frame);  // libdw allocates it with malloc
      return true;
    }
  }
  return false;
}

// An 8-byte word of the captured copy: the only memory any walk reads.
struct StackCopy {
  uint64_t sp;
  std::span<const uint8_t> bytes;

  bool Contains(uint64_t address) const {
    return bytes.size() >= 8 && address >= sp && address - sp <= bytes.size() - 8;
  }
  bool Read(uint64_t address, uint64_t& value) const {
    if (!Contains(address)) return false;
    std::memcpy(&value, bytes.data() + (address - sp), sizeof value);  // x86-64: little-endian
    return true;
  }
};

}  // namespace

const char* OutcomeReason(UnwindOutcome outcome) {
  switch (outcome) {
    case UnwindOutcome::kStopped:
      return "";
    case UnwindOutcome::kFrameLimit:
      return "frame limit";
    case UnwindOutcome::kTimeBudget:
      return "time budget";
    case UnwindOutcome::kImageGone:
      return "process gone";
  }
  return "?";
}

const char* MethodName(UnwindMethod method) {
  switch (method) {
    case UnwindMethod::kNone:
      return "none";
    case UnwindMethod::kDwarf:
      return "dwarf";
    case UnwindMethod::kFramePointer:
      return "frame-pointer";
  }
  return "?";
}

// One unwind in progress: the sample, the frames so far, why it stopped.
struct DwarfUnwinder::Walk {
  const CapturedStack& captured;
  StackCopy copy;
  size_t max_frames;
  Clock::time_point deadline;
  std::vector<uint64_t> pcs;
  bool last_exact = true;  // pcs.back() is an exact address (the first frame, a signal frame)
  std::optional<uint64_t> last_sp;
  // The last read outside the copy: during the step from which frame (the index of the frame
  // being unwound), and whether above the copy's end (the stack goes on: truncated) or below
  // SP. libdwfl ends a walk quietly, as at the outermost frame, when the return address
  // cannot be read: this tells the two apart.
  std::optional<size_t> failed_step;
  bool failed_above = false;
  std::string stop;  // set when the frame callback ends the walk
  UnwindOutcome outcome = UnwindOutcome::kStopped;
  bool truncated = false;

  // Reads made while unwinding frame i happen once it is in pcs (see OnFrame): step i is
  // pcs.size() - 1.
  bool Read(uint64_t address, uint64_t& value) {
    if (copy.Read(address, value)) return true;
    failed_step = pcs.empty() ? 0 : pcs.size() - 1;
    failed_above = address >= copy.sp;
    return false;
  }
  // Unwinding the last frame read outside the copy (above it: the copy ends there).
  bool LastStepReadOutside() const {
    return failed_step && !pcs.empty() && *failed_step == pcs.size() - 1;
  }

  // A limit reached before frame pcs.size() is added.
  bool Limited() {
    if (pcs.size() >= max_frames) {
      outcome = UnwindOutcome::kFrameLimit;
    } else if (!pcs.empty() && Clock::now() >= deadline) {
      outcome = UnwindOutcome::kTimeBudget;  // checked at every frame; the first is always given
    } else {
      return false;
    }
    stop = OutcomeReason(outcome);
    truncated = true;
    return true;
  }

  static int OnFrame(Dwfl_Frame* frame, void* arg) {
    Walk& walk = *static_cast<Walk*>(arg);
    Dwarf_Addr pc = 0;
    if (!dwfl_frame_pc(frame, &pc, nullptr)) {
      walk.stop = "no pc for the frame";
      return DWARF_CB_ABORT;
    }
    Dwarf_Word sp = 0;
    const bool have_sp = dwfl_frame_reg(frame, kDwarfRsp, &sp) == 0;
    if (!walk.pcs.empty()) {
      // A caller's frame lies above its callee's: anything else is a CFI (or a stack) that
      // would loop or wander.
      if (have_sp && walk.last_sp && sp <= *walk.last_sp) {
        walk.stop = sp == *walk.last_sp && pc == walk.pcs.back() ? "repeated frame"
                                                                 : "stack pointer went down";
        return DWARF_CB_ABORT;
      }
      if (!have_sp && !walk.last_sp && pc == walk.pcs.back()) {
        walk.stop = "repeated frame";
        return DWARF_CB_ABORT;
      }
    }
    if (walk.Limited()) return DWARF_CB_ABORT;
    walk.pcs.push_back(pc);
    walk.last_sp = have_sp ? std::optional<uint64_t>(sp) : std::nullopt;
    // Only now (the frame in pcs: Read() counts steps by it): whether the pc is exact (the
    // first frame, a signal frame) or a return address. libdwfl finds out by unwinding this
    // frame, and keeps the result for the next callback.
    bool activation = false;
    walk.last_exact = dwfl_frame_pc(frame, &pc, &activation) && activation;
    return DWARF_CB_OK;
  }
};

// One process image's libdwfl session: its modules, attached to thread callbacks that unwind
// whichever sample `walk` points to.
struct DwarfUnwinder::Process {
  const ImageKey image;
  const uint32_t pid;  // image.tgid
  const uint64_t start_ticks;
  const std::shared_ptr<ElfCache> elf_cache;
  std::mutex mutex;  // a Dwfl is not thread-safe: one unwind or symbolisation at a time
  Dwfl* dwfl = nullptr;
  // The architecture for dwfl_attach_state: an x86-64 ELF header in memory. Without it libdwfl
  // would borrow the backend of the first module, which a later re-report may drop.
  Elf64_Ehdr header{};
  Elf* arch = nullptr;
  Clock::time_point reported;
  std::atomic<bool> gone = false;  // the maps could not be read again: make a new session
  Walk* walk = nullptr;            // the sample being unwound, under `mutex`
  // What the modules' file callbacks need (sys/module_files.h), and one ModuleFile per module,
  // its userdata (a list: their addresses must not move). Destroyed after dwfl_end() (in the
  // destructor's body), which ends the Elf*s over the cached files.
  ProcessFiles context;
  std::list<ModuleFile> files;

  Process(const ImageKey& key, ProcessAccess* access, DebugFileSource* debug_files,
          std::shared_ptr<ElfCache> cache)
      : image(key), pid(key.tgid), start_ticks(StartTicksOf(key)), elf_cache(std::move(cache)) {
    context.access = access;
    context.debug_files = debug_files;
    context.pid = pid;
    context.cache = elf_cache.get();
  }
  ~Process() {
    if (dwfl != nullptr) dwfl_end(dwfl);
    if (arch != nullptr) elf_end(arch);
  }

  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  // (Re-)reads the modules. A re-report keeps the modules that did not change (libdwfl reuses
  // a module reported again with the same name and range, with its ELF and CFI). `ended`:
  // the image runs no more (exit, exec: the maps are not its own).
  bool Report(std::string& why, bool& ended) {
    if (dwfl == nullptr) {
      dwfl = dwfl_begin(&ModuleFileCallbacks());
      if (dwfl == nullptr) {
        why = std::string("libdwfl: ") + dwfl_errmsg(-1);
        return false;
      }
    } else {
      dwfl_report_begin(dwfl);
    }
    // The maps as read here give each file's device and inode (what an open must find);
    // libdwfl reports the modules from the same text, or on the real procfs from its own
    // reading, with the vDSO (a file changed in between fails the check: no file).
    int result = 0;
    const auto maps = context.access->Maps(image);
    if (!maps) {
      result = maps.error();
    } else if (maps->empty()) {
      result = 0;  // no module: ESRCH below
    } else if (context.access->libdwfl_may_read_proc()) {
      result = dwfl_linux_proc_report(dwfl, static_cast<pid_t>(pid));
    } else if (FILE* text = fmemopen(const_cast<char*>(maps->data()), maps->size(), "r")) {
      result = dwfl_linux_proc_maps_report(dwfl, text);
      std::fclose(text);
    } else {
      result = errno;
    }
    context.mapped = maps ? ParseMappedFiles(*maps) : std::vector<MappedFile>{};
    dwfl_report_end(dwfl, nullptr, nullptr);
    TrackModules();
    // No file mapped (a zombie, a kernel thread): nothing to unwind against.
    if (result == 0 && dwfl_getmodules(dwfl, CountModule, nullptr, 0) == 0) result = ESRCH;
    if (result != 0) {
      gone = true;
      ended = result == ENOENT || result == ESRCH;
      why = ended        ? OutcomeReason(UnwindOutcome::kImageGone)
            : result > 0 ? std::string("maps unreadable: ") + std::strerror(result)
                         : std::string("maps unreadable: ") + dwfl_errmsg(-1);
      return false;
    }
    reported = Clock::now();
    return true;
  }

  bool Attach(std::string& why) {
    std::memcpy(header.e_ident, ELFMAG, SELFMAG);
    header.e_ident[EI_CLASS] = ELFCLASS64;
    header.e_ident[EI_DATA] = ELFDATA2LSB;
    header.e_ident[EI_VERSION] = EV_CURRENT;
    header.e_type = ET_CORE;
    header.e_machine = EM_X86_64;
    header.e_version = EV_CURRENT;
    header.e_ehsize = sizeof header;
    elf_version(EV_CURRENT);
    arch = elf_memory(reinterpret_cast<char*>(&header), sizeof header);
    if (arch == nullptr ||
        !dwfl_attach_state(dwfl, arch, static_cast<pid_t>(pid), &kThreadCallbacks, this)) {
      why = std::string("libdwfl cannot attach: ") + dwfl_errmsg(-1);
      return false;
    }
    return true;
  }

  static int CountModule(Dwfl_Module*, void**, const char*, Dwarf_Addr, void*) {
    return DWARF_CB_ABORT;  // one is enough: dwfl_getmodules() then returns nonzero
  }

  // After a report: a ModuleFile for each new module; those of the modules dropped (a re-report
  // keeps a module with the same name and range, with its userdata) released, their Elf*s
  // having been ended by dwfl_report_end().
  void TrackModules() {
    std::pair<Process*, std::set<const void*>> seen{this, {}};
    dwfl_getmodules(dwfl, TrackModule, &seen, 0);
    files.remove_if([&](const ModuleFile& file) { return !seen.second.contains(&file); });
  }
  static int TrackModule(Dwfl_Module*, void** userdata, const char*, Dwarf_Addr, void* arg) {
    auto& [process, seen] = *static_cast<std::pair<Process*, std::set<const void*>>*>(arg);
    if (*userdata == nullptr) {
      *userdata = &process->files.emplace_back();
      process->files.back().process = &process->context;
    }
    seen.insert(*userdata);
    return DWARF_CB_OK;
  }

  // libdwfl's view of the process: one thread, whose registers and memory are the sample's.
  static pid_t NextThread(Dwfl*, void* arg, void** thread_arg) {
    if (*thread_arg != nullptr) return 0;
    *thread_arg = arg;
    return static_cast<pid_t>(static_cast<Process*>(arg)->pid);
  }
  static bool GetThread(Dwfl*, pid_t, void* arg, void** thread_arg) {
    *thread_arg = arg;
    return true;
  }
  static bool MemoryRead(Dwfl*, Dwarf_Addr address, Dwarf_Word* result, void* arg) {
    Walk* walk = static_cast<Process*>(arg)->walk;
    uint64_t value = 0;
    if (walk == nullptr || !walk->Read(address, value)) return false;
    *result = value;
    return true;
  }
  static bool SetInitialRegisters(Dwfl_Thread* thread, void* arg) {
    const Walk* walk = static_cast<Process*>(arg)->walk;
    if (walk == nullptr) return false;
    static_assert(sizeof(Dwarf_Word) == sizeof(uint64_t));
    return dwfl_thread_state_registers(
        thread, 0, kDwarfRegisters,
        reinterpret_cast<const Dwarf_Word*>(walk->captured.regs.data()));
  }
  static constexpr Dwfl_Thread_Callbacks kThreadCallbacks = {
      .next_thread = NextThread,
      .get_thread = GetThread,
      .memory_read = MemoryRead,
      .set_initial_registers = SetInitialRegisters,
      .detach = nullptr,
      .thread_detach = nullptr,
  };
};

DwarfUnwinder::DwarfUnwinder(std::filesystem::path procfs, std::shared_ptr<ElfCache> elf_cache)
    : DwarfUnwinder(std::make_shared<LocalProcessAccess>(std::move(procfs)), std::move(elf_cache)) {
}

DwarfUnwinder::DwarfUnwinder(std::shared_ptr<ProcessAccess> access,
                             std::shared_ptr<ElfCache> elf_cache,
                             std::shared_ptr<DebugFileSource> debug_files)
    : access_(std::move(access)),
      debug_files_(std::move(debug_files)),
      elf_cache_(elf_cache ? std::move(elf_cache) : std::make_shared<ElfCache>()) {}

DwarfUnwinder::~DwarfUnwinder() = default;

std::shared_ptr<DwarfUnwinder::Process> DwarfUnwinder::ProcessFor(const ImageKey& image,
                                                                  std::string& why, bool& gone,
                                                                  bool exited_ok) {
  why = OutcomeReason(UnwindOutcome::kImageGone);
  gone = true;
  const uint32_t pid = image.tgid;
  if (pid == 0 || pid > INT_MAX) return nullptr;
  std::shared_ptr<Process> cached;
  {
    std::lock_guard lock(mutex_);
    if (const auto it = processes_.find(image); it != processes_.end()) cached = it->second;
  }
  // Still running? (LocalProcessAccess: its pidfd says so in one poll(); without one, a fake
  // procfs or a kernel before 5.3, its start time from PID/stat, about 10 us.) An exec keeps
  // both: a session made for this image holds this image's modules, whatever runs now.
  if (cached && !cached->gone && (exited_ok || access_->StillRunning(pid, cached->start_ticks))) {
    return cached;
  }
  // Reading the maps and ELF headers is slow: not under mutex_. Maps(image) refuses an image
  // that no longer runs (another process, an exec since): no session is made from the maps of
  // whatever runs in its place.
  auto process = std::make_shared<Process>(image, access_.get(), debug_files_.get(), elf_cache_);
  bool ended = false;
  if (!process->Report(why, ended)) {
    gone = ended;
    return nullptr;
  }
  if (!process->Attach(why)) {
    gone = false;
    return nullptr;
  }
  gone = false;
  std::lock_guard lock(mutex_);
  const auto it = processes_.find(image);
  if (it != processes_.end() && it->second != cached && !it->second->gone) {
    return it->second;  // another thread made it meanwhile
  }
  if (it == processes_.end() && processes_.size() >= kMaxProcesses) {
    processes_.erase(processes_.begin());
  }
  processes_[image] = process;
  return process;
}

UnwoundStack DwarfUnwinder::WalkDwarf(Process& process, const CapturedStack& captured,
                                      size_t max_frames, Clock::time_point deadline) {
  Walk walk{.captured = captured,
            .copy = {.sp = captured.regs[kDwarfRsp], .bytes = captured.stack},
            .max_frames = max_frames,
            .deadline = deadline};
  process.walk = &walk;
  const int result =
      dwfl_getthread_frames(process.dwfl, static_cast<pid_t>(process.pid), Walk::OnFrame, &walk);
  process.walk = nullptr;

  UnwoundStack out;
  out.truncated = walk.truncated;
  out.outcome = walk.outcome;
  if (!walk.stop.empty()) {
    out.stop_reason = walk.stop;
  } else if (walk.pcs.empty()) {
    out.stop_reason = std::string("unwind error: ") + dwfl_errmsg(-1);
  } else if (result == 0 && !walk.LastStepReadOutside()) {
    // The outermost frame: CFI says the return address is undefined (_start, clone).
  } else {
    // Why the last frame could not be unwound: the cause first (no CFI for its code), then
    // what CFI could not read.
    const uint64_t last = walk.pcs.back();
    const Dwarf_Addr lookup = walk.last_exact ? last : last - 1;
    Dwfl_Module* module = dwfl_addrmodule(process.dwfl, lookup);
    if (module == nullptr) {
      out.stop_reason = "no module at the pc (anonymous or unmapped code)";
    } else if (!HasCfi(module, lookup)) {
      out.stop_reason = "no CFI for " + Where(module, lookup);
      if (const std::string refused = RefusalOf(module); !refused.empty()) {
        out.stop_reason += " (file refused: " + refused + ")";
      }
    } else if (walk.LastStepReadOutside() && walk.failed_above) {
      out.stop_reason = "stack copy ends";
      out.truncated = true;
    } else if (walk.LastStepReadOutside()) {
      out.stop_reason = "CFI points below the stack pointer";
    } else {
      out.stop_reason = std::string("unwind error: ") + dwfl_errmsg(-1);
    }
  }
  // The method that got past the first frame: CFI if any step had an FDE for its pc, else
  // it was libdwfl's rbp fallback throughout.
  if (walk.pcs.size() > 1) {
    out.method = UnwindMethod::kFramePointer;
    for (size_t i = 0; i + 1 < walk.pcs.size(); ++i) {
      const Dwarf_Addr lookup = i == 0 ? walk.pcs[0] : walk.pcs[i] - 1;
      Dwfl_Module* module = dwfl_addrmodule(process.dwfl, lookup);
      if (module != nullptr && HasCfi(module, lookup)) {
        out.method = UnwindMethod::kDwarf;
        break;
      }
    }
  }
  out.pcs = std::move(walk.pcs);
  return out;
}

UnwoundStack DwarfUnwinder::WalkFramePointers(Process& process, const CapturedStack& captured,
                                              size_t max_frames, Clock::time_point deadline) {
  Walk walk{.captured = captured,
            .copy = {.sp = captured.regs[kDwarfRsp], .bytes = captured.stack},
            .max_frames = max_frames,
            .deadline = deadline};
  const auto in_module = [&](uint64_t address) {
    return address > 0 && dwfl_addrmodule(process.dwfl, address - 1) != nullptr;
  };
  const uint64_t ip = captured.regs[kDwarfRip];
  if (!walk.Limited()) walk.pcs.push_back(ip);
  uint64_t fp = captured.regs[kDwarfRbp];
  uint64_t floor = walk.copy.sp;  // every frame record lies above the previous one
  // At a function's first instruction (a uprobe on its entry) its frame is not set up yet:
  // the return address is at [rsp] and rbp is still the caller's frame pointer.
  GElf_Off offset = 1;
  if (Dwfl_Module* module = dwfl_addrmodule(process.dwfl, ip)) {
    GElf_Sym symbol{};
    if (dwfl_module_addrinfo(module, ip, &offset, &symbol, nullptr, nullptr, nullptr) == nullptr) {
      offset = 1;
    }
  }
  uint64_t entry_return = 0;
  if (offset == 0 && walk.Read(walk.copy.sp, entry_return) && in_module(entry_return) &&
      !walk.Limited()) {
    walk.pcs.push_back(entry_return);
    floor = walk.copy.sp + 8;
  }
  while (walk.stop.empty()) {
    if (fp == 0) break;  // the psABI's outermost frame (_start clears rbp)
    uint64_t next = 0;
    uint64_t return_address = 0;
    if (fp < floor || fp % 8 != 0) {
      walk.stop = "frame pointer chain broken";
    } else if (!walk.Read(fp, next) || !walk.Read(fp + 8, return_address)) {
      walk.stop = "stack copy ends";
      walk.truncated = true;
    } else if (return_address == 0) {
      break;
    } else if (!in_module(return_address)) {
      walk.stop = "return address outside any module";
    } else if (!walk.Limited()) {
      walk.pcs.push_back(return_address);
      floor = fp + 16;
      fp = next;
    }
  }
  UnwoundStack out{.pcs = std::move(walk.pcs),
                   .method = UnwindMethod::kNone,
                   .truncated = walk.truncated,
                   .stop_reason = std::move(walk.stop),
                   .outcome = walk.outcome};
  if (out.pcs.size() > 1) out.method = UnwindMethod::kFramePointer;
  return out;
}

void DwarfUnwinder::DropIfRefused(const std::shared_ptr<Process>& process) {
  {
    std::lock_guard lock(process->mutex);
    if (process->context.refused.empty()) return;
  }
  std::lock_guard lock(mutex_);
  const auto it = processes_.find(process->image);
  if (it != processes_.end() && it->second == process) processes_.erase(it);
}

UnwoundStack DwarfUnwinder::Unwind(const CapturedStack& captured, const UnwindLimits& limits) {
  if (limits.max_frames == 0) {
    return {.truncated = true,
            .stop_reason = OutcomeReason(UnwindOutcome::kFrameLimit),
            .outcome = UnwindOutcome::kFrameLimit};
  }
  const uint64_t ip = captured.regs[kDwarfRip];
  std::string why;
  bool gone = false;
  const std::shared_ptr<Process> process = ProcessFor(captured.image, why, gone);
  if (!process) {
    return {.pcs = {ip},
            .stop_reason = why,
            .outcome = gone ? UnwindOutcome::kImageGone : UnwindOutcome::kStopped};
  }
  UnwoundStack unwound = UnwindIn(*process, captured, limits);
  DropIfRefused(process);
  return unwound;
}

UnwoundStack DwarfUnwinder::UnwindIn(Process& process, const CapturedStack& captured,
                                     const UnwindLimits& limits) {
  const uint64_t ip = captured.regs[kDwarfRip];
  std::string why;
  std::lock_guard lock(process.mutex);
  // The budget is the walk's: a new process's maps are read before it starts (the modules'
  // files are opened as the walk reaches them, and count).
  const Clock::time_point deadline = Clock::now() + limits.budget;
  bool ended = false;
  if (dwfl_addrmodule(process.dwfl, ip) == nullptr &&
      Clock::now() - process.reported >= kReportInterval && !process.Report(why, ended)) {
    return {.pcs = {ip},
            .stop_reason = why,
            .outcome = ended ? UnwindOutcome::kImageGone : UnwindOutcome::kStopped};
  }
  UnwoundStack dwarf = WalkDwarf(process, captured, limits.max_frames, deadline);
  // Stopped by a limit, or CFI got past the first frame and on to the outermost frame or to
  // the end of the copy: the rbp walk, in the same limits and copy, cannot do better (if it
  // went further, its frames would be garbage: rbp used as a general register).
  if (dwarf.outcome != UnwindOutcome::kStopped ||
      (dwarf.method == UnwindMethod::kDwarf && (dwarf.stop_reason.empty() || dwarf.truncated))) {
    return dwarf;
  }
  UnwoundStack frame_pointers = WalkFramePointers(process, captured, limits.max_frames, deadline);
  if (frame_pointers.pcs.size() <= dwarf.pcs.size()) return dwarf;
  if (!dwarf.stop_reason.empty()) {
    frame_pointers.stop_reason += (frame_pointers.stop_reason.empty() ? "" : "; ") +
                                  std::string("CFI stopped: ") + dwarf.stop_reason;
  }
  return frame_pointers;
}

UnwoundStack DwarfUnwinder::UnwindFramePointers(const CapturedStack& captured,
                                                const UnwindLimits& limits) {
  std::string why;
  bool gone = false;
  const std::shared_ptr<Process> process = ProcessFor(captured.image, why, gone);
  if (!process) {
    return {.pcs = {captured.regs[kDwarfRip]},
            .stop_reason = why,
            .outcome = gone ? UnwindOutcome::kImageGone : UnwindOutcome::kStopped};
  }
  std::lock_guard lock(process->mutex);
  return WalkFramePointers(*process, captured, limits.max_frames, Clock::now() + limits.budget);
}

std::vector<Frame> DwarfUnwinder::Symbolize(const ImageKey& image, const UnwoundStack& unwound,
                                            bool inline_frames) {
  return Symbolize(image, unwound.pcs,
                   {.first = FirstAddress::kInstructionPointer, .inline_frames = inline_frames});
}

std::vector<Frame> DwarfUnwinder::Symbolize(const ImageKey& image,
                                            std::span<const uint64_t> addresses,
                                            const SymbolizeOptions& options, std::string* missing) {
  std::string why;
  bool gone = false;
  // The session of an image that has ended since still names its addresses (the modules it
  // had): the stacks of regions left at exit are symbolized after it (Retain drops it).
  const std::shared_ptr<Process> process = ProcessFor(image, why, gone, /*exited_ok=*/true);
  if (!process) {
    if (missing != nullptr) *missing = why;
    return SymbolizeWith(nullptr, addresses, options);
  }
  std::vector<Frame> frames;
  {
    std::lock_guard lock(process->mutex);
    frames = SymbolizeWith(process->dwfl, addresses, options, missing);
    if (missing != nullptr && missing->empty() && !process->context.refused.empty()) {
      *missing = "file refused: " + process->context.refused;
    }
  }
  DropIfRefused(process);
  return frames;
}

ElfCacheStats DwarfUnwinder::elf_stats() const { return elf_cache_->stats(); }

void DwarfUnwinder::Retain(const std::vector<ImageKey>& live) {
  std::vector<uint32_t> live_pids;
  live_pids.reserve(live.size());
  for (const ImageKey& image : live) live_pids.push_back(image.tgid);
  access_->Retain(live_pids);
  const std::set<ImageKey> keep(live.begin(), live.end());
  std::lock_guard lock(mutex_);
  // A session in use elsewhere stays alive through its shared_ptr until that use ends.
  std::erase_if(processes_, [&](const auto& entry) { return !keep.contains(entry.first); });
}

}  // namespace rdmascope::sys
