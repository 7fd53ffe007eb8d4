#pragma once

#include "cli/serve_config.h"

namespace rdmascope {

// Runs the exporter until SIGINT/SIGTERM. Returns the process exit code.
int RunServe(const ServeConfig& config);

// `rdmascope check`: builds the enabled collectors as `serve` would (attaching probes, opening
// counters), collects once, prints each collector's state and exits: 0 if none failed (and,
// with --probe.strict, every probe set attached), 1 otherwise.
int RunCheck(ServeConfig config);

}  // namespace rdmascope
