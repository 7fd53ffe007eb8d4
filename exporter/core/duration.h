// Prometheus-style durations, as flags and query parameters take them.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace rdmascope {

// Prometheus-style durations: "90s", "10m", "1h30m", "250ms", "2d". nullopt if malformed.
std::optional<uint64_t> ParseDurationNs(std::string_view text);

}  // namespace rdmascope
