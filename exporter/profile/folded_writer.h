// Folded stacks (`outermost;...;innermost value`, one line per stack): the input of Brendan
// Gregg's flamegraph.pl and of speedscope. One file per value, since the format has one.
#pragma once

#include <string>

#include "profile/profile_data.h"

namespace rdmascope::profile {

enum class FoldedValue { kOutstandingBytes, kRegisteredBytes, kOutstandingRegions, kRegistrations };

uint64_t StackValue(const RegistrationStack& stack, FoldedValue value);

// "outstanding_bytes", ...: the file name stem and the pprof sample type of the same value.
const char* FoldedValueName(FoldedValue value);

// Stacks with a zero value are left out (they add nothing to a flame graph); the values of the
// lines sum to the MR total of that value (see stacks.h).
std::string FoldedStacks(const ProfileData& data, FoldedValue value);

}  // namespace rdmascope::profile
