// The summary `rdmascope profile` prints when it ends: what the report holds, in a few lines.
#pragma once

#include <filesystem>
#include <string>

#include "profile/profile_data.h"

namespace rdmascope::profile {

// Every name in it is the profiled program's or the host's (comm, frames, devices, notes):
// escaped (core/terminal_text.h), never raw to the terminal. `output` is where the files are.
std::string Summary(const ProfileData& data, const std::filesystem::path& output);

}  // namespace rdmascope::profile
