#include "sys/symbolizer.h"

#include <cxxabi.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace rdmascope::sys {
namespace {

const Dwfl_Callbacks kProcCallbacks = {
    .find_elf = dwfl_linux_proc_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = nullptr,
    .debuginfo_path = nullptr,
};

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
                                 const SymbolizeOptions& options) {
  std::vector<Frame> frames;
  frames.reserve(addresses.size());
  for (size_t i = 0; i < addresses.size(); ++i) {
    const uint64_t address = addresses[i];
    // Return addresses point after the call: look up the call instruction itself, and show
    // the offset of the return address, as the stack holds it.
    const bool exact = i == 0 && options.first == FirstAddress::kInstructionPointer;
    const uint64_t adjust = exact ? 0 : 1;
    Frame frame;
    if (dwfl == nullptr || address == 0) {
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

// A Dwfl is not thread-safe: one user at a time, under its own lock.
struct Symbolizer::Session {
  std::mutex mutex;
  Dwfl* dwfl = nullptr;
  ~Session() {
    if (dwfl != nullptr) dwfl_end(dwfl);
  }
};

Symbolizer::~Symbolizer() = default;

std::shared_ptr<Symbolizer::Session> Symbolizer::SessionFor(uint32_t pid) {
  {
    std::lock_guard lock(mutex_);
    if (const auto it = sessions_.find(pid); it != sessions_.end()) return it->second;
  }
  // Reading /proc/PID/maps and the ELF headers can be slow: not under mutex_.
  auto session = std::make_shared<Session>();
  session->dwfl = dwfl_begin(&kProcCallbacks);
  if (session->dwfl == nullptr) return nullptr;
  if (dwfl_linux_proc_report(session->dwfl, static_cast<pid_t>(pid)) != 0 ||
      dwfl_report_end(session->dwfl, nullptr, nullptr) != 0) {
    return nullptr;  // the process is gone or not readable
  }
  std::lock_guard lock(mutex_);
  if (const auto it = sessions_.find(pid); it != sessions_.end()) return it->second;
  if (sessions_.size() >= kMaxSessions) sessions_.erase(sessions_.begin());
  sessions_[pid] = session;
  return session;
}

std::vector<Frame> Symbolizer::Symbolize(uint32_t pid, const std::vector<uint64_t>& addresses,
                                         const SymbolizeOptions& options) {
  const std::shared_ptr<Session> session = SessionFor(pid);
  if (!session) return SymbolizeWith(nullptr, addresses, options);
  std::lock_guard lock(session->mutex);
  return SymbolizeWith(session->dwfl, addresses, options);
}

void Symbolizer::Retain(const std::vector<uint32_t>& live) {
  std::lock_guard lock(mutex_);
  // A session in use elsewhere stays alive through its shared_ptr until that use ends.
  std::erase_if(sessions_, [&](const auto& entry) {
    return std::find(live.begin(), live.end(), entry.first) == live.end();
  });
}

}  // namespace rdmascope::sys
