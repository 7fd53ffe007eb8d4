#include "cli/doctor_prometheus.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>
#include <optional>

#include "cli/doctor.h"
#include "core/log.h"
#include "doctor/checks.h"
#include "doctor/fleet_drift.h"
#include "doctor/prometheus_snapshots.h"
#include "doctor/report.h"

namespace rdmascope {
namespace {

// Without --window: rates over the last 5 minutes, as the alert rules' rate(...[5m]).
constexpr double kDefaultWindowSeconds = 300;

std::string Rfc3339(std::time_t when) {
  std::tm utc{};
  gmtime_r(&when, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

// One instant query's answer added to `series`; the error says what went wrong.
std::expected<void, std::string> Query(const HttpUrl& url, const HttpClientOptions& client,
                                       std::chrono::milliseconds timeout, const std::string& promql,
                                       double time, doctor::InstanceSeries& series) {
  char at[32];
  std::snprintf(at, sizeof at, "%.3f", time);
  const auto answer = HttpGet(url, "/api/v1/query?query=" + UrlEncode(promql) + "&time=" + at,
                              timeout, client, 256 << 20);
  if (!answer) return std::unexpected(answer.error().message);
  // Prometheus answers its errors (400 bad query, 422 execution, 503 timeout) as JSON too.
  if (auto added = doctor::AddQueryAnswer(answer->body, series); !added) {
    std::string body = answer->body.substr(0, 200);
    return std::unexpected(answer->status == 200 || body.starts_with("{")
                               ? added.error()
                               : "HTTP " + std::to_string(answer->status) + ": " + body);
  }
  if (answer->status != 200) return std::unexpected("HTTP " + std::to_string(answer->status));
  return {};
}

}  // namespace

std::string UrlEncode(const std::string& text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string PrometheusMatchers(const std::string& selector, const std::string& job) {
  std::string matchers = selector;
  const size_t first = matchers.find_first_not_of(" \t");
  const size_t last = matchers.find_last_not_of(" \t");
  matchers = first == std::string::npos ? "" : matchers.substr(first, last - first + 1);
  if (matchers.starts_with("{") != matchers.ends_with("}")) {
    throw std::invalid_argument("--prometheus.selector " + selector + ": unbalanced braces");
  }
  if (matchers.starts_with("{")) matchers = matchers.substr(1, matchers.size() - 2);
  if (!job.empty()) {
    std::string quoted;
    for (const char c : job) {
      if (c == '"' || c == '\\') quoted += '\\';
      quoted += c;
    }
    matchers += (matchers.empty() ? "" : ",") + std::string("job=\"") + quoted + "\"";
  }
  return matchers;
}

int RunPrometheusDoctor(const doctor::DoctorOptions& options) {
  try {
    const auto url = ParseHttpUrl(options.prometheus);
    if (!url) throw std::runtime_error("--prometheus " + options.prometheus + ": " + url.error());
    const HttpClientOptions client = ClientOptions(options.prometheus_access, "prometheus");
    const std::string matchers =
        PrometheusMatchers(options.prometheus_selector, options.prometheus_job);
    const auto timeout = std::chrono::milliseconds(options.prometheus_timeout_ns / 1'000'000);
    const double window =
        options.window_set ? static_cast<double>(options.window_ns) / 1e9 : kDefaultWindowSeconds;
    // To the millisecond: samples scraped in the current second are after a whole-second time
    // and an instant query at it would not see them.
    const double now =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    const auto now_wall = static_cast<std::time_t>(now);
    const std::vector<std::string> queries = doctor::CheckSeriesQueries(matchers);

    doctor::InstanceSeries now_series, before_series;
    for (const std::string& promql : queries) {
      log::Debug("doctor: query", {{"promql", promql}});
      if (auto done = Query(*url, client, timeout, promql, now, now_series); !done) {
        throw std::runtime_error("Prometheus " + options.prometheus + ": " + done.error());
      }
      if (window > 0) {
        if (auto done = Query(*url, client, timeout, promql, now - window, before_series); !done) {
          throw std::runtime_error("Prometheus " + options.prometheus + ": " + done.error());
        }
      }
    }
    const auto snapshots = doctor::SnapshotsOf(now_series, now);
    const bool any_rdmascope = std::ranges::any_of(snapshots, [](const auto& entry) {
      return entry.second.SeriesCount() > entry.second.Find("up").size();
    });
    if (!any_rdmascope) {
      throw std::runtime_error("Prometheus " + options.prometheus + " has no rdmascope series" +
                               (matchers.empty() ? "" : " matching {" + matchers + "}"));
    }
    const auto before = doctor::SnapshotsOf(before_series, now - window);
    std::vector<doctor::Finding> findings;
    for (const auto& [instance, snapshot] : snapshots) {
      // A target Prometheus could not scrape has no fresh series (they went stale): checking
      // it would say "no data" of every check. Fleet drift says it is missing.
      if (snapshot.Value("up") == 0.0) continue;
      const auto earlier = before.find(instance);
      for (doctor::Finding& finding : doctor::RunChecks(
               snapshot, earlier == before.end() ? nullptr : &earlier->second, options)) {
        finding.scope.insert(finding.scope.begin(), {"instance", instance});
        findings.push_back(std::move(finding));
      }
    }
    // Each host against its peers (fleet drift), targets that are down among them.
    for (doctor::Finding& finding : doctor::FleetDrift(snapshots, before, options)) {
      findings.push_back(std::move(finding));
    }
    doctor::SortFindings(findings);  // stable: each check's hosts stay in instance order
    log::Info("doctor: fleet report from Prometheus",
              {{"url", options.prometheus},
               {"instances", std::to_string(snapshots.size())},
               {"queries", std::to_string(queries.size() * (window > 0 ? 2 : 1))}});
    const doctor::ReportContext context{
        .host = options.prometheus + (matchers.empty() ? "" : " {" + matchers + "}"),
        .generated = Rfc3339(now_wall),
        .window_seconds = window,
        .window_kind = window > 0 ? doctor::kWindowLookback : doctor::kWindowNone};
    return PrintDoctorReport(findings, context, options, false);
  } catch (const std::exception& e) {
    log::Error("doctor could not read the fleet", {{"err", e.what()}});
    return doctor::kExitCannotRun;
  }
}

}  // namespace rdmascope
