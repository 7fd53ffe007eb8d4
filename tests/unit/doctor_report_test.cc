// Doctor's report: the JSON schema (golden file), the text layout, the exit codes and
// --fail-on, and the invariant that every finding that asks for action says what to do and
// links a runbook section that exists.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "doctor/checks.h"
#include "doctor/http_get.h"
#include "doctor/query.h"
#include "doctor/report.h"
#include "doctor/service.h"
#include "http/handler.h"
#include "unit/doctor_fixtures.h"

namespace rdmascope::doctor {
namespace {

using testing::Host;

const std::string kFixtures = RDMASCOPE_FIXTURES;

std::vector<Finding> BadHost(bool window = true) {
  const Snapshot before = Host(true, false);
  DoctorOptions options;  // the workload given, so that queues.srq_sizing fires too
  options.nodes = testing::kNodes;
  options.flows = testing::kFlows;
  auto findings = RunChecks(Host(true, true), window ? &before : nullptr, options);
  SortFindings(findings);
  return findings;
}

std::set<std::string> RunbookAnchors() {
  return testing::RunbookAnchors(kFixtures + "/../../docs/runbook.md");
}

Finding WithSeverity(Severity severity) {
  Finding finding;
  finding.id = "test.one";
  finding.area = "host";
  finding.severity = severity;
  return finding;
}

TEST(DoctorReport, EveryFindingThatAsksForActionHasAdviceAndAnExistingRunbookAnchor) {
  const auto anchors = RunbookAnchors();
  ASSERT_GT(anchors.size(), 20U);
  std::vector<Finding> all = BadHost(true);
  const auto no_window = BadHost(false);
  all.insert(all.end(), no_window.begin(), no_window.end());
  for (const Check& check : AllChecks()) {
    EXPECT_TRUE(anchors.contains(std::string(check.runbook))) << check.id;
  }
  size_t actionable = 0;
  for (const Finding& finding : all) {
    const std::string prefix = "docs/runbook.md#";
    ASSERT_TRUE(finding.runbook.starts_with(prefix)) << finding.id;
    EXPECT_TRUE(anchors.contains(finding.runbook.substr(prefix.size())))
        << finding.id << " " << finding.runbook;
    EXPECT_FALSE(finding.id.empty());
    EXPECT_TRUE(finding.id.starts_with(finding.area + ".")) << finding.id;
    if (finding.severity == Severity::kOk || finding.severity == Severity::kSkip) continue;
    ++actionable;
    EXPECT_FALSE(finding.advice.empty()) << finding.id;
    EXPECT_FALSE(finding.observed.empty()) << finding.id;
    EXPECT_FALSE(finding.expected.empty()) << finding.id;
    // The advice carries a figure, the computed number a person acts on; a port's state and
    // a missing kernel module have none to give.
    if (finding.id != "links.port_state" && finding.id != "host.kernel_modules") {
      EXPECT_TRUE(std::regex_search(finding.advice, std::regex("[0-9]"))) << finding.advice;
    }
  }
  EXPECT_GT(actionable, 15U);
}

TEST(DoctorReport, JsonMatchesTheGoldenFile) {
  const std::string json = RenderJson(BadHost(), {.host = "golden-host",
                                                  .generated = "2026-01-01T00:00:00Z",
                                                  .window_seconds = 10,
                                                  .window_kind = kWindowLive});
  const std::string golden = kFixtures + "/golden/doctor.json";
  if (const char* update = std::getenv("RDMASCOPE_UPDATE_GOLDEN"); update && *update == '1') {
    std::ofstream(golden) << json;
  }
  std::ifstream in(golden);
  std::stringstream expected;
  expected << in.rdbuf();
  EXPECT_EQ(json, expected.str()) << "RDMASCOPE_UPDATE_GOLDEN=1 rewrites " << golden;
}

TEST(DoctorReport, JsonSchema) {
  const auto findings = BadHost();
  const auto doc = nlohmann::json::parse(RenderJson(findings, {.host = "h", .generated = "g"}));
  EXPECT_EQ(doc["schema_version"], 1);
  EXPECT_EQ(doc["host"], "h");
  ASSERT_EQ(doc["findings"].size(), findings.size());
  int total = 0;
  for (const char* severity : {"ok", "info", "warn", "crit", "skip"}) {
    total += doc["summary"][severity].get<int>();
  }
  EXPECT_EQ(total, static_cast<int>(findings.size()));
  for (const auto& finding : doc["findings"]) {
    for (const char* key :
         {"id", "area", "severity", "scope", "observed", "expected", "advice", "fix", "runbook"}) {
      EXPECT_TRUE(finding.contains(key)) << key;
    }
    EXPECT_TRUE(finding["scope"].is_object());
  }
}

TEST(DoctorReport, JsonSurvivesInvalidUtf8InLabels) {
  Finding finding = WithSeverity(Severity::kOk);
  finding.scope = {{"netdev", "we\xff\xfeird"}};
  EXPECT_NO_THROW(nlohmann::json::parse(RenderJson({finding}, {})));
}

TEST(DoctorReport, TextGroupsByAreaWorstFirstWithoutColourUnlessAsked) {
  const auto findings = BadHost();
  const std::string text = RenderText(findings, {.host = "h", .window_seconds = 10}, false);
  EXPECT_EQ(text.find('\033'), std::string::npos);
  const size_t links = text.find("== Links and ports ==");
  const size_t roce = text.find("== RoCE network configuration ==");
  const size_t host = text.find("== Host and exporter ==");
  ASSERT_NE(links, std::string::npos);
  EXPECT_LT(links, roce);
  EXPECT_LT(roce, host);
  // Within links the critical port comes before the warnings and the oks.
  EXPECT_LT(text.find("[CRIT] links.port_state"), text.find("[WARN] links."));
  EXPECT_LT(text.find("[WARN] links."), text.find("[OK] links."));
  EXPECT_NE(text.find("fix:      ip link set dev eth2 mtu 4200"), std::string::npos);
  EXPECT_NE(RenderText(findings, {}, true).find("\033[1;31m[CRIT]"), std::string::npos);
}

TEST(DoctorReport, ExitCodesFollowNagiosAndFailOn) {
  DoctorOptions warn_fails;
  DoctorOptions crit_only;
  crit_only.fail_on_crit_only = true;
  const std::vector<Finding> quiet{WithSeverity(Severity::kOk), WithSeverity(Severity::kInfo),
                                   WithSeverity(Severity::kSkip)};
  EXPECT_EQ(ExitCode(quiet, warn_fails), 0);
  EXPECT_EQ(ExitCode({}, warn_fails), 0);
  auto warn = quiet;
  warn.push_back(WithSeverity(Severity::kWarn));
  EXPECT_EQ(ExitCode(warn, warn_fails), 1);
  EXPECT_EQ(ExitCode(warn, crit_only), 0);
  auto crit = warn;
  crit.push_back(WithSeverity(Severity::kCrit));
  EXPECT_EQ(ExitCode(crit, warn_fails), 2);
  EXPECT_EQ(ExitCode(crit, crit_only), 2);
  EXPECT_EQ(ExitCode(BadHost(), warn_fails), 2);
}

TEST(DoctorReport, JsonReadsBackAsItWasWritten) {
  const auto findings = BadHost();
  const ReportContext context{.host = "h",
                              .generated = "2026-01-01T00:00:00Z",
                              .window_seconds = 10,
                              .window_kind = kWindowLookback};
  const std::string json = RenderJson(findings, context);
  const auto parsed = ParseJson(json);
  ASSERT_TRUE(parsed.has_value()) << parsed.error();
  EXPECT_EQ(parsed->context.window_kind, "lookback");
  EXPECT_EQ(RenderJson(parsed->findings, parsed->context), json);
  EXPECT_EQ(RenderText(parsed->findings, parsed->context, false),
            RenderText(findings, context, false));
  // An exporter older than window_kind: read, and passed on without one.
  auto older = nlohmann::ordered_json::parse(json);
  older.erase("window_kind");
  const auto old_report = ParseJson(older.dump());
  ASSERT_TRUE(old_report.has_value()) << old_report.error();
  EXPECT_EQ(old_report->context.window_kind, "");
  EXPECT_FALSE(nlohmann::json::parse(RenderJson({}, old_report->context)).contains("window_kind"));
}

TEST(DoctorReport, JsonThatIsNotAReportIsRefusedWithTheReason) {
  EXPECT_EQ(ParseJson("<html>").error(), "not a JSON object");
  EXPECT_EQ(ParseJson("[1]").error(), "not a JSON object");
  EXPECT_EQ(ParseJson(R"({"schema_version": 2})").error(), "schema_version 2, this doctor reads 1");
  EXPECT_NE(ParseJson(R"({"schema_version": 1, "host": "h"})").error().find("not a doctor report"),
            std::string::npos);
  std::string json = RenderJson(BadHost(), {.host = "h", .generated = "g"});
  json.replace(json.find("\"crit\""), 6, "\"dire\"");
  EXPECT_EQ(ParseJson(json).error(), "unknown severity dire");
}

// --- /doctor in serve (doctor/service.h Service) -----------------------------------------

// The mr collector of a process that registers 1 MiB more at every collection and keeps old
// regions, or (`port`) the rdma collector of a port whose retransmissions rise 1000 a collection.
class LeakingHost : public Collector {
 public:
  explicit LeakingHost(bool port) : port_(port) {}
  CollectResult Collect(MetricSet& out) const override {
    const double n = ++calls_;
    if (port_) {
      out.Add({"rdma_port_hw_counter_total", "t", prometheus::MetricType::Counter},
              {{"device", "rxe0"}, {"port", "1"}, {"counter", "local_ack_timeout_err"}}, n * 1000);
      return {.detail = "test"};
    }
    out.Add({"rdma_mr_outstanding_bytes", "t", prometheus::MetricType::Gauge},
            {{"pid", "4242"}, {"comm", "mr_leaker"}}, n * 1048576);
    out.Add({"rdma_mr_leak_suspect_bytes", "t", prometheus::MetricType::Gauge},
            {{"pid", "4242"}, {"comm", "mr_leaker"}}, 1048576);
    return {.detail = "test"};
  }

 private:
  bool port_;
  mutable std::atomic<int> calls_{0};
};

std::unique_ptr<Service> LeakingService() {
  std::vector<NamedCollector> collectors;
  collectors.push_back({"mr", std::make_unique<LeakingHost>(false)});
  collectors.push_back({"rdma", std::make_unique<LeakingHost>(true)});
  auto runner =
      std::make_shared<CollectorRunner>(std::move(collectors), BuildInfo{"t", "t"}, "/proc");
  // A tick of an hour: only the synchronous first collection at start is kept, the test does
  // not race the thread.
  return std::make_unique<Service>(runner, std::map<std::string, std::string>{}, 3600);
}

// Issue 37: a live window is observed once for every request that arrives while it runs, and
// reused for a while after: four concurrent ?window=1s take one second, not four, and report
// the same window; the next one is answered from it at once.
TEST(DoctorRoute, ConcurrentLiveWindowsShareOneObservation) {
  auto service = LeakingService();
  std::vector<std::string> bodies(4);
  std::vector<std::thread> requests;
  const auto start = std::chrono::steady_clock::now();
  for (std::string& body : bodies) {
    requests.emplace_back([&service, &body] { body = service->Report("window=1s"); });
  }
  for (std::thread& request : requests) request.join();
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(took, 1.9);
  std::set<double> windows;
  for (const std::string& body : bodies) {
    const auto report = ParseJson(body);
    ASSERT_TRUE(report.has_value()) << report.error();
    EXPECT_EQ(report->context.window_kind, kWindowLive);
    windows.insert(report->context.window_seconds);
  }
  EXPECT_EQ(windows.size(), 1U);
  EXPECT_GE(*windows.begin(), 1.0);
  const auto again_start = std::chrono::steady_clock::now();
  const auto again = ParseJson(service->Report("window=5s"));
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - again_start).count(),
            0.5);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->context.window_seconds, *windows.begin());  // the shared one, reused
}

TEST(DoctorRoute, ServesTheReportWithHistoryAtSlashDoctor) {
  auto service = LeakingService();
  DebugRoutes routes;
  service->AddRoute(routes);
  ASSERT_TRUE(routes.contains("/doctor"));
  const auto report = ParseJson(routes.at("/doctor")(""));
  ASSERT_TRUE(report.has_value()) << report.error();
  // Counter rates since start: the exporter is younger than its 15 minutes' lookback.
  EXPECT_GT(report->context.window_seconds, 0);
  EXPECT_EQ(report->context.window_kind, "since_start");
  const Finding* leak = nullptr;
  const Finding* retrans = nullptr;
  for (const Finding& f : report->findings) {
    if (f.id == "memory.mr_leak") leak = &f;
    if (f.id == "links.retransmissions") retrans = &f;
  }
  ASSERT_NE(leak, nullptr);
  EXPECT_EQ(leak->severity, Severity::kWarn);
  EXPECT_EQ(leak->scope, (Scope{{"pid", "4242"}, {"comm", "mr_leaker"}}));
  EXPECT_NE(leak->observed.find("1 MiB -> 2 MiB"), std::string::npos) << leak->observed;
  ASSERT_NE(retrans, nullptr);
  EXPECT_NE(retrans->severity, Severity::kSkip) << retrans->observed;
  // The same schema as `doctor --format json`.
  const auto json = nlohmann::json::parse(routes.at("/doctor")(""));
  EXPECT_EQ(json["schema_version"], 1);
  EXPECT_TRUE(json.contains("summary"));
}

TEST(DoctorRoute, WindowZeroSkipsTheCounterChecksAndABadWindowIsRefused) {
  auto service = LeakingService();
  const auto report = ParseJson(service->Report("window=0s"));
  ASSERT_TRUE(report.has_value()) << report.error();
  EXPECT_EQ(report->context.window_seconds, 0);
  EXPECT_EQ(report->context.window_kind, "none");
  for (const Finding& f : report->findings) {
    if (f.id == "links.retransmissions") {
      EXPECT_EQ(f.severity, Severity::kSkip);
    }
    if (f.id == "memory.mr_leak") {
      EXPECT_EQ(f.severity, Severity::kWarn);  // history still
    }
  }
  EXPECT_THROW(service->Report("window=soon"), std::invalid_argument);
  EXPECT_THROW(service->Report("x=1&window=2h"), std::invalid_argument);
  // ?window=D: observed live, as before.
  const auto live = ParseJson(service->Report("window=20ms"));
  ASSERT_TRUE(live.has_value()) << live.error();
  EXPECT_EQ(live->context.window_kind, "live");
  EXPECT_GE(live->context.window_seconds, 0.02);
  EXPECT_LT(live->context.window_seconds, 10);
}

// The rdma collector of a port with a burst of retransmissions in its first two collections
// and none after: serve's first collection and its tick's first.
class BurstHost : public Collector {
 public:
  CollectResult Collect(MetricSet& out) const override {
    const int n = std::min(++calls, 2);
    out.Add({"rdma_port_hw_counter_total", "t", prometheus::MetricType::Counter},
            {{"device", "rxe0"}, {"port", "1"}, {"counter", "local_ack_timeout_err"}}, n * 1e6);
    return {.detail = "test"};
  }
  mutable std::atomic<int> calls{0};
};

// /doctor without ?window= in a running serve: a tick every 50 ms and a lookback of 200 ms
// stand for the minute and the 15 minutes. Once the burst is older than the lookback, it no
// longer fires (since start, it fired until restart).
TEST(DoctorRoute, AnOldBurstStopsFiringOnceOlderThanTheLookback) {
  auto host = std::make_unique<BurstHost>();
  const BurstHost* burst = host.get();
  std::vector<NamedCollector> collectors;
  collectors.push_back({"rdma", std::move(host)});
  auto runner =
      std::make_shared<CollectorRunner>(std::move(collectors), BuildInfo{"t", "t"}, "/proc");
  const auto started = std::chrono::steady_clock::now();
  Service service(runner, {}, /*interval_seconds=*/0.05, /*lookback_seconds=*/0.2);
  // Six collections, the burst in the first two; at least 0.3 s, so the start is out of the
  // lookback.
  const auto deadline = started + std::chrono::seconds(10);
  while ((burst->calls < 6 ||
          std::chrono::steady_clock::now() - started < std::chrono::milliseconds(300)) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_GE(burst->calls, 6);
  const auto report = ParseJson(service.Report(""));
  ASSERT_TRUE(report.has_value()) << report.error();
  EXPECT_EQ(report->context.window_kind, "lookback");
  EXPECT_GT(report->context.window_seconds, 0);
  EXPECT_LT(report->context.window_seconds, 5);
  const Finding* retrans = nullptr;
  for (const Finding& f : report->findings) {
    if (f.id == "links.retransmissions") retrans = &f;
  }
  ASSERT_NE(retrans, nullptr);
  EXPECT_EQ(retrans->severity, Severity::kOk) << retrans->observed;
}

// What `serve` answers with these routes and no collector.
HttpHandler HandlerOf(const DebugRoutes& routes) {
  return HttpHandler(std::make_shared<CollectorRunner>(std::vector<NamedCollector>{},
                                                       BuildInfo{"t", "t"}, "/proc"),
                     "/metrics", routes);
}

// A bad query is the client's mistake: 400 with the reason, not the 500 of a server error.
TEST(DoctorRoute, ABadParameterIsA400WithTheReason) {
  auto service = LeakingService();
  DebugRoutes routes;
  service->AddRoute(routes);
  const HttpHandler handler = HandlerOf(routes);
  const HttpReply window =
      handler.Handle({.method = "GET", .path = "/doctor", .query = "window=bad"});
  EXPECT_EQ(window.status, 400U);
  EXPECT_NE(window.body.find("window must be a duration of at most 10s, like 5s: bad"),
            std::string::npos)
      << window.body;
  // No client-chosen sleep past 10 s (issue 37): a minute is refused, at once.
  const HttpReply minute =
      handler.Handle({.method = "GET", .path = "/doctor", .query = "window=60s"});
  EXPECT_EQ(minute.status, 400U) << minute.body;
  const HttpReply unknown =
      handler.Handle({.method = "GET", .path = "/doctor", .query = "nodez=4"});
  EXPECT_EQ(unknown.status, 400U);
  EXPECT_NE(unknown.body.find("unknown parameter nodez"), std::string::npos) << unknown.body;
  const HttpReply threshold =
      handler.Handle({.method = "GET", .path = "/doctor", .query = "window=0s&cq-ratio-warn=x"});
  EXPECT_EQ(threshold.status, 400U);
  EXPECT_NE(threshold.body.find("cq-ratio-warn must be a positive number: x"), std::string::npos);
  EXPECT_EQ(
      handler.Handle({.method = "GET", .path = "/doctor", .query = "window=0s&nodes=4&flows=2"})
          .status,
      200U);
}

// A browser gets the report as a page; every other client (curl's */*, doctor --exporter's
// application/json, Prometheus) the JSON; both say they vary on Accept.
TEST(DoctorRoute, ABrowserGetsThePage) {
  auto service = LeakingService();
  DebugRoutes routes;
  service->AddRoute(routes);
  const HttpHandler handler = HandlerOf(routes);
  const auto header = [](const HttpReply& reply, const std::string& name) {
    for (const auto& [key, value] : reply.headers) {
      if (key == name) return value;
    }
    return std::string();
  };
  const HttpReply page =
      handler.Handle({.method = "GET",
                      .path = "/doctor",
                      .query = "window=0s",
                      .accept = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"});
  EXPECT_EQ(page.status, 200U);
  EXPECT_EQ(header(page, "Content-Type"), "text/html; charset=utf-8");
  EXPECT_EQ(header(page, "Vary"), "Accept");
  EXPECT_NE(page.body.find("<h1>rdmascope doctor</h1>"), std::string::npos) << page.body;
  EXPECT_NE(page.body.find("href=\"/runbook#"), std::string::npos) << "checks link the runbook";
  for (const char* accept : {"", "*/*", "application/json", "application/json, text/html"}) {
    const HttpReply json = handler.Handle(
        {.method = "GET", .path = "/doctor", .query = "window=0s", .accept = accept});
    EXPECT_EQ(header(json, "Content-Type"), "application/json") << accept;
    EXPECT_EQ(header(json, "Vary"), "Accept") << accept;
    EXPECT_TRUE(ParseJson(json.body).has_value()) << accept;
  }
  EXPECT_EQ(header(handler.Handle({.method = "GET", .path = "/doctor.html", .query = "window=0s"}),
                   "Content-Type"),
            "text/html; charset=utf-8");
}

TEST(DoctorReport, HtmlEscapesWhatTheHostNamed) {
  Finding finding{.id = "queues.cq_capacity",
                  .area = "queues",
                  .severity = Severity::kCrit,
                  .scope = {{"comm", "<script>alert(1)</script>"}},
                  .observed = "a < b & c",
                  .expected = "\"quoted\"",
                  .advice = "x",
                  .fix = "echo '<b>'",
                  .runbook = "docs/runbook.md#rdmacqundersized"};
  const std::string html = RenderHtml({finding}, {.host = "h<1>", .generated = "now"});
  EXPECT_EQ(html.find("<script>"), std::string::npos);
  EXPECT_EQ(html.find("<b>"), std::string::npos);
  EXPECT_NE(html.find("comm=&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos) << html;
  EXPECT_NE(html.find("a &lt; b &amp; c"), std::string::npos);
  EXPECT_NE(html.find("h&lt;1&gt;"), std::string::npos);
  EXPECT_NE(html.find("<tr class=\"crit\"><td>crit</td><td><a href=\"/runbook#rdmacqundersized\">"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("1 crit"), std::string::npos);
}

// /doctor takes the --doctor.* thresholds by name; doctor --exporter sends those it was given.
TEST(DoctorRoute, ThresholdsTravelAsQueryParameters) {
  DoctorOptions given;
  EXPECT_EQ(ThresholdQuery(given), "") << "defaults: nothing to send";
  given.nodes = 64;
  given.flows = 8;
  given.rtt_seconds = 150e-6;
  given.roce_priority = 4;
  given.cq_ratio_warn = 2;
  const std::string query = ThresholdQuery(given);
  EXPECT_EQ(query, "roce-priority=4&rtt=150us&cq-ratio-warn=2&nodes=64&flows=8");
  DoctorOptions received;
  for (size_t at = 0; at < query.size();) {
    const size_t end = std::min(query.find('&', at), query.size());
    const std::string item = query.substr(at, end - at);
    const auto applied =
        ApplyThreshold(item.substr(0, item.find('=')), item.substr(item.find('=') + 1), received);
    ASSERT_TRUE(applied.has_value() && *applied) << item;
    at = end + 1;
  }
  EXPECT_EQ(ThresholdQuery(received), query);
  EXPECT_NEAR(received.rtt_seconds, 150e-6, 1e-12);
  EXPECT_FALSE(ApplyThreshold("cq-ratio-crit", "3", received).has_value()) << "crit above warn";
  EXPECT_FALSE(ApplyThreshold("roce-priority", "8", received).has_value());
  EXPECT_FALSE(ApplyThreshold("rtt", "0us", received).has_value());
  EXPECT_EQ(ApplyThreshold("window", "1s", received), false) << "not a threshold";
}

TEST(DoctorReport, WindowIsPrintedForAPerson) {
  const auto text = [](double seconds) {
    const std::string out = RenderText({}, {.host = "h", .window_seconds = seconds}, false);
    return out.substr(0, out.find(')') + 1);
  };
  EXPECT_EQ(text(3.94617), "rdmascope doctor on h (window 3.9 s)");
  EXPECT_EQ(text(10), "rdmascope doctor on h (window 10 s)");
  EXPECT_EQ(text(0), "rdmascope doctor on h (window 0 s)");
  EXPECT_EQ(text(754), "rdmascope doctor on h (window 13 min)");
  EXPECT_EQ(text(9000), "rdmascope doctor on h (window 2.5 h)");
  // Where an exporter's counters were judged: its recent collections, or since it started.
  const auto kind = [](double seconds, const char* window_kind) {
    const std::string out =
        RenderText({}, {.host = "h", .window_seconds = seconds, .window_kind = window_kind}, false);
    return out.substr(0, out.find(')') + 1);
  };
  EXPECT_EQ(kind(870, kWindowLookback),
            "rdmascope doctor on h (window 14 min of the exporter's "
            "history)");
  EXPECT_EQ(kind(200, kWindowSinceStart),
            "rdmascope doctor on h (window 3 min, since the exporter started: younger than its "
            "lookback)");
  EXPECT_EQ(kind(10, kWindowLive), "rdmascope doctor on h (window 10 s)");
  EXPECT_EQ(kind(0, kWindowNone), "rdmascope doctor on h (window 0 s)");
}

// A host without RDMA skips nearly everything: one line names the skipped checks.
TEST(DoctorReport, SkippedChecksAreOneLineUnlessAsked) {
  Finding skipped = WithSeverity(Severity::kSkip);
  skipped.observed = "no RDMA device";
  Finding again = skipped;
  Finding other = skipped;
  other.id = "host.other";
  Finding ok = WithSeverity(Severity::kOk);
  ok.id = "host.fine";
  const std::vector<Finding> findings{ok, skipped, again, other};
  const std::string brief = RenderText(findings, {.host = "h"}, false);
  EXPECT_EQ(brief.find("no RDMA device"), std::string::npos) << brief;
  EXPECT_NE(brief.find("\n3 skipped (2 checks; --show-skipped gives the reasons): test.one, "
                       "host.other\n"),
            std::string::npos)
      << brief;
  EXPECT_NE(brief.find("[OK] host.fine"), std::string::npos);
  const std::string full = RenderText(findings, {.host = "h"}, false, true);
  EXPECT_NE(full.find("[SKIP] test.one"), std::string::npos);
  EXPECT_NE(full.find("no RDMA device"), std::string::npos);
  EXPECT_EQ(full.find("--show-skipped"), std::string::npos);
}

// --- doctor --exporter's URL (doctor/http_get.h); the client itself: tests/e2e/doctor_exporter.py
// and, over TLS and basic auth against serve, tests/e2e/doctor_exporter_tls.py.

TEST(DoctorExporterUrl, HttpOrHttpsWithHostPortAndPath) {
  const auto plain = ParseHttpUrl("http://127.0.0.1:9879");
  ASSERT_TRUE(plain.has_value()) << plain.error();
  EXPECT_EQ(plain->scheme, "http");
  EXPECT_EQ(plain->host, "127.0.0.1");
  EXPECT_EQ(plain->port, "9879");
  EXPECT_EQ(plain->path, "");
  const auto v6 = ParseHttpUrl("http://[::1]:19879/rdma/");
  ASSERT_TRUE(v6.has_value()) << v6.error();
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, "19879");
  EXPECT_EQ(v6->path, "/rdma");  // doctor appends /doctor
  EXPECT_EQ(ParseHttpUrl("http://node17")->port, "80");
  // An exporter behind --web.config.file: https is the client's (libcurl) to speak.
  const auto tls = ParseHttpUrl("https://node17:9879");
  ASSERT_TRUE(tls.has_value()) << tls.error();
  EXPECT_EQ(tls->scheme, "https");
  EXPECT_EQ(ParseHttpUrl("https://node17")->port, "443");
  for (const char* bad : {"ftp://127.0.0.1:9879", "127.0.0.1:9879", "http://", "http://:9879",
                          "http://h:", "http://h:0", "http://h:65536", "http://h:9x",
                          "http://u:p@h:1", "https://u:p@h:1", "http://[::1:1"}) {
    EXPECT_FALSE(ParseHttpUrl(bad).has_value()) << bad;
  }
  // Credentials never travel in the URL (shell history, ps): the flags say how instead.
  EXPECT_NE(ParseHttpUrl("https://u:p@h:1").error().find("credentials in the URL"),
            std::string::npos);
}

}  // namespace
}  // namespace rdmascope::doctor
