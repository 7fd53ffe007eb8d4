#include "sys/x86_tail_jump.h"

#include <array>
#include <cstring>

namespace rdmascope::sys {
namespace {

constexpr std::array<uint8_t, 4> kEndbr64 = {0xf3, 0x0f, 0x1e, 0xfa};
constexpr uint8_t kBndPrefix = 0xf2;
// Longer than any forwarder: a few moves and a jmp.
constexpr size_t kMaxForwarderInstructions = 8;

bool StartsWith(std::span<const uint8_t> code, size_t at, std::span<const uint8_t> prefix) {
  return code.size() - at >= prefix.size() &&
         std::memcmp(code.data() + at, prefix.data(), prefix.size()) == 0;
}

int32_t Rel32(std::span<const uint8_t> code, size_t at) {
  int32_t value;
  std::memcpy(&value, code.data() + at, sizeof value);  // x86 is little-endian
  return value;
}

// Length of `mov reg, reg` (opcodes 89/8b, mod == 3, optional REX) at `at`, or 0.
size_t RegisterMoveLength(std::span<const uint8_t> code, size_t at) {
  size_t i = at;
  if (i < code.size() && (code[i] & 0xf0) == 0x40) ++i;  // REX
  if (i + 1 >= code.size() || (code[i] != 0x89 && code[i] != 0x8b)) return 0;
  if ((code[i + 1] & 0xc0) != 0xc0) return 0;  // a memory operand: not a pure shuffle
  return i + 2 - at;
}

}  // namespace

std::optional<uint64_t> TailJumpTarget(std::span<const uint8_t> code, uint64_t address) {
  size_t at = StartsWith(code, 0, kEndbr64) ? kEndbr64.size() : 0;
  for (size_t n = 0; n < kMaxForwarderInstructions && at < code.size(); ++n) {
    if (const size_t length = RegisterMoveLength(code, at); length > 0) {
      at += length;
      continue;
    }
    if (code[at] == 0xe9 && code.size() - at >= 5) {  // jmp rel32
      return address + at + 5 + static_cast<int64_t>(Rel32(code, at + 1));
    }
    if (code[at] == 0xeb && code.size() - at >= 2) {  // jmp rel8
      return address + at + 2 + static_cast<int64_t>(static_cast<int8_t>(code[at + 1]));
    }
    return std::nullopt;
  }
  return std::nullopt;
}

std::optional<uint64_t> PltGotSlot(std::span<const uint8_t> stub, uint64_t address) {
  size_t at = StartsWith(stub, 0, kEndbr64) ? kEndbr64.size() : 0;
  if (at < stub.size() && stub[at] == kBndPrefix) ++at;
  constexpr std::array<uint8_t, 2> kJmpRipIndirect = {0xff, 0x25};
  if (!StartsWith(stub, at, kJmpRipIndirect) || stub.size() - at < 6) return std::nullopt;
  return address + at + 6 + static_cast<int64_t>(Rel32(stub, at + 2));
}

}  // namespace rdmascope::sys
