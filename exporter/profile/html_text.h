// Text for the HTML report: escaping of every string that comes from the profiled process or
// the host (comm, command line, symbols, device names), and figures with their units.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/html.h"

namespace rdmascope::profile {

using ::rdmascope::HtmlEscape;  // core/html.h

// 1536 "bytes" -> "1.5 KiB"; "bytes_per_second" -> "1.5 KiB/s"; "ns" -> "1.2 µs"; anything
// else -> the number with up to 4 significant digits and the unit.
std::string FormatValue(double value, std::string_view unit);

// FormatValue, or "not measured" for an empty optional.
std::string FormatOptional(const std::optional<double>& value, std::string_view unit);

}  // namespace rdmascope::profile
