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
#include <string>
#include <string_view>
#include <vector>

#include "doctor/samples.h"

namespace rdmascope::doctor {

// The series every check reads (DoctorPrometheus.CheckSeriesAreWhatTheChecksRead fails when a
// check reads one that is not listed), and the rdma_ethtool_stat stats among them.
extern const std::vector<std::string_view> kCheckSeries;
extern const std::vector<std::string_view> kCheckEthtoolStats;

// The PromQL selectors asking for those series (a few, to keep each answer and each regex
// short), each with `matchers` added: `cluster="a",job="rdmascope"` (may be empty).
std::vector<std::string> CheckSeriesQueries(const std::string& matchers);

// One query's answer (Prometheus' /api/v1/query JSON, a vector) added to `by_instance`:
// instance -> its series. An error answer, another result type or a malformed document is an
// error saying what it is; samples without an instance label or with a value that is not a
// number are skipped.
using InstanceSeries = std::map<std::string, std::vector<prometheus::MetricFamily>>;
std::expected<void, std::string> AddQueryAnswer(std::string_view body, InstanceSeries& by_instance);

// The snapshot of each instance, taken at `seconds` (Prometheus' evaluation time), with its
// collectors' outcomes from the rdmascope_collector_* series among its own.
std::map<std::string, Snapshot> SnapshotsOf(const InstanceSeries& by_instance, double seconds);

}  // namespace rdmascope::doctor
