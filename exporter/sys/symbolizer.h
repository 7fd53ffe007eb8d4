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

// A frame as it may be shown to anyone: names and offsets, never an absolute address (that
// would reveal the process's address-space layout).
struct Frame {
  std::string function;  // empty when unknown
  uint64_t offset = 0;   // from the function's start, or from the module's when unknown
  std::string module;    // file name of the module (no directory), empty when unknown

  // "function+0x1c", "libfoo.so.1+0x2a40" (no symbol), or "??" (no module either).
  std::string Describe() const;
};

class Symbolizer {
 public:
  Symbolizer() = default;
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

  // Return addresses of one stack, innermost first. Thread-safe; slow work (reading the
  // process's maps and ELF files) is done outside the lock Retain() takes, so that a scrape
  // calling Retain() never waits for a symbolisation.
  std::vector<Frame> Symbolize(uint32_t pid, const std::vector<uint64_t>& return_addresses);
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
