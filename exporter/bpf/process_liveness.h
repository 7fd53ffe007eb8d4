// Whether the process a BPF map entry belongs to still runs: shared by the MR and verbs probes,
// which key their state by tgid and the leader's start time (task->group_leader->start_boottime).
#pragma once

#include <cstdint>
#include <filesystem>

#include "sys/image_key.h"  // NsPerClockTick

namespace rdmascope {

enum class Liveness {
  kAlive,    // /proc/PID/stat shows the same start time
  kGone,     // no such pid (ENOENT/ESRCH), or the pid now belongs to another process
  kUnknown,  // could not tell (unreadable, malformed): keep the state, try again next scrape
};

// Only kGone allows deleting a process's state: a transient failure to read /proc must not
// throw away objects of a live process for good.
Liveness ProcessLiveness(const std::filesystem::path& procfs, uint32_t pid,
                         uint64_t start_boottime_ns, uint64_t ns_per_tick);

}  // namespace rdmascope
