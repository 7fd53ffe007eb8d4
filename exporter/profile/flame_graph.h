// An icicle graph (a flame graph drawn from the top: callers above callees) of registration
// stacks as inline SVG, with no script: each frame is a <g> with a <title> tooltip (function,
// module and offset, value, share of the total) and its name when it fits.
#pragma once

#include <string>
#include <vector>

#include "profile/folded_writer.h"
#include "profile/profile_data.h"

namespace rdmascope::profile {

// An <svg> element, or an empty string when no stack has a non-zero value.
std::string FlameGraphSvg(const std::vector<RegistrationStack>& stacks, FoldedValue value,
                          const std::string& title);

}  // namespace rdmascope::profile
