// The preload stats directory behind the host boundary of core/capture.h (docs/capture.md
// "Occupancy"). Live, the directory is read as always (LiveStatsSource). Recording, the same
// reads, without the `.readers` lock and without deleting a stale file (a capture takes nothing
// from the exporter that may run beside it), and each answer is written into the sample under
// the directory's host path:
//
//   run/rdmascope/                      the listing
//   run/rdmascope.stat.json             the directory's owner and mode, the capturing euid
//   run/rdmascope/NAME.occ              the bytes read (a file of another size: its header)
//   run/rdmascope/NAME.occ.stat.json    lstat, the open's result, fstat, the liveness lock
//   proc/PID/maps                       the lines of PID's maps naming a stats file listed
//
// The facts' format is collectors/occupancy_facts.h. Replaying (collectors/occupancy_replay.h),
// those files answer and the host is never asked: no lock, no `.readers`, no unlink, no open
// outside the capture. Every file is hostile input: a facts file that is not what this writes,
// or that the bytes beside it contradict, refuses that stats file (counted in
// rdmascope_occupancy_files_skipped_total, one warning), never a made-up figure.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "collectors/occupancy_source.h"

namespace rdmascope {

// The stats directory `dir` as this process's boundary has it: live (the host, its lock and
// deletions; other processes read through `privileged`), recorded, or replayed.
std::unique_ptr<StatsSource> MakeStatsSource(const std::filesystem::path& dir,
                                             const std::filesystem::path& procfs,
                                             std::shared_ptr<sys::PrivilegedProcfs> privileged);

}  // namespace rdmascope
