// The flags of `rdmascope serve`, in node_exporter's style (--web.listen-address,
// --path.sysfs, --collector.NAME / --no-collector.NAME, --collector.NAME.option).
#pragma once

#include <CLI/CLI.hpp>
#include <span>
#include <string_view>

#include "cli/serve_config.h"

namespace rdmascope {

// Registers the flags on `serve`, writing into `config`.
void AddServeFlags(CLI::App& serve, ServeConfig& config);
// Its two groups: --web.* (the HTTP server), and the rest (paths, logging, collectors and
// their options, probes), which `doctor` shares.
void AddWebFlags(CLI::App& serve, ServeConfig& config);
void AddCollectorFlags(CLI::App& serve, ServeConfig& config);

// A collector option's first-release spelling, accepted for one more release as a hidden alias
// that logs one warning naming `new_name` (docs/configuration.md, "Renamed flags").
struct RenamedFlag {
  std::string_view old_name;
  std::string_view new_name;
};
std::span<const RenamedFlag> RenamedFlags();

// After parsing: decides which collectors run and checks what CLI11 cannot (regexes
// compile, paths exist). Throws CLI::ValidationError.
void FinishServeConfig(ServeConfig& config);

}  // namespace rdmascope
