#include "sys/symbolizer.h"

#include <elfutils/libdwfl.h>

#include <algorithm>

namespace rdmascope::sys {
namespace {

const Dwfl_Callbacks kProcCallbacks = {
    .find_elf = dwfl_linux_proc_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = nullptr,
    .debuginfo_path = nullptr,
};

}  // namespace

Symbolizer::~Symbolizer() {
  for (auto& [pid, dwfl] : sessions_) dwfl_end(dwfl);
}

Dwfl* Symbolizer::SessionFor(uint32_t pid) {
  if (const auto it = sessions_.find(pid); it != sessions_.end()) return it->second;
  if (sessions_.size() >= kMaxSessions) {
    dwfl_end(sessions_.begin()->second);
    sessions_.erase(sessions_.begin());
  }
  Dwfl* dwfl = dwfl_begin(&kProcCallbacks);
  if (dwfl == nullptr) return nullptr;
  if (dwfl_linux_proc_report(dwfl, static_cast<pid_t>(pid)) != 0 ||
      dwfl_report_end(dwfl, nullptr, nullptr) != 0) {
    dwfl_end(dwfl);
    return nullptr;  // the process is gone or not readable
  }
  sessions_[pid] = dwfl;
  return dwfl;
}

std::vector<Frame> Symbolizer::Symbolize(uint32_t pid, const std::vector<uint64_t>& addresses) {
  std::lock_guard lock(mutex_);
  Dwfl* dwfl = SessionFor(pid);
  std::vector<Frame> frames;
  for (const uint64_t address : addresses) {
    Frame frame{.address = address};
    if (dwfl != nullptr && address > 0) {
      // Return addresses point after the call: look up the call instruction itself.
      const Dwarf_Addr lookup = address - 1;
      if (Dwfl_Module* module = dwfl_addrmodule(dwfl, lookup)) {
        if (const char* name = dwfl_module_addrname(module, lookup)) frame.function = name;
        const char* file = nullptr;
        dwfl_module_info(module, nullptr, nullptr, nullptr, nullptr, nullptr, &file, nullptr);
        const char* module_name =
            dwfl_module_info(module, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
        if (file != nullptr) {
          frame.module = file;
        } else if (module_name != nullptr) {
          frame.module = module_name;
        }
      }
    }
    frames.push_back(std::move(frame));
  }
  return frames;
}

void Symbolizer::Retain(const std::vector<uint32_t>& live) {
  std::lock_guard lock(mutex_);
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    if (std::find(live.begin(), live.end(), it->first) == live.end()) {
      dwfl_end(it->second);
      it = sessions_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace rdmascope::sys
