// Symbolises user-space addresses of live processes with elfutils' libdwfl (the library
// behind eu-stack): modules from /proc/PID/maps, names from .symtab/.dynsym, C++ names
// demangled, and (when asked) the functions inlined at an address where the module has DWARF
// debug info.
// One Dwfl session per process, cached until the process is forgotten.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

struct Dwfl;

namespace rdmascope::sys {

// A frame as it may be shown to anyone: names and offsets, never an absolute address (that
// would reveal the process's address-space layout).
struct Frame {
  std::string function;  // empty when unknown
  uint64_t offset = 0;   // from the function's start, or from the module's when unknown
  std::string module;    // file name of the module (no directory), empty when unknown
  // A function inlined at this address (DWARF): the frames of one address are the inlined
  // functions, innermost first, then the function that contains them (not inlined). The
  // offset of an inlined frame is from the start of its inlined copy.
  bool inlined = false;

  // "function+0x1c", "libfoo.so.1+0x2a40" (no symbol), or "??" (no module either).
  std::string Describe() const;
};

// What the first address of a stack is: a return address like the others, or an exact
// instruction address (an unwound stack's [0], the captured rip), which must not be moved back
// into the previous instruction before the lookup: at a function's entry (a uprobe's address)
// that would name the function laid out before it.
enum class FirstAddress { kReturnAddress, kInstructionPointer };

struct SymbolizeOptions {
  FirstAddress first = FirstAddress::kReturnAddress;
  // The functions inlined at each address as frames of their own (Frame::inlined), where the
  // module has DWARF debug info. Off unless asked for: a registration's innermost frame would
  // then be libibverbs' own inline wrapper (verbs.h: ibv_reg_mr is a macro for the static
  // inline __ibv_reg_mr) wherever the application has debug info, where /debug/mr/stacks and
  // `rdmascope profile` look for the application's registering function.
  bool inline_frames = false;
};

// The symbolisation itself, on modules already reported in `dwfl` (not thread-safe: one user
// of a Dwfl at a time). Every address but the first (see FirstAddress) is a return address.
std::vector<Frame> SymbolizeWith(Dwfl* dwfl, std::span<const uint64_t> addresses,
                                 const SymbolizeOptions& options = {});

// "_ZN2ns3fooEv" -> "ns::foo()"; anything else (C names, garbage, very long names) unchanged.
std::string Demangle(const std::string& name);

class Symbolizer {
 public:
  Symbolizer() = default;
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  // Return addresses of one stack, innermost first. Thread-safe; slow work (reading the
  // process's maps and ELF files) is done outside the lock Retain() takes, so that a scrape
  // calling Retain() never waits for a symbolisation.
  // With options.inline_frames, an address inside inlined functions yields several frames.
  std::vector<Frame> Symbolize(uint32_t pid, const std::vector<uint64_t>& return_addresses,
                               const SymbolizeOptions& options = {});
  // Drops the cached sessions of processes not in `live` (exited, or pid reused).
  void Retain(const std::vector<uint32_t>& live);

 private:
  struct Session;
  std::shared_ptr<Session> SessionFor(uint32_t pid);

  std::mutex mutex_;  // guards sessions_ only
  std::map<uint32_t, std::shared_ptr<Session>> sessions_;
  static constexpr size_t kMaxSessions = 256;
};

}  // namespace rdmascope::sys
