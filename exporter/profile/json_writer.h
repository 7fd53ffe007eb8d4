// profile.json: every field of ProfileData (docs/profile.md describes the schema), with
// schema_version; what was not measured is null, never 0.
#pragma once

#include <ostream>

#include "profile/profile_data.h"

namespace rdmascope::profile {

void WriteProfileJson(const ProfileData& data, std::ostream& out);

}  // namespace rdmascope::profile
