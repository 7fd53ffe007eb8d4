#include "profile/stacks.h"

#include <cinttypes>
#include <cstdio>

#include "core/metric_set.h"

namespace rdmascope::profile {
namespace {

// What the totals hold beyond the stacks' sum; 0 when the stacks already cover it (a total
// below the sum is inconsistent data, and inventing a negative remainder would hide it less
// well than showing the stacks as recorded).
uint64_t Remainder(uint64_t total, uint64_t stacks_sum) {
  return total > stacks_sum ? total - stacks_sum : 0;
}

}  // namespace

std::vector<RegistrationStack> StacksWithRemainder(const ProfileData& data) {
  std::vector<RegistrationStack> stacks = data.stacks;
  RegistrationStack sum;
  for (const RegistrationStack& stack : stacks) {
    sum.outstanding_regions += stack.outstanding_regions;
    sum.outstanding_bytes += stack.outstanding_bytes;
    sum.registrations += stack.registrations;
    sum.registered_bytes += stack.registered_bytes;
  }
  RegistrationStack rest;
  rest.outstanding_regions = Remainder(data.mr.outstanding_regions, sum.outstanding_regions);
  rest.outstanding_bytes = Remainder(data.mr.outstanding_bytes, sum.outstanding_bytes);
  rest.registrations = Remainder(data.mr.registrations, sum.registrations);
  rest.registered_bytes = Remainder(data.mr.registered_bytes, sum.registered_bytes);
  if (rest.outstanding_regions || rest.outstanding_bytes || rest.registrations ||
      rest.registered_bytes) {
    rest.frames.push_back({.function = kNoStackFunction, .module = "", .offset = 0});
    stacks.push_back(std::move(rest));
  }
  return stacks;
}

std::string FrameName(const Frame& frame) {
  if (frame.function.empty() || (frame.function == "??" && !frame.module.empty())) {
    return SanitizeUtf8(frame.module.empty() ? "??" : "[" + frame.module + "]");
  }
  return SanitizeUtf8(frame.function);
}

std::string FrameTitle(const Frame& frame) {
  if (frame.module.empty()) return frame.function;
  char offset[32];
  std::snprintf(offset, sizeof offset, "+0x%" PRIx64, frame.offset);
  return frame.function + " (" + frame.module + offset + ")";
}

}  // namespace rdmascope::profile
