// Symbolises user-space addresses with elfutils' libdwfl (the library behind eu-stack), on the
// modules of a DWARF unwinder's session (sys/dwarf_unwinder.h, whose callbacks open the
// process's files safely: sys/module_files.h): names from .symtab/.dynsym, C++ names
// demangled, and (when asked) the functions inlined at an address where the module has DWARF
// debug info.
#pragma once

#include <chrono>
#include <cstdint>
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
  // No lookup starts after it: the addresses left get no name (a hostile file's DWARF can
  // make one lookup slow; the budget bounds how many are made).
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
};

// The symbolisation itself, on modules already reported in `dwfl` (not thread-safe: one user
// of a Dwfl at a time). Every address but the first (see FirstAddress) is a return address.
// `missing` (when given) says why frames have no name when the deadline cut the lookups short.
std::vector<Frame> SymbolizeWith(Dwfl* dwfl, std::span<const uint64_t> addresses,
                                 const SymbolizeOptions& options = {},
                                 std::string* missing = nullptr);

// "_ZN2ns3fooEv" -> "ns::foo()"; anything else (C names, garbage, very long names) unchanged.
std::string Demangle(const std::string& name);

}  // namespace rdmascope::sys
