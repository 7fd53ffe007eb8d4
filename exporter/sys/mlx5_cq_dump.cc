#include "sys/mlx5_cq_dump.h"

#include <bit>
#include <vector>

namespace rdmascope::sys {
namespace {

constexpr size_t kWord = 4;
constexpr size_t kCommandSegmentWords = 5;
constexpr size_t kQueryCqOutHeaderBytes = 16;  // status, syndrome, reserved_at_40[0x40]
constexpr size_t kCqcBytes = 0x200 / 8;        // through the counters we read, and dbr_addr

uint32_t Be32(std::span<const uint8_t> bytes, size_t offset) {
  return (uint32_t{bytes[offset]} << 24) | (uint32_t{bytes[offset + 1]} << 16) |
         (uint32_t{bytes[offset + 2]} << 8) | uint32_t{bytes[offset + 3]};
}

// MLX5_GET: a field at big-endian bit offset `bit` of `size` bits (within one 32-bit word).
uint32_t Field(std::span<const uint8_t> bytes, uint32_t bit, uint32_t size) {
  const uint32_t word = Be32(bytes, bit / 32 * kWord);
  const uint32_t shift = 32 - bit % 32 - size;
  return (word >> shift) & (size == 32 ? 0xffffffffu : (1u << size) - 1);
}

struct Segment {
  uint16_t type;
  std::span<const uint8_t> whole;  // header included
};

}  // namespace

std::expected<Mlx5CqState, std::string> DecodeMlx5CqDump(std::span<const uint8_t> dump,
                                                         uint32_t capacity) {
  std::vector<Segment> segments;
  for (size_t at = 0; at + kWord <= dump.size();) {
    const uint32_t header = Be32(dump, at);
    const size_t length = size_t{header >> 16} * kWord;
    if (length < kWord || at + length > dump.size()) {
      return std::unexpected("segment at byte " + std::to_string(at) + " of length " +
                             std::to_string(length) + " overruns the " +
                             std::to_string(dump.size()) + "-byte dump");
    }
    segments.push_back({static_cast<uint16_t>(header & 0xffff), dump.subspan(at, length)});
    at += length;
  }
  // The command segment names the data segment's type.
  for (size_t i = 0; i < segments.size(); ++i) {
    if (segments[i].whole.size() != kCommandSegmentWords * kWord) continue;
    const auto called = static_cast<uint16_t>(Field(segments[i].whole, 0x20, 16));
    for (size_t j = i + 1; j < segments.size(); ++j) {
      if (segments[j].type != called) continue;
      const auto payload = segments[j].whole.subspan(kWord);
      if (payload.size() < kQueryCqOutHeaderBytes + kCqcBytes) {
        return std::unexpected("CQ segment of " + std::to_string(payload.size()) +
                               " bytes, too short for query_cq_out");
      }
      const auto cqc = payload.subspan(kQueryCqOutHeaderBytes);
      Mlx5CqState state{.log_size = Field(cqc, 0x63, 5),
                        .producer_counter = Field(cqc, 0x168, 24),
                        .consumer_counter = Field(cqc, 0x148, 24),
                        .arm_state = Field(cqc, 0x14, 4),
                        .cqn = Field(segments[i].whole, 0x40, 32)};
      if (capacity + 1 == 0 || !std::has_single_bit(capacity + 1) ||
          state.log_size != static_cast<uint32_t>(std::countr_zero(capacity + 1))) {
        return std::unexpected("decoded log_cq_size " + std::to_string(state.log_size) +
                               " does not match the CQ's " + std::to_string(capacity) +
                               " entries: unknown dump layout");
      }
      return state;
    }
  }
  return std::unexpected("no command segment naming a data segment in the dump");
}

}  // namespace rdmascope::sys
