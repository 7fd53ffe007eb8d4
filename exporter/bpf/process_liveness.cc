#include "bpf/process_liveness.h"

#include <unistd.h>

#include <cerrno>

#include "core/process_metrics.h"
#include "core/sysfs.h"

namespace rdmascope {

Liveness ProcessLiveness(const std::filesystem::path& procfs, uint32_t pid,
                         uint64_t start_boottime_ns, uint64_t ns_per_tick) {
  // Read to EOF (sysfs::ReadFileChecked, which the fault seam reaches): one read(2) may return
  // part of the line, whose cut starttime must not pass for another process's.
  const auto stat = sysfs::ReadFileChecked(procfs / std::to_string(pid) / "stat", 16 << 10);
  if (!stat) {
    // ENOENT: no such pid; ESRCH: the task was reaped between open and read.
    return stat.error() == ENOENT || stat.error() == ESRCH ? Liveness::kGone : Liveness::kUnknown;
  }
  const auto ticks = ParseStartTicks(*stat);
  if (!ticks || ns_per_tick == 0) return Liveness::kUnknown;
  // /proc prints nsec_to_clock_t(start_boottime): the same truncating division.
  return *ticks == start_boottime_ns / ns_per_tick ? Liveness::kAlive : Liveness::kGone;
}

}  // namespace rdmascope
