// Symbolises user-space addresses of live processes with elfutils' libdwfl (the library
// behind eu-stack): modules from /proc/PID/maps, names from .symtab/.dynsym (and DWARF when
// present). One Dwfl session per process, cached until the process is forgotten.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

struct Dwfl;

namespace rdmascope::sys {

struct Frame {
  uint64_t address = 0;
  std::string function;  // empty when unknown
  std::string module;    // file the address belongs to
};

class Symbolizer {
 public:
  Symbolizer() = default;
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  // Return addresses of one stack, innermost first. Thread-safe.
  std::vector<Frame> Symbolize(uint32_t pid, const std::vector<uint64_t>& return_addresses);
  // Drops the cached sessions of processes not in `live` (exited, or pid reused).
  void Retain(const std::vector<uint32_t>& live);

 private:
  Dwfl* SessionFor(uint32_t pid);

  std::mutex mutex_;
  std::map<uint32_t, Dwfl*> sessions_;
  static constexpr size_t kMaxSessions = 256;
};

}  // namespace rdmascope::sys
