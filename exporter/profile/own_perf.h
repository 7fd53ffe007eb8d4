// The profiled process's own perf events: the software ones count on any host, the hardware
// ones need a PMU (without one they are reported unavailable with the reason, never 0).
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <vector>

#include "sys/perf_events.h"

namespace rdmascope::profile {

struct OwnPerf {
  std::optional<sys::ProcessPerfCounters> counters;
  std::vector<sys::ProcessPerfCounters::Event> unopened;  // not resolved, or no process
};

// Counts on every thread `pid` has now and, inherited, on the threads they create later
// (sys::ProcessPerfCounters, the perf collector's code path).
OwnPerf OpenOwnPerf(pid_t pid, const std::filesystem::path& sysfs,
                    const std::filesystem::path& procfs);

// Every event: the counted ones' values, the others with why they are not counted.
std::vector<sys::ProcessPerfCounters::Event> ReadOwnPerf(const OwnPerf& own);

}  // namespace rdmascope::profile
