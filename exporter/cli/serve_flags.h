// The flags of `rdmascope serve`, in node_exporter's style (--web.listen-address,
// --path.sysfs, --collector.NAME / --no-collector.NAME, --collector.NAME.option).
#pragma once

#include <CLI/CLI.hpp>

#include "cli/serve_config.h"

namespace rdmascope {

// Registers the flags on `serve`, writing into `config`.
void AddServeFlags(CLI::App& serve, ServeConfig& config);
// Its two groups: --web.* (the HTTP server), and the rest (paths, logging, collectors and
// their options, probes), which `doctor` shares.
void AddWebFlags(CLI::App& serve, ServeConfig& config);
void AddCollectorFlags(CLI::App& serve, ServeConfig& config);

// After parsing: decides which collectors run and checks what CLI11 cannot (regexes
// compile, paths exist). Throws CLI::ValidationError.
void FinishServeConfig(ServeConfig& config);

}  // namespace rdmascope
