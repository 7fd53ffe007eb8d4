// doctor's thresholds as URL query parameters: serve's /doctor accepts the --doctor.* flags'
// names without the prefix (/doctor?cq-ratio-warn=2&nodes=64&flows=8&rtt=150us), and
// `doctor --exporter` sends the thresholds it was given, so that a report made by the exporter
// uses the same figures as one made here. docs/doctor.md, "History mode".
#pragma once

#include <cstdint>
#include <expected>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "doctor/options.h"
#include "doctor/report.h"

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

// --- The server's side: serve's /doctor (doctor/service.h) --------------------------------

// A live window (?window=D) is at most this long: the request waits for it.
inline constexpr double kMaxLiveWindowSeconds = 10;

struct DoctorQuery {
  std::optional<uint64_t> window_ns;  // ?window=D; absent: rates over the kept history
  DoctorOptions options;              // the defaults, with the query's thresholds applied
};

// /doctor's query: window=D and thresholds, named as the --doctor.* flags without the prefix.
// Throws BadRequest (core/collector.h) saying what is wrong.
DoctorQuery ParseDoctorQuery(std::string_view query);

// --- The client's side: `doctor` asking a running exporter --------------------------------

// The address `doctor` tries when --exporter is not given: serve's default listen address.
inline constexpr const char* kDefaultExporterUrl = "http://127.0.0.1:9879";  // kDefaultPort

// The report of the exporter --exporter names (or root's rdmascope on the default address, for
// --exporter=auto), with the thresholds of `options` sent along; nullopt, with the reason
// logged, to collect on this host instead. Throws when --exporter.* credentials cannot be read.
std::optional<ParsedReport> AskExporter(const DoctorOptions& options);

}  // namespace rdmascope::doctor
