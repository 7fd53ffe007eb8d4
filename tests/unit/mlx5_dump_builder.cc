#include "unit/mlx5_dump_builder.h"

namespace rdmascope::testing {
namespace {

constexpr uint16_t kInfoType = 0xfffc;  // any fixed types: the decoder does not rely on them
constexpr uint16_t kCommandType = 0xfffa;
constexpr uint16_t kTerminateType = 0xfffb;
constexpr uint16_t kQueryCqType = 0x1203;  // firmware-assigned, learnt from the command segment

void Put32(std::vector<uint8_t>& out, uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(value >> shift));
}

// Sets a big-endian bit field like MLX5_SET in a word-aligned buffer.
void Set(std::vector<uint8_t>& bytes, size_t base, uint32_t bit, uint32_t size, uint32_t value) {
  const size_t at = base + bit / 32 * 4;
  if (at + 4 > bytes.size()) return;  // a deliberately short segment: the field is cut off
  uint32_t word = (uint32_t{bytes[at]} << 24) | (uint32_t{bytes[at + 1]} << 16) |
                  (uint32_t{bytes[at + 2]} << 8) | bytes[at + 3];
  const uint32_t shift = 32 - bit % 32 - size;
  const uint32_t mask = (size == 32 ? 0xffffffffu : (1u << size) - 1) << shift;
  word = (word & ~mask) | ((value << shift) & mask);
  for (int i = 0; i < 4; ++i) bytes[at + i] = static_cast<uint8_t>(word >> (24 - 8 * i));
}

}  // namespace

std::vector<uint8_t> Build(const CqDump& d) {
  std::vector<uint8_t> out;
  Put32(out, (4u << 16) | kInfoType);  // info segment: version words
  Put32(out, 1);
  Put32(out, 0);
  Put32(out, 0);
  if (d.with_command) {
    Put32(out, (5u << 16) | kCommandType);
    Put32(out, (uint32_t{kQueryCqType} << 16) | 0 /* vhca_id */);
    Put32(out, d.cqn);  // index1
    Put32(out, 0);      // index2
    Put32(out, (1u << 16) | 0);
  }
  const size_t data = out.size();
  Put32(out, (static_cast<uint32_t>(d.payload_words + 1) << 16) | kQueryCqType);
  out.resize(out.size() + d.payload_words * 4, 0);
  const size_t cqc = data + 4 + 16;
  Set(out, cqc, 0x63, 5, d.log_size);
  Set(out, cqc, 0x148, 24, d.consumer);
  Set(out, cqc, 0x168, 24, d.producer);
  Set(out, cqc, 0x14, 4, d.state);
  Set(out, cqc, 0x100 + 8, 24, 0xabcdef);  // last_notified_index: must not be mistaken
  Put32(out, (1u << 16) | kTerminateType);
  return out;
}

}  // namespace rdmascope::testing
