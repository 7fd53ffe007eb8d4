// doctor's thresholds as URL query parameters: serve's /doctor accepts the --doctor.* flags'
// names without the prefix (/doctor?cq-ratio-warn=2&nodes=64&flows=8&rtt=150us), and
// `doctor --exporter` sends the thresholds it was given, so that a report made by the exporter
// uses the same figures as one made here. docs/doctor.md, "History mode".
#pragma once

#include <expected>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "doctor/options.h"

namespace rdmascope::doctor {

// doctor's numeric thresholds: --doctor.NAME on the command line (cli/doctor.cc), NAME in
// /doctor's query. One table, so that the flags, the query parameters and what
// `doctor --exporter` sends cannot drift apart.
struct NumericThreshold {
  std::string_view name;  // the flag without --doctor.
  double DoctorOptions::*member;
  bool positive;  // 0 is not a usable value
  std::string_view help;
};
std::span<const NumericThreshold> NumericThresholds();

// The same for the integer ones (a priority, a DSCP): 0 to `max`.
struct IntegerThreshold {
  std::string_view name;
  int DoctorOptions::*member;
  int max;
  std::string_view help;
};
std::span<const IntegerThreshold> IntegerThresholds();

// "80us", "12.5us", or a Prometheus duration ("1ms", "1s") -> seconds; nullopt for anything
// else and for 0 (Prometheus durations have no microseconds, and round trips are counted in
// them).
std::optional<double> ParseRttSeconds(std::string_view text);

// Applies one query parameter to `options`. false when `name` is not a threshold (other
// parameters, such as window, are the caller's); an error for a threshold with a bad value.
std::expected<bool, std::string> ApplyThreshold(std::string_view name, std::string_view value,
                                                DoctorOptions& options);

// The thresholds of `options` that differ from the defaults, as "name=value&...", "" when none.
std::string ThresholdQuery(const DoctorOptions& options);

}  // namespace rdmascope::doctor
