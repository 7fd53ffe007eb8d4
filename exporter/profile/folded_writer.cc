#include "profile/folded_writer.h"

#include "profile/stacks.h"

namespace rdmascope::profile {

uint64_t StackValue(const RegistrationStack& stack, FoldedValue value) {
  switch (value) {
    case FoldedValue::kOutstandingBytes:
      return stack.outstanding_bytes;
    case FoldedValue::kRegisteredBytes:
      return stack.registered_bytes;
    case FoldedValue::kOutstandingRegions:
      return stack.outstanding_regions;
    case FoldedValue::kRegistrations:
      return stack.registrations;
  }
  return 0;
}

namespace {

// ';' separates frames and the line ends at '\n': a name holding them (a hostile or odd
// symbol) would split the stack or the line, so they become '_'.
std::string FoldedFrame(const Frame& frame) {
  std::string name = FrameName(frame);
  for (char& c : name) {
    if (c == ';' || c == '\n' || c == '\r') c = '_';
  }
  return name;
}

}  // namespace

const char* FoldedValueName(FoldedValue value) {
  switch (value) {
    case FoldedValue::kOutstandingBytes:
      return "outstanding_bytes";
    case FoldedValue::kRegisteredBytes:
      return "registered_bytes";
    case FoldedValue::kOutstandingRegions:
      return "outstanding_regions";
    case FoldedValue::kRegistrations:
      return "registrations";
  }
  return "unknown";
}

std::string FoldedStacks(const ProfileData& data, FoldedValue value) {
  std::string out;
  for (const RegistrationStack& stack : StacksWithRemainder(data)) {
    const uint64_t count = StackValue(stack, value);
    if (count == 0) continue;
    std::string line;
    // Frames are innermost first; folded lines read from the outermost caller.
    for (auto frame = stack.frames.rbegin(); frame != stack.frames.rend(); ++frame) {
      if (!line.empty()) line += ';';
      line += FoldedFrame(*frame);
    }
    if (line.empty()) line = "??";
    out += line + " " + std::to_string(count) + "\n";
  }
  return out;
}

}  // namespace rdmascope::profile
