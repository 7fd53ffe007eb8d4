#include "profile/html_text.h"

#include <cmath>
#include <cstdio>

#include "core/metric_set.h"

namespace rdmascope::profile {
namespace {

std::string Number(double value) {
  char buffer[64];
  // Whole numbers (counts, entries) in full: 123456, not 1.235e+05.
  const bool whole = std::fabs(value) < 1e15 && value == std::floor(value);
  std::snprintf(buffer, sizeof buffer, whole ? "%.0f" : "%.4g", value);
  return buffer;
}

// Scales by `base` through `units` (the first is the unscaled one).
std::string Scaled(double value, double base, std::initializer_list<const char*> units,
                   std::string_view suffix) {
  const char* unit = *units.begin();
  for (const char* next : units) {
    unit = next;
    if (std::fabs(value) < base || next == *(units.end() - 1)) break;
    value /= base;
  }
  return Number(value) + " " + unit + std::string(suffix);
}

}  // namespace

std::string FormatValue(double value, std::string_view unit) {
  if (!std::isfinite(value)) return "not measured";
  if (unit == "bytes") return Scaled(value, 1024, {"B", "KiB", "MiB", "GiB", "TiB", "PiB"}, "");
  if (unit == "bytes_per_second") {
    return Scaled(value, 1024, {"B", "KiB", "MiB", "GiB", "TiB", "PiB"}, "/s");
  }
  if (unit == "ns") return Scaled(value, 1000, {"ns", "µs", "ms", "s"}, "");
  if (unit == "seconds") return Number(value) + " s";
  if (unit.empty() || unit == "count" || unit == "entries") return Number(value);
  return Number(value) + " " + std::string(unit);
}

std::string FormatOptional(const std::optional<double>& value, std::string_view unit) {
  return value ? FormatValue(*value, unit) : "not measured";
}

}  // namespace rdmascope::profile
