// How `capture` and `--replay` configure the collectors (docs/capture.md): in step with the
// samples, and for a replay only those the capture recorded.
#pragma once

#include <string>
#include <vector>

#include "collectors/config.h"

namespace rdmascope {

// Every collector runs under `capture` and `--replay` (format 1 records every source). What
// differs from `serve`: the readings a collector keeps between collections (ethtool's settings,
// the container runtime's and the kubelet's answers, the occupancy collector's /proc walks, the
// mr collector's uverbs holders) are taken at each collection, so that each sample holds the
// readings its series were made from and a replay's scrapes, at other times than the capture's
// samples, read the same.
void ConfigureForCapture(CollectorsConfig& config);

// A replay runs only the collectors the capture recorded (its index's "collectors_replayed";
// `recorded` empty: the index lists none, and nothing is turned off): one that was not has
// no bytes to read, and would report the host's sources missing where they were only not
// asked. Each one turned off is logged.
void KeepRecordedCollectors(CollectorsConfig& config, const std::vector<std::string>& recorded);

// Both, for `--replay` (serve, check, doctor): as `capture` configures them, and only what
// the capture recorded.
void ConfigureForReplay(CollectorsConfig& config, const std::vector<std::string>& recorded);

}  // namespace rdmascope
