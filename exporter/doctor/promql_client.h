// Prometheus' HTTP query API as doctor asks it (`doctor --prometheus`): the transport behind a
// seam (libcurl in use, recorded answers in the unit tests), the query targets, and the flags'
// parsers. docs/doctor.md, "Fleet mode".
#pragma once

#include <chrono>
#include <expected>
#include <memory>
#include <optional>
#include <string>

#include "doctor/http_get.h"

namespace rdmascope::doctor {

// One answer, as received: Prometheus answers its errors (400 bad query, 422 execution, 503
// timeout) as JSON too, so a status other than 200 still has a body to read.
struct PromqlReply {
  int status = 0;
  std::string body;
};

class PromqlTransport {
 public:
  virtual ~PromqlTransport() = default;
  // GETs `target` (path and query, "/api/v1/query?..."); called from several threads at once.
  // An error: no answer at all (unreachable, timed out, too large), saying why.
  virtual std::expected<PromqlReply, std::string> Get(const std::string& target) = 0;
};

// The transport `doctor --prometheus URL` uses: HttpGet with the --prometheus.* client options
// and timeout, answers of at most 1 GiB (decompressed).
std::unique_ptr<PromqlTransport> HttpPromqlTransport(HttpUrl url, HttpClientOptions client,
                                                     std::chrono::milliseconds timeout);

// The API target of an instant query of `promql` at `time`, or (start > 0) of a range query from
// `start` to `time`, `step` seconds apart. Times in seconds, to the millisecond.
std::string QueryTarget(const std::string& promql, double time, double start = 0, double step = 0);

// Percent-encodes everything but RFC 3986's unreserved characters.
std::string UrlEncode(const std::string& text);

// --prometheus.time: a Unix time in seconds or RFC 3339 (with its offset); nullopt otherwise.
std::optional<double> ParseEvaluationTime(const std::string& text);

// The label matchers every query carries: --prometheus.selector (braces optional) and, when
// given, job="JOB". Throws std::invalid_argument on unbalanced braces.
std::string PrometheusMatchers(const std::string& selector, const std::string& job);

}  // namespace rdmascope::doctor
