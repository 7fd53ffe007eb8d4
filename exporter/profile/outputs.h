// What `rdmascope profile` writes: profile.pb.gz, profile.json, the folded stacks and
// profile.html, into a directory that may be under /tmp (profile/output_dir.h).
#pragma once

#include <filesystem>

#include "profile/profile_data.h"

namespace rdmascope::profile {

// Writes every output. Without librdmascope_pprof.so there is no profile.pb.gz (a stale one is
// removed) and a note in `data` says why; the others are written.
void WriteOutputs(ProfileData& data, const std::filesystem::path& path);

}  // namespace rdmascope::profile
