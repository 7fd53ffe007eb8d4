// google/pprof's profile.proto (perftools.profiles.Profile), gzipped: what `go tool pprof`,
// Pyroscope and Parca open. Sample types, in this order: outstanding_bytes/bytes (the default),
// outstanding_regions/count, registrations/count, registered_bytes/bytes; one sample per
// registration stack (plus the "[no call stack]" remainder, stacks.h).
#pragma once

#include <string>

#include "profile/profile_data.h"

namespace rdmascope::profile {

std::string EncodePprof(const ProfileData& data);

}  // namespace rdmascope::profile
