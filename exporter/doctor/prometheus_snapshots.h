// doctor over a fleet (`doctor --prometheus`): the snapshots the checks read, one per host
// (instance), built from a Prometheus' instant queries instead of a local collection, so that
// every check runs unchanged on every host the Prometheus scrapes (issue 29).
//
// Only the series the checks read are asked for (kCheckSeries, by name in one selector per
// query) and, of rdma_ethtool_stat's hundreds per netdev, only the stats they read: a fleet of
// 1,000 hosts is some hundred thousand series, not every one rdmascope exports. The collectors'
// outcomes come from rdmascope_collector_success and rdmascope_collector_no_data, so that a
// check whose collector failed on a host is a skip there, as it is locally.
#pragma once

#include <expected>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "doctor/prometheus_answer.h"
#include "doctor/samples.h"

namespace rdmascope::doctor {

// The series every check reads (DoctorPrometheus.CheckSeriesAreWhatTheChecksRead fails when a
// check reads one that is not listed), and the rdma_ethtool_stat stats among them.
extern const std::vector<std::string_view> kCheckSeries;
extern const std::vector<std::string_view> kCheckEthtoolStats;

// The PromQL selectors asking for those series (a few, to keep each answer and each regex
// short), each with `matchers` added: `cluster="a",job="rdmascope"` (may be empty).
std::vector<std::string> CheckSeriesQueries(const std::string& matchers);
// The same for the counters the window checks compare (history.h kWindowSeries and the
// ethtool stats of kWindowEthtoolStats): all that is asked at the window's start, a fifth of
// the series.
std::vector<std::string> CounterSeriesQueries(const std::string& matchers);

// The trend series the history checks read (history.h kTrendSeries), as `serve` keeps them
// for an hour: asked at the hour's start (TrendSelector, an instant query), and, over the hour,
// the series that were not there then (TrendAppearedQuery, a range query: on a steady host it
// answers nothing). `@` needs Prometheus 2.33 or later.
std::string TrendSelector(const std::string& matchers);
std::string TrendAppearedQuery(const std::string& matchers, double then);

// instance -> name -> its series.
using InstanceSeries = std::map<std::string, SeriesByName, std::less<>>;

// One instant query's answer (Prometheus' /api/v1/query JSON, a vector) added to `by_instance`.
// An error answer, another result type or a malformed document is an error saying what it is,
// and adds nothing; samples without an instance label or with a value that is not a number are
// skipped.
// The answer's warnings (a partial answer) go to `warnings` when given.
std::expected<void, std::string> AddQueryAnswer(std::string_view body, InstanceSeries& by_instance,
                                                std::vector<std::string>* warnings = nullptr);
// The fleet rules' group figures (fleet_drift.h FleetReference), without matchers: they carry
// no instance or job to match, and each host's rows find their own group by its labels.
std::string FleetReferenceQuery();
// Its answer: the samples without instance and job labels, by name, added to `groups`.
std::expected<void, std::string> AddGroupAnswer(std::string_view body, SeriesByName& groups,
                                                std::vector<std::string>* warnings = nullptr);
// Moves the series of `from` into `into` (a name's samples join those already there).
void MergeSeries(InstanceSeries&& from, InstanceSeries& into);

// The trend series' earliest points: instance -> time -> series first seen then.
using TrendPoints = std::map<std::string, std::map<double, SeriesByName>>;
// One answer of the trend queries added: an instant vector's series at `seconds` (the
// evaluation time), a range matrix's at their first point.
std::expected<void, std::string> AddTrendAnswer(std::string_view body, ResultType type,
                                                double seconds, TrendPoints& points,
                                                std::vector<std::string>* warnings = nullptr);
// Each instance's history, as a running exporter's /doctor would attach it: a kept snapshot per
// time a trend series was first seen, so that HistoryView::Earliest finds each one's start.
std::map<std::string, std::shared_ptr<const HistoryView>> HistoriesOf(TrendPoints points);

// The snapshot of each instance, taken at `seconds` (Prometheus' evaluation time), with its
// collectors' outcomes from the rdmascope_collector_* series among its own.
std::map<std::string, Snapshot> SnapshotsOf(InstanceSeries by_instance, double seconds);

}  // namespace rdmascope::doctor
