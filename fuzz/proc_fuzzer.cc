// /proc files (the same bytes through each parser): /proc/<pid>/status VmPin, /proc/<pid>/limits
// "Max locked memory", /proc/meminfo MemTotal (collectors/pinned_memory), /proc/<pid>/stat
// (core/process_metrics: comm with spaces and parentheses, fields by number).
#include <cmath>
#include <cstdlib>

#include "collectors/pinned_memory.h"
#include "core/process_metrics.h"
#include "fuzz_input.h"

using namespace rdmascope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input input(data, size);
  const size_t field = input.Byte();
  const std::string_view text = input.RestText();
  ParseVmPinBytes(text);
  ParseLockedMemoryLimit(text);
  ParseMemTotalBytes(text);
  ParseStartTicks(text);
  ParseStatField(text, field);
  if (const auto stat = ParseProcessStat(text, 1.7e9, 100, 4096)) {
    if (!std::isfinite(stat->cpu_seconds) || stat->cpu_seconds < 0 ||
        !std::isfinite(stat->start_time_seconds)) {
      std::abort();
    }
  }
  return 0;
}
