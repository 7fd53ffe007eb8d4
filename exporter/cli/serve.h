#pragma once

#include <vector>

#include "cli/serve_config.h"
#include "core/collector_runner.h"

namespace rdmascope {

// The enabled collectors, constructed as `serve` runs them (probes attached, counters
// opened); `doctor` runs the same ones. Throws when --probe.strict and a probe set failed.
std::vector<NamedCollector> BuildCollectors(const ServeConfig& config);

// Runs the exporter until SIGINT/SIGTERM. Returns the process exit code.
int RunServe(const ServeConfig& config);

// `rdmascope check`: builds the enabled collectors as `serve` would (attaching probes, opening
// counters), collects once, prints each collector's state and exits: 0 if none failed (and,
// with --probe.strict, every probe set attached), 1 otherwise.
int RunCheck(const ServeConfig& config);

}  // namespace rdmascope
