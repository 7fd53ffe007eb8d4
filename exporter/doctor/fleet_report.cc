#include "doctor/fleet_report.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <ctime>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <thread>

#include "core/log.h"
#include "doctor/checks.h"
#include "doctor/fleet_drift.h"
#include "doctor/fleet_rules.h"
#include "doctor/prometheus_snapshots.h"
#include "doctor/promql_client.h"
#include "doctor/report.h"

namespace rdmascope::doctor {
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
// kReference: the fleet rules' group figures (FleetReference).
enum class Use { kNow, kBefore, kTrendThen, kTrendAppeared, kIdentity, kReference };

struct PlannedQuery {
  std::string promql;
  double time = 0;   // the evaluation time (an instant query) or the range's end
  double start = 0;  // a range query from here to `time`, kTrendStepSeconds apart; 0: instant
  Use use = Use::kNow;
};

// The history checks' queries: without them (a Prometheus older than 2.33 has no @ modifier;
// one that times out on an hour of trend series) the history checks skip, not the report.
bool Optional(Use use) { return use == Use::kTrendThen || use == Use::kTrendAppeared; }

struct QueryResult {
  std::string error;                  // empty: answered
  std::vector<std::string> warnings;  // a partial answer's
  InstanceSeries series;
  SeriesByName groups;  // kReference's
  TrendPoints trend;
  ReportQuery record;
};

// One query, its answer read into `result` (on its own thread: nothing shared).
void Run(PromqlTransport& prometheus, const PlannedQuery& query, QueryResult& result) {
  const bool range = query.start > 0;
  const std::string target =
      QueryTarget(query.promql, query.time, query.start, range ? kTrendStepSeconds : 0);
  const auto started = std::chrono::steady_clock::now();
  const auto answer = prometheus.Get(target);
  result.record.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (!answer) {
    result.error = answer.error();
    return;
  }
  result.record.bytes = answer->body.size();
  // Prometheus answers its errors (400 bad query, 422 execution, 503 timeout) as JSON too.
  std::expected<void, std::string> read;
  if (query.use == Use::kReference) {
    read = AddGroupAnswer(answer->body, result.groups, &result.warnings);
    for (const auto& [name, samples] : result.groups) result.record.series += samples.size();
  } else if (query.use == Use::kNow || query.use == Use::kBefore || query.use == Use::kIdentity) {
    read = AddQueryAnswer(answer->body, result.series, &result.warnings);
    for (const auto& [instance, by_name] : result.series) {
      for (const auto& [name, samples] : by_name) result.record.series += samples.size();
    }
  } else {
    read = AddTrendAnswer(answer->body, range ? ResultType::kMatrix : ResultType::kVector,
                          query.time, result.trend, &result.warnings);
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
      result.error += " (this query uses PromQL's @ modifier: Prometheus 2.33 or later)";
    }
  } else if (answer->status != 200) {
    result.error = "HTTP " + std::to_string(answer->status);
  }
}

// Every query, `concurrency` at a time, so that reading one answer overlaps Prometheus
// evaluating the next. After a failure of a query the report needs, no more are started.
std::vector<QueryResult> RunAll(PromqlTransport& prometheus,
                                const std::vector<PlannedQuery>& queries, int concurrency) {
  std::vector<QueryResult> results(queries.size());
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  const auto work = [&] {
    for (size_t i = next++; i < queries.size() && !failed; i = next++) {
      log::Debug("doctor: query",
                 {{"promql", queries[i].promql},
                  {"time", std::to_string(queries[i].time)},
                  {"start", queries[i].start > 0 ? std::to_string(queries[i].start) : ""}});
      Run(prometheus, queries[i], results[i]);
      if (!results[i].error.empty() && !Optional(queries[i].use)) failed = true;
    }
  };
  std::vector<std::jthread> threads;
  const size_t count = std::clamp<size_t>(concurrency, 1, queries.size());
  for (size_t i = 1; i < count; ++i) threads.emplace_back(work);
  work();
  threads.clear();  // joins
  return results;
}

// A fleet drift finding made over a partial answer: what it judged may be missing hosts.
Finding CouldNotJudge(Finding finding) {
  if (finding.severity == Severity::kSkip) return finding;
  finding.severity = Severity::kSkip;
  finding.observed =
      "could not judge: Prometheus answered partially (see the report's warnings), "
      "so peers may be missing";
  finding.advice.clear();
  finding.fix.clear();
  return finding;
}

// instance -> the jobs under which it is rdmascope (has rdmascope_build_info).
using RdmascopeJobs = std::map<std::string, std::set<std::string>, std::less<>>;

// Keeps the series of rdmascope's own targets: those whose (instance, job) has
// rdmascope_build_info. Another exporter (or a recording rule, a pushgateway, a federated
// source) publishing a series of the same name for an instance could otherwise add findings
// and fix lines to its report. Returns how many samples were dropped.
size_t KeepRdmascopeSeries(const RdmascopeJobs& jobs, SeriesByName& by_name,
                           const std::string& instance) {
  const auto own = jobs.find(instance);
  size_t dropped = 0;
  for (auto& [name, samples] : by_name) {
    dropped += std::erase_if(samples, [&](const Sample& sample) {
      return own == jobs.end() || !own->second.contains(sample.Label("job"));
    });
  }
  std::erase_if(by_name, [](const auto& entry) { return entry.second.empty(); });
  return dropped;
}

}  // namespace

ParsedReport ReportFromPrometheus(const DoctorOptions& options) {
  const auto url = ParseHttpUrl(options.prometheus);
  if (!url) throw std::runtime_error("--prometheus " + options.prometheus + ": " + url.error());
  HttpClientOptions client = ClientOptions(options.prometheus_access, "prometheus");
  client.compressed = true;
  const auto transport =
      HttpPromqlTransport(*url, std::move(client),
                          std::chrono::milliseconds(options.prometheus_timeout_ns / 1'000'000));
  return ReportFromPrometheus(options, *transport);
}

ParsedReport ReportFromPrometheus(const DoctorOptions& options, PromqlTransport& prometheus) {
  {
    const std::string matchers =
        PrometheusMatchers(options.prometheus_selector, options.prometheus_job);
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
    for (std::string& promql : CheckSeriesQueries(matchers)) {
      plan.push_back({.promql = std::move(promql), .time = now, .use = Use::kNow});
    }
    if (window > 0) {
      for (std::string& promql : CounterSeriesQueries(matchers)) {
        plan.push_back({.promql = std::move(promql), .time = now - window, .use = Use::kBefore});
      }
    }
    const double then = now - kTrendSpanSeconds;
    plan.push_back({.promql = TrendSelector(matchers), .time = then, .use = Use::kTrendThen});
    plan.push_back({.promql = TrendAppearedQuery(matchers, then),
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
    plan.push_back({.promql = FleetReferenceQuery(), .time = now, .use = Use::kReference});
    std::vector<QueryResult> results = RunAll(prometheus, plan, options.prometheus_concurrency);

    InstanceSeries now_series, before_series;
    TrendPoints trend;
    RdmascopeJobs rdmascope_jobs;
    SeriesByName groups;
    std::vector<ReportQuery> records;
    // A partial answer (`warnings`) of a query the checks read makes fleet drift "could not
    // judge": a host whose series were not answered would look like a host without RDMA, and
    // its peer group would shrink unseen. One of the history queries' makes the history checks
    // skip, as its failure does.
    std::string history_unavailable;
    bool partial = false;
    std::vector<std::string> warnings;
    for (size_t i = 0; i < plan.size(); ++i) {
      QueryResult& result = results[i];
      if (!result.error.empty() && !Optional(plan[i].use)) {
        throw std::runtime_error("Prometheus " + options.prometheus + ": " + result.error);
      }
      if (!result.error.empty() || !result.warnings.empty()) {
        if (Optional(plan[i].use) && history_unavailable.empty()) {
          history_unavailable =
              "Prometheus could not answer the history query: " +
              (result.error.empty() ? "a partial answer (" + result.warnings.front() + ")"
                                    : result.error);
          warnings.push_back("history checks skipped: " + history_unavailable);
        }
        partial |= !Optional(plan[i].use) && !result.warnings.empty();
        for (const std::string& warning : result.warnings) {
          if (std::ranges::find(warnings, "partial answer: " + warning) == warnings.end()) {
            warnings.push_back("partial answer: " + warning);
          }
        }
        if (!result.error.empty()) continue;  // an optional query: nothing to read
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
          MergeSeries(std::move(result.series), now_series);
          break;
        case Use::kBefore:
          MergeSeries(std::move(result.series), before_series);
          break;
        case Use::kReference:
          for (auto& [name, samples] : result.groups) {
            std::ranges::move(samples, std::back_inserter(groups[name]));
          }
          break;
        case Use::kIdentity:
          for (const auto& [instance, by_name] : result.series) {
            for (const auto& [name, samples] : by_name) {
              for (const Sample& sample : samples) {
                rdmascope_jobs[instance].insert(sample.Label("job"));
              }
            }
          }
          break;
        default:
          for (auto& [instance, by_time] : result.trend) {
            for (auto& [at, by_name] : by_time) {
              SeriesByName& into = trend[instance][at];
              for (auto& [name, samples] : by_name) {
                std::ranges::move(samples, std::back_inserter(into[name]));
              }
            }
          }
      }
    }
    size_t foreign = 0;
    for (InstanceSeries* series : {&now_series, &before_series}) {
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
    auto snapshots = SnapshotsOf(std::move(now_series), now);
    const bool any_rdmascope = std::ranges::any_of(snapshots, [](const auto& entry) {
      return entry.second.SeriesCount() > entry.second.Find("up").size();
    });
    if (!any_rdmascope) {
      throw std::runtime_error("Prometheus " + options.prometheus + " has no rdmascope series" +
                               (matchers.empty() ? "" : " matching {" + matchers + "}"));
    }
    const auto before = SnapshotsOf(std::move(before_series), now - window);
    auto histories = HistoriesOf(std::move(trend));
    std::vector<Finding> findings;
    for (auto& [instance, snapshot] : snapshots) {
      // A target Prometheus could not scrape has no fresh series (they went stale): checking
      // it would say "no data" of every check. Fleet drift says it is missing.
      if (snapshot.Value("up") == 0.0) continue;
      // Every instance has a history here (an empty one when it holds no trend series), so
      // that the history checks run as they do on a running exporter's /doctor; none, and the
      // history checks say why, when Prometheus could not answer for it.
      if (!history_unavailable.empty()) {
        snapshot.set_no_history_reason(history_unavailable);
      } else {
        const auto history = histories.find(instance);
        snapshot.set_history(history != histories.end() ? history->second
                                                        : std::make_shared<HistoryView>());
      }
      const auto earlier = before.find(instance);
      for (Finding& finding :
           RunChecks(snapshot, earlier == before.end() ? nullptr : &earlier->second, options)) {
        finding.scope.insert(finding.scope.begin(), {"instance", instance});
        findings.push_back(std::move(finding));
      }
    }
    // Each host against its peers (fleet drift), targets that are down among them.
    FleetReference reference;
    if (const auto it = groups.find(std::string(fleet_rules::kSettingHostsSeries));
        it != groups.end()) {
      reference.setting_hosts = std::move(it->second);
    }
    if (const auto it = groups.find(std::string(fleet_rules::kErrorMedianSeries));
        it != groups.end()) {
      reference.error_medians = std::move(it->second);
    }
    for (Finding& finding : FleetDrift(snapshots, before, options, reference)) {
      if (partial) finding = CouldNotJudge(std::move(finding));
      findings.push_back(std::move(finding));
    }
    SortFindings(findings);  // stable: each check's hosts stay in instance order
    log::Info("doctor: fleet report from Prometheus",
              {{"url", options.prometheus},
               {"instances", std::to_string(snapshots.size())},
               {"queries", std::to_string(plan.size())}});
    ReportContext context{
        .host = options.prometheus + (matchers.empty() ? "" : " {" + matchers + "}"),
        .generated = Rfc3339(now_wall),
        .window_seconds = window,
        .window_kind = window > 0 ? kWindowLookback : kWindowNone};
    context.queries = std::move(records);
    context.instances = snapshots.size();
    context.fixes_display_only = true;  // each fix is its instance's, none this host's
    context.warnings = std::move(warnings);
    for (const std::string& warning : context.warnings) log::Warn("doctor: " + warning);
    if (!options.show_ok) CountOk(findings, context);
    return ParsedReport{.findings = std::move(findings), .context = std::move(context)};
  }
}

}  // namespace rdmascope::doctor
