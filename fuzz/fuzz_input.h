// Helpers shared by the fuzz targets: carving one input into the parts a parser takes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rdmascope::fuzz {

// Consumes the input from the front: a selector byte, fixed-width integers, then the rest.
class Input {
 public:
  Input(const uint8_t* data, size_t size) : bytes_(data, size) {}
  uint8_t Byte() {
    if (bytes_.empty()) return 0;
    const uint8_t b = bytes_[0];
    bytes_ = bytes_.subspan(1);
    return b;
  }
  uint32_t U32() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v = v << 8 | Byte();
    return v;
  }
  uint64_t U64() { return uint64_t{U32()} << 32 | U32(); }
  std::span<const uint8_t> Rest() const { return bytes_; }
  std::string_view RestText() const {
    return {reinterpret_cast<const char*>(bytes_.data()), bytes_.size()};
  }

 private:
  std::span<const uint8_t> bytes_;
};

// The input cut at '\n' (a last line without one included), for parsers fed lists of values.
inline std::vector<std::string> Lines(std::string_view text) {
  std::vector<std::string> lines;
  while (!text.empty()) {
    const size_t newline = text.find('\n');
    lines.emplace_back(text.substr(0, newline));
    if (newline == std::string_view::npos) break;
    text.remove_prefix(newline + 1);
  }
  return lines;
}

}  // namespace rdmascope::fuzz
