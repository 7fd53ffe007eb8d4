// `rdmascope doctor --prometheus URL`: doctor's checks on every host a Prometheus scrapes,
// each fed from instant queries (doctor/prometheus_snapshots.h) instead of a local collection:
// the same check code over a snapshot per instance, counter rates between two evaluation
// times --window apart. Every finding has the instance in its scope.
#pragma once

#include <optional>
#include <string>

#include "cli/http_get.h"
#include "doctor/options.h"

namespace rdmascope {

// The matchers every query carries: --prometheus.selector (with or without its braces) and
// --prometheus.job; "" for none. An unbalanced selector is an error.
std::string PrometheusMatchers(const std::string& selector, const std::string& job);

// Percent-encodes a query parameter's value (RFC 3986 unreserved characters kept).
std::string UrlEncode(const std::string& text);

// --prometheus.time: Unix seconds ("1733400000.5") or RFC 3339 ("2026-12-05T10:00:00Z",
// "2026-12-05T11:00:00.250+01:00"), as Prometheus' API takes `time`; nullopt when it is neither.
std::optional<double> ParseEvaluationTime(const std::string& text);

// 0-2 as doctor's exit codes; 3 when the Prometheus could not be read (down, slow, an error
// answer, no rdmascope series for the selector), with the reason logged.
int RunPrometheusDoctor(const doctor::DoctorOptions& options);

}  // namespace rdmascope
