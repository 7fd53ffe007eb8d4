#include "cli/doctor_prometheus.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <thread>

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

// The history checks read what `serve` keeps: an hour of trend snapshots a minute apart.
constexpr double kTrendSpanSeconds = 3600;
constexpr double kTrendStepSeconds = 60;

// What a query is asked for, and what its answer feeds.
// kIdentity: rdmascope_build_info, which names the (instance, job) pairs that are rdmascope.
enum class Use { kNow, kBefore, kTrendThen, kTrendAppeared, kIdentity };

struct PlannedQuery {
  std::string promql;
  double time = 0;   // the evaluation time (an instant query) or the range's end
  double start = 0;  // a range query from here to `time`, kTrendStepSeconds apart; 0: instant
  Use use = Use::kNow;
};

struct QueryResult {
  std::string error;  // empty: answered
  doctor::InstanceSeries series;
  doctor::TrendPoints trend;
  doctor::ReportQuery record;
};

std::string Seconds(double time) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", time);
  return text;
}

// One query, its answer read into `result` (on its own thread: nothing shared).
void Run(const HttpUrl& url, const HttpClientOptions& client, std::chrono::milliseconds timeout,
         const PlannedQuery& query, QueryResult& result) {
  const bool range = query.start > 0;
  const std::string target =
      range ? "/api/v1/query_range?query=" + UrlEncode(query.promql) +
                  "&start=" + Seconds(query.start) + "&end=" + Seconds(query.time) +
                  "&step=" + Seconds(kTrendStepSeconds)
            : "/api/v1/query?query=" + UrlEncode(query.promql) + "&time=" + Seconds(query.time);
  const auto started = std::chrono::steady_clock::now();
  const auto answer = HttpGet(url, target, timeout, client, 1U << 30);
  result.record.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (!answer) {
    result.error = answer.error().message;
    return;
  }
  result.record.bytes = answer->body.size();
  // Prometheus answers its errors (400 bad query, 422 execution, 503 timeout) as JSON too.
  std::expected<void, std::string> read;
  if (query.use == Use::kNow || query.use == Use::kBefore || query.use == Use::kIdentity) {
    read = doctor::AddQueryAnswer(answer->body, result.series);
    for (const auto& [instance, by_name] : result.series) {
      for (const auto& [name, samples] : by_name) result.record.series += samples.size();
    }
  } else {
    read = doctor::AddTrendAnswer(answer->body,
                                  range ? doctor::ResultType::kMatrix : doctor::ResultType::kVector,
                                  query.time, result.trend);
    for (const auto& [instance, by_time] : result.trend) {
      for (const auto& [at, by_name] : by_time) {
        for (const auto& [name, samples] : by_name) result.record.series += samples.size();
      }
    }
  }
  if (!read) {
    const std::string body = answer->body.substr(0, 200);
    result.error = answer->status == 200 || body.starts_with("{")
                       ? read.error()
                       : "HTTP " + std::to_string(answer->status) + ": " + body;
    if (query.use == Use::kTrendAppeared) {
      result.error +=
          " (the history checks' query uses PromQL's @ modifier: Prometheus 2.33 or later)";
    }
  } else if (answer->status != 200) {
    result.error = "HTTP " + std::to_string(answer->status);
  }
}

// Every query, `concurrency` at a time, so that reading one answer overlaps Prometheus
// evaluating the next. After a failure no more are started.
std::vector<QueryResult> RunAll(const HttpUrl& url, const HttpClientOptions& client,
                                std::chrono::milliseconds timeout,
                                const std::vector<PlannedQuery>& queries, int concurrency) {
  std::vector<QueryResult> results(queries.size());
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  const auto work = [&] {
    for (size_t i = next++; i < queries.size() && !failed; i = next++) {
      log::Debug("doctor: query",
                 {{"promql", queries[i].promql},
                  {"time", Seconds(queries[i].time)},
                  {"start", queries[i].start > 0 ? Seconds(queries[i].start) : ""}});
      Run(url, client, timeout, queries[i], results[i]);
      if (!results[i].error.empty()) failed = true;
    }
  };
  std::vector<std::jthread> threads;
  const size_t count = std::clamp<size_t>(concurrency, 1, queries.size());
  for (size_t i = 1; i < count; ++i) threads.emplace_back(work);
  work();
  threads.clear();  // joins
  return results;
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

std::optional<double> ParseEvaluationTime(const std::string& text) {
  if (text.empty()) return std::nullopt;
  if (text.find_first_not_of("0123456789.") == std::string::npos) {
    double seconds = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), seconds);
    if (error != std::errc() || end != text.data() + text.size() || seconds <= 0) {
      return std::nullopt;
    }
    return seconds;
  }
  std::tm tm{};
  const char* rest = strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (rest == nullptr) return std::nullopt;
  double fraction = 0;
  if (*rest == '.') {
    const char* digits = rest + 1;
    double scale = 0.1;
    for (rest = digits; std::isdigit(static_cast<unsigned char>(*rest)); ++rest, scale /= 10) {
      fraction += (*rest - '0') * scale;
    }
    if (rest == digits) return std::nullopt;
  }
  long offset = 0;
  if (*rest == 'Z' || *rest == 'z') {
    ++rest;
  } else if (*rest == '+' || *rest == '-') {
    int hours = 0, minutes = 0;
    if (std::sscanf(rest + 1, "%2d:%2d", &hours, &minutes) != 2 || std::strlen(rest) != 6 ||
        hours > 23 || minutes > 59) {
      return std::nullopt;
    }
    offset = (*rest == '+' ? 1 : -1) * (hours * 3600L + minutes * 60L);
    rest += 6;
  } else {
    return std::nullopt;  // RFC 3339 requires the offset
  }
  if (*rest != '\0') return std::nullopt;
  const std::time_t utc = timegm(&tm);
  if (utc <= 0) return std::nullopt;
  return static_cast<double>(utc - offset) + fraction;
}

// instance -> the jobs under which it is rdmascope (has rdmascope_build_info).
using RdmascopeJobs = std::map<std::string, std::set<std::string>, std::less<>>;

// Keeps the series of rdmascope's own targets: those whose (instance, job) has
// rdmascope_build_info. Another exporter (or a recording rule, a pushgateway, a federated
// source) publishing a series of the same name for an instance could otherwise add findings
// and fix lines to its report. Returns how many samples were dropped.
size_t KeepRdmascopeSeries(const RdmascopeJobs& jobs, doctor::SeriesByName& by_name,
                           const std::string& instance) {
  const auto own = jobs.find(instance);
  size_t dropped = 0;
  for (auto& [name, samples] : by_name) {
    dropped += std::erase_if(samples, [&](const doctor::Sample& sample) {
      return own == jobs.end() || !own->second.contains(sample.Label("job"));
    });
  }
  std::erase_if(by_name, [](const auto& entry) { return entry.second.empty(); });
  return dropped;
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
    HttpClientOptions client = ClientOptions(options.prometheus_access, "prometheus");
    client.compressed = true;
    const std::string matchers =
        PrometheusMatchers(options.prometheus_selector, options.prometheus_job);
    const auto timeout = std::chrono::milliseconds(options.prometheus_timeout_ns / 1'000'000);
    const double window =
        options.window_set ? static_cast<double>(options.window_ns) / 1e9 : kDefaultWindowSeconds;
    // To the millisecond: samples scraped in the current second are after a whole-second time
    // and an instant query at it would not see them.
    const double now =
        options.prometheus_time > 0
            ? options.prometheus_time
            : std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
                  .count();
    const auto now_wall = static_cast<std::time_t>(now);

    // Every series the checks read now; at the window's start, only the counters; over the
    // last hour, the trend series' starts.
    std::vector<PlannedQuery> plan;
    for (std::string& promql : doctor::CheckSeriesQueries(matchers)) {
      plan.push_back({.promql = std::move(promql), .time = now, .use = Use::kNow});
    }
    if (window > 0) {
      for (std::string& promql : doctor::CounterSeriesQueries(matchers)) {
        plan.push_back({.promql = std::move(promql), .time = now - window, .use = Use::kBefore});
      }
    }
    const double then = now - kTrendSpanSeconds;
    plan.push_back(
        {.promql = doctor::TrendSelector(matchers), .time = then, .use = Use::kTrendThen});
    plan.push_back({.promql = doctor::TrendAppearedQuery(matchers, then),
                    .time = now,
                    .start = then + kTrendStepSeconds,
                    .use = Use::kTrendAppeared});
    // The targets that are rdmascope: rdmascope_build_info seen in the last day (a target down
    // now still counts, so that fleet drift reports it missing), named back (a function's
    // result has no __name__; label_replace may set it).
    plan.push_back({.promql = "label_replace(last_over_time(rdmascope_build_info" +
                              (matchers.empty() ? "" : "{" + matchers + "}") +
                              "[1d]), \"__name__\", \"rdmascope_build_info\", \"\", \"\")",
                    .time = now,
                    .use = Use::kIdentity});
    std::vector<QueryResult> results =
        RunAll(*url, client, timeout, plan, options.prometheus_concurrency);

    doctor::InstanceSeries now_series, before_series;
    doctor::TrendPoints trend;
    RdmascopeJobs rdmascope_jobs;
    std::vector<doctor::ReportQuery> records;
    for (size_t i = 0; i < plan.size(); ++i) {
      QueryResult& result = results[i];
      if (!result.error.empty()) {
        throw std::runtime_error("Prometheus " + options.prometheus + ": " + result.error);
      }
      result.record.promql = plan[i].promql;
      result.record.time = Rfc3339(static_cast<std::time_t>(plan[i].time));
      if (plan[i].start > 0) {
        result.record.start = Rfc3339(static_cast<std::time_t>(plan[i].start));
        result.record.step_seconds = kTrendStepSeconds;
      }
      records.push_back(std::move(result.record));
      switch (plan[i].use) {
        case Use::kNow:
          doctor::MergeSeries(std::move(result.series), now_series);
          break;
        case Use::kBefore:
          doctor::MergeSeries(std::move(result.series), before_series);
          break;
        case Use::kIdentity:
          for (const auto& [instance, by_name] : result.series) {
            for (const auto& [name, samples] : by_name) {
              for (const doctor::Sample& sample : samples) {
                rdmascope_jobs[instance].insert(sample.Label("job"));
              }
            }
          }
          break;
        default:
          for (auto& [instance, by_time] : result.trend) {
            for (auto& [at, by_name] : by_time) {
              doctor::SeriesByName& into = trend[instance][at];
              for (auto& [name, samples] : by_name) {
                std::ranges::move(samples, std::back_inserter(into[name]));
              }
            }
          }
      }
    }
    size_t foreign = 0;
    for (doctor::InstanceSeries* series : {&now_series, &before_series}) {
      for (auto& [instance, by_name] : *series) {
        foreign += KeepRdmascopeSeries(rdmascope_jobs, by_name, instance);
      }
      std::erase_if(*series, [](const auto& entry) { return entry.second.empty(); });
    }
    for (auto& [instance, by_time] : trend) {
      for (auto& [at, by_name] : by_time) {
        foreign += KeepRdmascopeSeries(rdmascope_jobs, by_name, instance);
      }
    }
    if (foreign > 0) {
      log::Info("doctor: series of targets that are not rdmascope ignored",
                {{"samples", std::to_string(foreign)},
                 {"why", "no rdmascope_build_info for their instance and job"}});
    }
    auto snapshots = doctor::SnapshotsOf(std::move(now_series), now);
    const bool any_rdmascope = std::ranges::any_of(snapshots, [](const auto& entry) {
      return entry.second.SeriesCount() > entry.second.Find("up").size();
    });
    if (!any_rdmascope) {
      throw std::runtime_error("Prometheus " + options.prometheus + " has no rdmascope series" +
                               (matchers.empty() ? "" : " matching {" + matchers + "}"));
    }
    const auto before = doctor::SnapshotsOf(std::move(before_series), now - window);
    auto histories = doctor::HistoriesOf(std::move(trend));
    std::vector<doctor::Finding> findings;
    for (auto& [instance, snapshot] : snapshots) {
      // A target Prometheus could not scrape has no fresh series (they went stale): checking
      // it would say "no data" of every check. Fleet drift says it is missing.
      if (snapshot.Value("up") == 0.0) continue;
      // Every instance has a history here (an empty one when it holds no trend series), so
      // that the history checks run as they do on a running exporter's /doctor.
      const auto history = histories.find(instance);
      snapshot.set_history(history != histories.end() ? history->second
                                                      : std::make_shared<doctor::HistoryView>());
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
               {"queries", std::to_string(plan.size())}});
    doctor::ReportContext context{
        .host = options.prometheus + (matchers.empty() ? "" : " {" + matchers + "}"),
        .generated = Rfc3339(now_wall),
        .window_seconds = window,
        .window_kind = window > 0 ? doctor::kWindowLookback : doctor::kWindowNone};
    context.queries = std::move(records);
    context.instances = snapshots.size();
    context.fixes_display_only = true;  // each fix is its instance's, none this host's
    if (!options.show_ok) doctor::CountOk(findings, context);
    return PrintDoctorReport(findings, context, options, false);
  } catch (const std::exception& e) {
    log::Error("doctor could not read the fleet", {{"err", e.what()}});
    return doctor::kExitCannotRun;
  }
}

}  // namespace rdmascope
