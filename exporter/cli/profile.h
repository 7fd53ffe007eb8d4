// `rdmascope profile`: a time-bounded profile of one RDMA process, launched under the probes
// and the preload library (-- COMMAND ARGS...) or attached to (--pid). The collectors are the
// ones `serve` runs (same flags); the session (profile/profile_session.h) samples them, the
// writers (profile/*_writer.h, html_report.h) produce the files. docs/profile.md.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "cli/serve_config.h"

namespace rdmascope {

struct ProfileOptions {
  uint64_t duration_ns = 30'000'000'000ULL;
  uint64_t interval_ns = 1'000'000'000ULL;
  std::filesystem::path output = "rdmascope-profile";
  std::string preload;  // --preload PATH; empty: beside the executable, else the install dir
  std::optional<uint32_t> pid;
  std::vector<std::string> command;
  bool quiet = false;
};

// Registers --duration, --output, --interval, --preload, --pid, --quiet and the command.
void AddProfileFlags(CLI::App& profile, ProfileOptions& options);

// After parsing: exactly one of --pid and a command. Throws CLI::ValidationError.
void FinishProfileOptions(const ProfileOptions& options);

// The preload library to use: `flag` if given, else librdmascope_preload.so beside the
// executable (the build tree's preload/) or in the installed library directory. nullopt
// (with `why` set) when none exists.
std::optional<std::filesystem::path> FindPreload(const std::string& flag,
                                                 const std::filesystem::path& executable,
                                                 std::string& why);

// Returns 0 when the report was written, 1 when the profile could not run or write it.
int RunProfile(ServeConfig config, const ProfileOptions& options);

}  // namespace rdmascope
