#include "sys/symbolizer.h"

#include <elfutils/libdwfl.h>

#include <algorithm>
#include <cstdio>
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

}  // namespace

std::string Frame::Describe() const {
  if (!function.empty()) return function + "+" + Hex(offset);
  if (!module.empty()) return module + "+" + Hex(offset);
  return "??";
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

std::vector<Frame> Symbolizer::Symbolize(uint32_t pid, const std::vector<uint64_t>& addresses) {
  const std::shared_ptr<Session> session = SessionFor(pid);
  std::vector<Frame> frames;
  std::unique_lock<std::mutex> lock;
  if (session) lock = std::unique_lock(session->mutex);
  for (const uint64_t address : addresses) {
    Frame frame;
    if (session && address > 0) {
      // Return addresses point after the call: look up the call instruction itself.
      const Dwarf_Addr lookup = address - 1;
      if (Dwfl_Module* module = dwfl_addrmodule(session->dwfl, lookup)) {
        Dwarf_Addr start = 0;
        const char* file = nullptr;
        const char* name =
            dwfl_module_info(module, nullptr, &start, nullptr, nullptr, nullptr, &file, nullptr);
        const char* path = file != nullptr ? file : name;
        if (path != nullptr) frame.module = std::filesystem::path(path).filename().string();
        GElf_Off offset = 0;
        GElf_Sym symbol{};
        const char* function =
            dwfl_module_addrinfo(module, lookup, &offset, &symbol, nullptr, nullptr, nullptr);
        if (function != nullptr) {
          frame.function = function;
          frame.offset = offset + 1;  // of the return address, as the stack holds it
        } else {
          frame.offset = address - start;
        }
      }
    }
    frames.push_back(std::move(frame));
  }
  return frames;
}

void Symbolizer::Retain(const std::vector<uint32_t>& live) {
  std::lock_guard lock(mutex_);
  // A session in use elsewhere stays alive through its shared_ptr until that use ends.
  std::erase_if(sessions_, [&](const auto& entry) {
    return std::find(live.begin(), live.end(), entry.first) == live.end();
  });
}

}  // namespace rdmascope::sys
