#include "sys/symbolizer.h"

#include <cxxabi.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace rdmascope::sys {
namespace {

std::string Hex(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

// The name of a DWARF subprogram or inlined instance: its linkage name demangled (qualified,
// with the parameters, as the symbol table's would read), else its plain name. An inlined
// instance has neither itself: dwarf_attr_integrate follows DW_AT_abstract_origin.
std::string DieName(Dwarf_Die* die) {
  Dwarf_Attribute attr;
  const char* linkage = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &attr));
  if (linkage == nullptr) {
    linkage = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr));
  }
  if (linkage != nullptr) return Demangle(linkage);
  const char* name = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_name, &attr));
  return name != nullptr ? name : "??";
}

// The functions inlined at `lookup` (a biased address inside `module`), innermost first; none
// without debug info. Like eu-addr2line -i: the scopes containing the address, innermost
// first, up to the (out-of-line) subprogram that contains them.
void AddInlinedFrames(Dwfl_Module* module, Dwarf_Addr lookup, uint64_t return_adjust,
                      const std::string& module_name, std::vector<Frame>& frames) {
  Dwarf_Addr bias = 0;
  Dwarf_Die* cu = dwfl_module_addrdie(module, lookup, &bias);
  if (cu == nullptr) return;
  Dwarf_Die* scopes = nullptr;
  const int count = dwarf_getscopes(cu, lookup - bias, &scopes);
  for (int i = 0; i < count; ++i) {
    const int tag = dwarf_tag(&scopes[i]);
    if (tag == DW_TAG_subprogram) break;
    if (tag != DW_TAG_inlined_subroutine) continue;  // lexical blocks
    Frame frame{.function = DieName(&scopes[i]), .module = module_name, .inlined = true};
    // From the start of the inlined copy; a copy split in several ranges (hot and cold
    // parts) may start after the address: no offset then.
    Dwarf_Addr entry = 0;
    if (dwarf_entrypc(&scopes[i], &entry) == 0 && lookup - bias >= entry) {
      frame.offset = lookup - bias - entry + return_adjust;
    }
    frames.push_back(std::move(frame));
  }
  std::free(scopes);  // libdw allocates it with malloc
}

}  // namespace

std::string Demangle(const std::string& name) {
  // Symbol names come from any program's ELF files: a bound on what the demangler (recursive)
  // is given.
  constexpr size_t kMaxMangled = 4096;
  if (!name.starts_with("_Z") || name.size() > kMaxMangled) return name;
  int status = 0;
  char* demangled = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  if (status != 0 || demangled == nullptr) return name;
  std::string result = demangled;
  std::free(demangled);  // __cxa_demangle allocates with malloc
  return result;
}

std::string Frame::Describe() const {
  if (!function.empty()) return function + "+" + Hex(offset);
  if (!module.empty()) return module + "+" + Hex(offset);
  return "??";
}

std::vector<Frame> SymbolizeWith(Dwfl* dwfl, std::span<const uint64_t> addresses,
                                 const SymbolizeOptions& options, std::string* missing) {
  std::vector<Frame> frames;
  frames.reserve(addresses.size());
  bool out_of_time = false;
  for (size_t i = 0; i < addresses.size(); ++i) {
    const uint64_t address = addresses[i];
    if (!out_of_time && i > 0 && std::chrono::steady_clock::now() >= options.deadline) {
      out_of_time = true;
      if (missing != nullptr) missing->assign("symbolization time budget spent");
    }
    // Return addresses point after the call: look up the call instruction itself, and show
    // the offset of the return address, as the stack holds it.
    const bool exact = i == 0 && options.first == FirstAddress::kInstructionPointer;
    const uint64_t adjust = exact ? 0 : 1;
    Frame frame;
    if (dwfl == nullptr || address == 0 || out_of_time) {
      frames.push_back(std::move(frame));
      continue;
    }
    const Dwarf_Addr lookup = address - adjust;
    Dwfl_Module* module = dwfl_addrmodule(dwfl, lookup);
    if (module == nullptr) {
      frames.push_back(std::move(frame));
      continue;
    }
    Dwarf_Addr start = 0;
    const char* file = nullptr;
    const char* name =
        dwfl_module_info(module, nullptr, &start, nullptr, nullptr, nullptr, &file, nullptr);
    const char* path = file != nullptr ? file : name;
    if (path != nullptr) frame.module = std::filesystem::path(path).filename().string();
    if (options.inline_frames) AddInlinedFrames(module, lookup, adjust, frame.module, frames);
    GElf_Off offset = 0;
    GElf_Sym symbol{};
    const char* function =
        dwfl_module_addrinfo(module, lookup, &offset, &symbol, nullptr, nullptr, nullptr);
    if (function != nullptr) {
      frame.function = Demangle(function);
      frame.offset = offset + adjust;
    } else {
      frame.offset = address - start;
    }
    frames.push_back(std::move(frame));
  }
  return frames;
}

}  // namespace rdmascope::sys
