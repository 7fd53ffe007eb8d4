#include "http/handler.h"

#include <chrono>
#include <cstdio>
#include <exception>

#include "core/capture.h"
#include "core/html.h"
#include "core/log.h"
#include "core/terminal_text.h"
#include "http/gzip.h"
#include "http/runbook_page.h"
#include "http/text_format.h"

namespace rdmascope {
namespace {

HttpReply Text(unsigned status, std::string body) {
  return {status, {{"Content-Type", "text/plain; charset=utf-8"}}, std::move(body)};
}

HttpReply MethodNotAllowed(std::string allow) {
  HttpReply reply = Text(405, "method not allowed\n");
  reply.headers.emplace_back("Allow", std::move(allow));
  return reply;
}

}  // namespace

bool PrefersHtml(std::string_view accept) {
  // Browsers list text/html first ("text/html,application/xhtml+xml,...;q=0.8"); a client that
  // names application/json before it, or only */*, wants the JSON.
  const size_t html = accept.find("text/html");
  if (html == std::string_view::npos) return false;
  const size_t json = accept.find("application/json");
  return json == std::string_view::npos || html < json;
}

std::string RenderLandingPage(const CollectorRunner& runner, std::string_view telemetry_path,
                              const DebugRoutes& routes) {
  std::string html =
      HtmlPageHead("rdmascope") + "<h1>rdmascope</h1>\n<p>RDMA observability exporter, version " +
      HtmlEscape(runner.build().version) + " (" + HtmlEscape(runner.build().revision) +
      ").</p>\n<p><a href=\"" + HtmlEscape(telemetry_path) +
      "\">Metrics</a></p>\n<p><a href=\"/doctor.html\">Doctor report</a> (<a "
      "href=\"/doctor\">JSON</a>)</p>\n"
      "<p><a href=\"" +
      std::string(kRunbookPath) +
      "\">Runbook</a>: what each alert means, how to confirm it, what to do</p>\n"
      "<p><a href=\"/-/healthy\">Health</a> and <a href=\"/-/ready\">readiness</a> for "
      "probes (no authentication)</p>\n";
  // The collectors' debug pages, where enabled.
  for (const auto& [path, what] :
       {std::pair{"/debug/workloads",
                  "Workloads (JSON): the Kubernetes pod and container, Slurm job or systemd unit "
                  "of each RDMA process, and the container runtime's state"},
        std::pair{"/debug/mr/stacks",
                  "Memory registration call sites (JSON): the code holding the most outstanding "
                  "regions, per process and workload"},
        std::pair{"/debug/links",
                  "Link events: the last carrier edges of each port, why the driver says a link "
                  "went down, the module's state and RX power then"}}) {
    if (routes.contains(path)) {
      html += "<p><a href=\"" + std::string(path) + "\">" + HtmlEscape(what) + "</a></p>\n";
    }
  }
  html +=
      "<h2>Collectors</h2>\n<table><tr><th>collector</th><th>last status</th><th>detail</th>"
      "<th>series</th><th>duration</th></tr>\n";
  for (const CollectorState& state : runner.States()) {
    const std::string css = state.health == CollectorHealth::kFailed   ? "failed"
                            : state.health == CollectorHealth::kNoData ? "no-data"
                                                                       : "ok";
    char duration[32];
    std::snprintf(duration, sizeof duration, "%.3f ms", state.duration_seconds * 1e3);
    html += "<tr class=\"" + css + "\"><td>" + HtmlEscape(state.name) + "</td><td>" +
            HealthName(state.health) + "</td><td>" + HtmlEscape(state.detail) + "</td><td>" +
            std::to_string(state.series) + "</td><td>" +
            (state.health == CollectorHealth::kNeverRun ? "" : duration) + "</td></tr>\n";
  }
  html +=
      "</table>\n<p>Status is that of the last scrape. Disabled collectors are not listed; "
      "see <code>rdmascope serve --help</code>.</p>\n";
  html += kHtmlPageTail;
  return html;
}

HttpHandler::HttpHandler(std::shared_ptr<CollectorRunner> runner, std::string telemetry_path,
                         DebugRoutes routes, int max_requests)
    : runner_(std::move(runner)),
      telemetry_path_(std::move(telemetry_path)),
      routes_(std::move(routes)),
      runbook_page_(RenderRunbookPage(runner_->build(), RunbookBodyHtml())),
      serving_metrics_(std::make_shared<prometheus::Registry>()),
      bytes_transferred_(prometheus::BuildCounter()
                             .Name("exposer_transferred_bytes_total")
                             .Help("Transferred bytes to metrics services")
                             .Register(*serving_metrics_)
                             .Add({})),
      scrapes_(prometheus::BuildCounter()
                   .Name("exposer_scrapes_total")
                   .Help("Number of times metrics were scraped")
                   .Register(*serving_metrics_)
                   .Add({})),
      latencies_(
          prometheus::BuildSummary()
              .Name("exposer_request_latencies")
              .Help("Latencies of serving scrape requests, in microseconds")
              .Register(*serving_metrics_)
              .Add({}, prometheus::Summary::Quantiles{{0.5, 0.05}, {0.9, 0.01}, {0.99, 0.001}})),
      rejected_(prometheus::BuildCounter()
                    .Name("rdmascope_http_requests_rejected_total")
                    .Help("HTTP requests refused without being served, by reason (max_requests: "
                          "past --web.max-requests requests in flight; rate_limit: past the web "
                          "config's rate_limit; costly_requests: past the debug routes' own "
                          "limit of requests in flight)")
                    .Register(*serving_metrics_)),
      rejected_max_requests_(rejected_.Add({{"reason", "max_requests"}})),
      rejected_rate_limit_(rejected_.Add({{"reason", "rate_limit"}})),
      rejected_costly_(rejected_.Add({{"reason", "costly_requests"}})),
      max_requests_(max_requests) {}

HttpReply HttpHandler::Handle(const HttpRequest& request) const {
  const bool get_or_head = request.method == "GET" || request.method == "HEAD";
  try {
    if (request.path == telemetry_path_) {
      if (!get_or_head) return MethodNotAllowed("GET, HEAD");
      if (max_requests_ <= 0) return Metrics(request);
      // Counted from before the collection to after the serialisation: the scrapes whose
      // cost runs at the same time. The slot is released on every path, exceptions included.
      struct Slot {
        std::atomic<int>& in_flight;
        ~Slot() { in_flight.fetch_sub(1); }
      } slot{scrapes_in_flight_};
      if (scrapes_in_flight_.fetch_add(1) >= max_requests_) return RejectScrape();
      return Metrics(request);
    }
    // Liveness and readiness as Prometheus answers them (web/web.go), for Kubernetes probes
    // and load balancers; the server guard lets them through without basic auth
    // (IsHealthPath). Ready once it answers: collectors and probes are set up before the
    // server listens.
    if (request.path == kHealthyPath || request.path == kReadyPath) {
      if (!get_or_head) return MethodNotAllowed("GET, HEAD");
      return Text(
          200, request.path == kHealthyPath ? "rdmascope is Healthy.\n" : "rdmascope is Ready.\n");
    }
    if (request.path == "/") {
      if (!get_or_head) return MethodNotAllowed("GET, HEAD");
      return {200,
              {{"Content-Type", "text/html; charset=utf-8"}},
              RenderLandingPage(*runner_, telemetry_path_, routes_)};
    }
    if (request.path == kRunbookPath) {
      if (!get_or_head) return MethodNotAllowed("GET, HEAD");
      return {200, {{"Content-Type", "text/html; charset=utf-8"}}, runbook_page_};
    }
    if (request.path == std::string(kRunbookPath) + "/") {
      if (!get_or_head) return MethodNotAllowed("GET, HEAD");
      // Relative, so that it also lands behind a reverse proxy that serves us under a prefix;
      // the browser keeps the URL's #fragment across the redirect (RFC 9110 10.2.2).
      HttpReply reply = Text(308, "moved to ../runbook\n");
      reply.headers.emplace_back("Location", "../runbook");
      return reply;
    }
    std::string path(request.path);
    // A browser asking for a route that has a page for people (/doctor, /doctor.html) gets
    // the page; curl, Prometheus and doctor --exporter (Accept: application/json, */*) the JSON.
    // ?format=json asks for the JSON whatever the Accept (a link from the page to its data).
    const bool json_asked = request.query.find("format=json") != std::string_view::npos;
    if (!json_asked && PrefersHtml(request.accept) && routes_.contains(path + ".html")) {
      path += ".html";
    }
    if (const auto route = routes_.find(path); route != routes_.end()) {
      // GET only: a debug route can be costly, HEAD would pay it for nothing.
      if (request.method != "GET") return MethodNotAllowed("GET");
      const bool html = path.ends_with(".html");
      std::string body = route->second(request.query);
      // The debug routes' JSON holds what tenants name (comm, cgroup and unit names, symbols,
      // module paths); JSON allows DEL and C1 controls raw, and `curl /debug/mr/stacks` prints
      // them to a terminal, where a \x9b is CSI. Escaped here, once for every route: the same
      // document to a parser. (/doctor's report escapes itself, for doctor's own output too: a
      // second pass finds nothing. The HTML pages escape their text as HTML.)
      if (!html) body = EscapeJsonControls(std::move(body));
      HttpReply reply{200,
                      {{"Content-Type", html ? "text/html; charset=utf-8" : "application/json"}},
                      std::move(body)};
      // /doctor answers two ways: caches must key it on Accept.
      if (routes_.contains(std::string(request.path) + ".html")) {
        reply.headers.emplace_back("Vary", "Accept");
      }
      return reply;
    }
    return Text(404, "not found\n");
  } catch (const BadRequest& e) {
    return Text(400, std::string("bad request: ") + e.what() + "\n");
  } catch (const std::exception& e) {
    return Text(500, std::string("error: ") + e.what() + "\n");
  } catch (...) {
    return Text(500, "error: unknown exception\n");
  }
}

bool HttpHandler::IsCostly(const HttpRequest& request) const {
  if (request.method != "GET") return false;  // a debug route answers 405 to the rest, at once
  const std::string path(request.path);
  return routes_.contains(path) || routes_.contains(path + ".html");
}

std::shared_ptr<void> HttpHandler::AdmitCostly(HttpReply& refusal) const {
  // Taken first, given back on refusal: two requests racing for the last slot cannot both win.
  if (costly_in_flight_.fetch_add(1) >= kMaxCostlyInFlight) {
    costly_in_flight_.fetch_sub(1);
    refusal = RejectCostly(rejected_costly_, "too many debug requests in flight (limit " +
                                                 std::to_string(kMaxCostlyInFlight) + ")");
    return nullptr;
  }
  // Scrapes in flight plus this one and the other costly ones: --web.max-requests in all.
  if (max_requests_ > 0 && scrapes_in_flight_.load() + costly_in_flight_.load() > max_requests_) {
    costly_in_flight_.fetch_sub(1);
    refusal = RejectCostly(rejected_max_requests_, "too many requests in flight (limit " +
                                                       std::to_string(max_requests_) +
                                                       ", --web.max-requests)");
    return nullptr;
  }
  // The token's deleter frees the slot; it owns nothing else.
  return std::shared_ptr<void>(
      &costly_in_flight_, [](void* count) { static_cast<std::atomic<int>*>(count)->fetch_sub(1); });
}

HttpReply HttpHandler::RejectCostly(prometheus::Counter& counter, std::string why) const {
  counter.Increment();
  // Not logged: a client retrying in a loop would flood the log; the counter says it.
  HttpReply reply = Text(503, why + "\n");
  reply.headers.emplace_back("Retry-After", "1");
  return reply;
}

HttpReply HttpHandler::RejectRateLimited() const {
  rejected_rate_limit_.Increment();
  // Not logged: a client past the limit would flood the log; the counter says it.
  HttpReply reply = Text(429, "Too Many Requests\n");
  reply.headers.emplace_back("X-Content-Type-Options", "nosniff");  // as Go's http.Error
  return reply;
}

HttpReply HttpHandler::RejectScrape() const {
  rejected_max_requests_.Increment();
  // One line per minute at most: a client retrying in a loop must not flood the log.
  const int64_t minute = std::chrono::duration_cast<std::chrono::minutes>(
                             std::chrono::steady_clock::now().time_since_epoch())
                             .count();
  int64_t last = last_reject_log_minute_.load();
  if (last != minute && last_reject_log_minute_.compare_exchange_strong(last, minute)) {
    log::Warn(
        "scrape refused: too many concurrent scrapes",
        {{"limit", std::to_string(max_requests_)},
         {"flag", "--web.max-requests"},
         {"refused_total", std::to_string(static_cast<int64_t>(rejected_max_requests_.Value()))}});
  }
  HttpReply reply = Text(503, "too many concurrent scrapes (limit " +
                                  std::to_string(max_requests_) + ", --web.max-requests)\n");
  // Prometheus retries at its next interval anyway; this tells other clients when to.
  reply.headers.emplace_back("Retry-After", "1");
  return reply;
}

HttpReply HttpHandler::Metrics(const HttpRequest& request) const {
  const auto start = std::chrono::steady_clock::now();
  // Serving metrics first, then the collectors: the order prometheus-cpp's Exposer used.
  std::vector<prometheus::MetricFamily> families = serving_metrics_->Collect();
  // Replaying a capture (--replay): each scrape is the next sample, the last one repeating.
  if (capture::Session* session = capture::Active()) [[unlikely]] {
    session->NextSample();
  }
  std::vector<prometheus::MetricFamily> collected = runner_->Collect();
  families.insert(families.end(), std::make_move_iterator(collected.begin()),
                  std::make_move_iterator(collected.end()));
  const auto collected_at = std::chrono::steady_clock::now();
  // Reserved from the last scrape's size (plus a margin): one allocation, no regrowth.
  const size_t last_bytes = last_text_bytes_.load(std::memory_order_relaxed);
  HttpReply reply{200,
                  {{"Content-Type", std::string(kExpositionContentType)}},
                  WriteTextFormat(families, last_bytes + last_bytes / 8)};
  reply.headers.emplace_back("Vary", "Accept-Encoding");
  const auto serialised_at = std::chrono::steady_clock::now();
  const size_t text_bytes = reply.body.size();
  last_text_bytes_.store(text_bytes, std::memory_order_relaxed);
  if (AcceptsGzip(request.accept_encoding)) {
    if (auto compressed = GzipCompress(reply.body)) {
      reply.body = std::move(*compressed);
      reply.headers.emplace_back("Content-Encoding", "gzip");
    }
  }
  if (log::Enabled(log::Level::kDebug)) {
    // Where a scrape's time goes (collectors, serialisation, compression): per collector in
    // rdmascope_collector_duration_seconds, the rest only here, at --log.level=debug.
    const auto ms = [](auto from, auto to) {
      char text[32];
      std::snprintf(text, sizeof text, "%.3f",
                    std::chrono::duration<double, std::milli>(to - from).count());
      return std::string(text);
    };
    const auto done = std::chrono::steady_clock::now();
    log::Debug("scrape phases", {{"collect_ms", ms(start, collected_at)},
                                 {"serialise_ms", ms(collected_at, serialised_at)},
                                 {"gzip_ms", ms(serialised_at, done)},
                                 {"text_bytes", std::to_string(text_bytes)},
                                 {"body_bytes", std::to_string(reply.body.size())}});
  }
  latencies_.Observe(static_cast<double>(std::chrono::duration_cast<std::chrono::microseconds>(
                                             std::chrono::steady_clock::now() - start)
                                             .count()));
  bytes_transferred_.Increment(static_cast<double>(reply.body.size()));
  scrapes_.Increment();
  return reply;
}

}  // namespace rdmascope
