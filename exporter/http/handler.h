// What each request gets, independent of the HTTP library: the exposition at the telemetry
// path, the landing page at "/", the runbook at /runbook, /-/healthy and /-/ready, the
// collectors' JSON debug routes, 405 with Allow for other methods, 404 elsewhere. The server
// (server.cc) only moves bytes.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/registry.h>
#include <prometheus/summary.h>

#include <atomic>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/collector.h"
#include "core/collector_runner.h"

namespace rdmascope {

inline constexpr std::string_view kExpositionContentType =
    "text/plain; version=0.0.4; charset=utf-8";

// Liveness and readiness, Prometheus's paths: answered without basic auth (Kubernetes probes
// carry no credentials), so they say nothing but that the server answers.
inline constexpr std::string_view kHealthyPath = "/-/healthy";
inline constexpr std::string_view kReadyPath = "/-/ready";
inline bool IsHealthPath(std::string_view path) {
  return path == kHealthyPath || path == kReadyPath;
}

// docs/runbook.md, rendered when the binary was built: the rules' runbook_url points here
// (<base URL>/runbook#<alert anchor>). Behind basic auth like every page but the health paths.
// "/runbook/" redirects here, so a base URL written with a trailing slash still lands.
inline constexpr std::string_view kRunbookPath = "/runbook";

struct HttpRequest {
  std::string_view method;
  std::string_view path;             // decoded, without the query string
  std::string query;                 // "key=value&..." (values decoded), for debug routes
  std::string_view accept_encoding;  // the Accept-Encoding header, empty if absent
  std::string_view accept;           // the Accept header, empty if absent
};

struct HttpReply {
  unsigned status = 200;
  std::vector<std::pair<std::string, std::string>> headers;  // Content-Type included
  std::string body;  // HEAD: the server sends the headers (and Content-Length) only
};

// Whether an Accept header asks for HTML before JSON (a browser's does).
bool PrefersHtml(std::string_view accept);

// `routes`: the debug pages the collectors serve, linked when present.
std::string RenderLandingPage(const CollectorRunner& runner, std::string_view telemetry_path,
                              const DebugRoutes& routes = {});

class HttpHandler {
 public:
  // max_requests: scrapes of the telemetry path running at once at most
  // (--web.max-requests, node_exporter's); past it a scrape gets 503 at once. 0: no limit.
  // Costly requests count against it too (AdmitCostly).
  HttpHandler(std::shared_ptr<CollectorRunner> runner, std::string telemetry_path,
              DebugRoutes routes, int max_requests = 0);

  // Never throws: a failure is a 500 with its reason. A debug route's JSON is served with
  // DEL and C1 controls escaped too (EscapeJsonControls): it holds names tenants choose.
  HttpReply Handle(const HttpRequest& request) const;

  // Whether `request` is a GET of a debug route (/doctor, /doctor.html, /debug/*): one that
  // may collect or wait, which the server runs on its slow lane (http/slow_lane.h) instead
  // of on a libmicrohttpd thread.
  bool IsCostly(const HttpRequest& request) const;
  // Admits a costly request: a token whose destruction frees its slot, or null with `refusal`
  // set to the 503 that refuses it. Costly requests count against --web.max-requests with the
  // scrapes in flight, and kMaxCostlyInFlight bounds them alone; a scrape is refused only when
  // max_requests scrapes are in flight, whatever the costly ones: they cannot starve /metrics.
  std::shared_ptr<void> AdmitCostly(HttpReply& refusal) const;
  // Costly requests running or waiting for the lane at most.
  static constexpr int kMaxCostlyInFlight = 16;

  // The answer to a request past the web config's rate_limit, counted: Go's
  // http.Error(w, "Too Many Requests", 429), no Retry-After (exporter-toolkit sends none).
  HttpReply RejectRateLimited() const;

 private:
  HttpReply Metrics(const HttpRequest& request) const;
  // The 503 of a scrape past max_requests_, counted and logged (once a minute at most).
  HttpReply RejectScrape() const;
  // The 503 of a costly request past its limits, counted under `counter`.
  HttpReply RejectCostly(prometheus::Counter& counter, std::string why) const;

  std::shared_ptr<CollectorRunner> runner_;
  std::string telemetry_path_;
  DebugRoutes routes_;
  // Built once: the runbook and the version do not change while serving.
  std::string runbook_page_;
  // prometheus-cpp's Exposer exported these three about its own serving; kept under the same
  // names and meanings so that dashboards built on them keep working.
  std::shared_ptr<prometheus::Registry> serving_metrics_;
  prometheus::Counter& bytes_transferred_;
  prometheus::Counter& scrapes_;
  prometheus::Summary& latencies_;
  // rdmascope_http_requests_rejected_total{reason="max_requests"} and {reason="rate_limit"}
  prometheus::Family<prometheus::Counter>& rejected_;
  prometheus::Counter& rejected_max_requests_;
  prometheus::Counter& rejected_rate_limit_;
  // {reason="costly_requests"}: a debug route past kMaxCostlyInFlight
  prometheus::Counter& rejected_costly_;
  const int max_requests_;
  mutable std::atomic<int> scrapes_in_flight_{0};
  mutable std::atomic<int> costly_in_flight_{0};
  mutable std::atomic<int64_t> last_reject_log_minute_{-1};
  // The last exposition's size: the next one's reservation.
  mutable std::atomic<size_t> last_text_bytes_{0};
};

}  // namespace rdmascope
