#include "core/duration.h"

#include <utility>

namespace rdmascope {

std::optional<uint64_t> ParseDurationNs(std::string_view text) {
  // Units as Prometheus accepts them, longest first so that "ms" is not read as "m".
  static constexpr std::pair<std::string_view, uint64_t> kUnits[] = {
      {"ms", 1000000ULL},         {"s", 1000000000ULL},     {"m", 60000000000ULL},
      {"h", 3600000000000ULL},    {"d", 86400000000000ULL}, {"w", 604800000000000ULL},
      {"y", 31536000000000000ULL}};
  if (text.empty()) return std::nullopt;
  uint64_t total = 0;
  while (!text.empty()) {
    size_t digits = 0;
    while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
    if (digits == 0 || digits > 12) return std::nullopt;
    uint64_t number = 0;
    for (size_t i = 0; i < digits; ++i) number = number * 10 + static_cast<uint64_t>(text[i] - '0');
    text.remove_prefix(digits);
    bool matched = false;
    for (const auto& [unit, ns] : kUnits) {
      if (text.starts_with(unit)) {
        if (number > UINT64_MAX / ns || total > UINT64_MAX - number * ns) return std::nullopt;
        total += number * ns;
        text.remove_prefix(unit.size());
        matched = true;
        break;
      }
    }
    if (!matched) return std::nullopt;
  }
  return total;
}

}  // namespace rdmascope
