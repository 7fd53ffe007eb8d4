// The flags of `rdmascope serve`, in node_exporter's style (--web.listen-address,
// --path.sysfs, --collector.NAME / --no-collector.NAME, --collector.NAME.option).
#pragma once

#include <CLI/CLI.hpp>

#include "cli/serve_config.h"

namespace rdmascope {

// Registers the flags on `serve`, writing into `config`.
void AddServeFlags(CLI::App& serve, ServeConfig& config);

// Checks what CLI11 cannot (regexes compile, paths exist); throws CLI::ValidationError.
void ValidateServeConfig(const ServeConfig& config);

}  // namespace rdmascope
