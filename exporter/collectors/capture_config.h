// What a capture holds and a replay answers (docs/capture.md, "What is not recorded"): the
// collectors and sources whose bytes do not pass the host boundary of core/capture.h in
// format 1 are turned off for `capture` and for `--replay`, each with one log line, and listed
// in the capture's index as not recorded.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "collectors/config.h"

namespace rdmascope {

struct UnreplayableSource {
  std::string_view source;  // a collector's name, or "workload: container runtime"
  std::string_view why;
  bool whole_collector;  // off entirely (else only this part of the collector)
};
std::span<const UnreplayableSource> UnreplayableSources();

// Turns them off in `config` and reads the ethtool settings every collection (refresh
// interval 0: each sample holds them). `mode` names the command in the log lines. Returns the
// sources turned off among those that would have run.
std::vector<UnreplayableSource> ConfigureForCapture(CollectorsConfig& config,
                                                    std::string_view mode);

// A replay runs only the collectors the capture recorded (its index's "collectors_replayed";
// `recorded` empty: the index lists none, and nothing is turned off): one that was not has
// no bytes to read, and would report the host's sources missing where they were only not
// asked. Each one turned off is logged.
void KeepRecordedCollectors(CollectorsConfig& config, const std::vector<std::string>& recorded);

// Both, for `--replay` (serve, check, doctor): what `capture` turns off, and what the capture
// did not record.
void ConfigureForReplay(CollectorsConfig& config, const std::vector<std::string>& recorded);

}  // namespace rdmascope
