// The registration stacks every output shows (pprof, folded stacks, the HTML flame graph): the
// stacks the session recorded, plus one "[no call stack]" entry holding whatever the MR totals
// count that no recorded stack does (regions registered before a --pid attach, seen through
// restrack only; stacks the probe could not record). So each output sums to the totals.
#pragma once

#include <string>
#include <vector>

#include "profile/profile_data.h"

namespace rdmascope::profile {

inline constexpr const char* kNoStackFunction = "[no call stack]";

std::vector<RegistrationStack> StacksWithRemainder(const ProfileData& data);

// The frame's function as every output names it: valid UTF-8 (bytes that are not become
// U+FFFD), and an unknown function ("??") named by its module as perf names unknown frames
// ("[libfoo.so]"), so that unknown frames of different libraries do not merge.
std::string FrameName(const Frame& frame);

// "function (module+0x1c)" for titles and tooltips; "??" parts kept as the symbolizer gave them.
std::string FrameTitle(const Frame& frame);

}  // namespace rdmascope::profile
