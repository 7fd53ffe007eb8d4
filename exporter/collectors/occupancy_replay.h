// The replaying half of the preload stats directory's capture (collectors/occupancy_capture.h
// has the format): a capture's files answer every read, and the host is never asked (no lock,
// no `.readers`, no unlink, no open outside the capture). Each file is hostile input: facts
// that are not what the recording half writes (collectors/occupancy_facts.h), or that the
// bytes beside them contradict, refuse that stats file (counted, one warning).
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "collectors/occupancy_source.h"

namespace rdmascope {

// The stats directory at `rel` in the replayed capture's samples (nullopt: a directory that
// was no path of the capture's layout, so nothing of it is there); other processes' maps and
// namespaces through `procfs`, which the capture answers (core/sysfs).
std::unique_ptr<StatsSource> MakeReplayStatsSource(std::optional<std::string> rel,
                                                   const std::filesystem::path& procfs);

}  // namespace rdmascope
