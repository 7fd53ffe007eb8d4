#pragma once

#include "cli/serve_config.h"

namespace rdmascope {

// Runs the exporter until SIGINT/SIGTERM. Returns the process exit code.
int RunServe(const ServeConfig& config);

}  // namespace rdmascope
