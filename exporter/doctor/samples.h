// A snapshot of what the collectors produced in one run (the families /metrics would serve),
// indexed so that checks find series by name and labels, plus each collector's outcome. Checks
// read only this: they never touch the host, so doctor and the exporter cannot disagree.
#pragma once

#include <prometheus/metric_family.h>

#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rdmascope::doctor {

struct Sample {
  std::map<std::string, std::string> labels;
  double value = 0;

  // The label's value, "" when absent (as PromQL treats a missing label).
  const std::string& Label(const std::string& name) const;
};

// How a collector fared in this run; a collector absent from the map was disabled.
struct CollectorOutcome {
  bool failed = false;
  bool no_data = false;
  std::string detail;       // the error of a failed collector, or what it saw
  std::string probe_error;  // why its eBPF probes did not attach (empty if they did)
};

using Matchers = std::vector<std::pair<std::string, std::string>>;  // label == value, all

class Snapshot;

// What a running exporter kept over time (doctor/history.h), attached to the snapshot of a
// /doctor request. Snapshots doctor collected itself have none: their history checks skip.
struct HistoryView {
  double started_seconds = 0;   // when the first collection offered ran
  double lookback_seconds = 0;  // what counter rates are judged over (serve --doctor.lookback)
  // Window series only (history.h kWindowSeries), oldest first, none older than the lookback
  // when the last one was offered.
  std::vector<std::shared_ptr<const Snapshot>> counters;
  std::vector<std::shared_ptr<const Snapshot>> kept;  // trend series only, oldest first

  // The collection counter rates at `now_seconds` are judged against: the oldest counter
  // snapshot no older than the lookback, so that nothing older is counted (the window is then
  // at most one spacing shorter than the lookback); the start when the exporter is younger.
  // When every one is older (the tick stalled), the newest: its window_seconds says how long.
  // nullptr when none was taken before `now_seconds`.
  const Snapshot* CounterBase(double now_seconds) const;
  // Whether `base` is the exporter's first collection: rates "since start".
  bool IsStart(const Snapshot& base) const;

  // The oldest kept snapshot holding the series `name` with exactly these labels, nullptr when
  // none does (the subject appeared after the last kept snapshot).
  const Snapshot* Earliest(std::string_view name,
                           const std::map<std::string, std::string>& labels) const;
};

// Part of a family: the series of `name` whose `label` is one of `values` (rdma_ethtool_stat's
// rx_packets and tx_packets among the hundreds of stats a driver lists).
struct SeriesSelector {
  std::string_view name;
  std::string_view label;
  std::span<const std::string_view> values;
};

// Series by name, as a snapshot keeps them.
using SeriesByName = std::map<std::string, std::vector<Sample>, std::less<>>;

class Snapshot {
 public:
  // `seconds`: when the collection ran, on a monotonic clock (only differences matter).
  // Histograms are indexed as NAME_sum and NAME_count.
  Snapshot(const std::vector<prometheus::MetricFamily>& families, double seconds,
           std::map<std::string, CollectorOutcome> collectors = {});
  // Series already as samples: what `doctor --prometheus` reads from the query API.
  Snapshot(SeriesByName series, double seconds,
           std::map<std::string, CollectorOutcome> collectors = {});

  // Series of `name` whose labels equal every matcher, in exposition order.
  std::vector<const Sample*> Find(std::string_view name, const Matchers& matchers = {}) const;
  // The first such series' value.
  std::optional<double> Value(std::string_view name, const Matchers& matchers = {}) const;
  // The series of `name` with exactly these labels.
  const Sample* Exact(std::string_view name,
                      const std::map<std::string, std::string>& labels) const;

  double seconds() const { return seconds_; }

  // A copy holding only the series of these names, and of `selected` the series whose label
  // has one of the values (and no collector outcomes): what the history rings keep, so that
  // their memory grows with the series the checks read, not with /metrics.
  Snapshot Only(std::span<const std::string_view> names,
                std::span<const SeriesSelector> selected = {}) const;
  size_t SeriesCount() const;

  // The exporter's history, when the snapshot was taken by `serve` for /doctor; else nullptr.
  const HistoryView* history() const { return history_.get(); }
  void set_history(std::shared_ptr<const HistoryView> history) { history_ = std::move(history); }
  // Why there is no history, when it is not that doctor collected itself (check_util.h
  // kNoExporter): a fleet whose Prometheus could not answer the history queries.
  const std::string& no_history_reason() const { return no_history_reason_; }
  void set_no_history_reason(std::string why) { no_history_reason_ = std::move(why); }

  // Why data of `collector` is missing from this snapshot: disabled, or failed with its error.
  // nullopt when it ran (and when the snapshot records no collectors at all, as in tests that
  // build families by hand).
  std::optional<std::string> Unavailable(std::string_view collector) const;
  const std::map<std::string, CollectorOutcome>& collectors() const { return collectors_; }

 private:
  SeriesByName series_;
  double seconds_;
  std::map<std::string, CollectorOutcome> collectors_;
  std::shared_ptr<const HistoryView> history_;
  std::string no_history_reason_;
};

// The increase of counter series `series` (taken from the later snapshot) since `before`;
// nullopt when it is absent from `before`, or went down (a counter reset: a driver reload, a reused
// pid), which gives no honest figure.
std::optional<double> Increase(const Snapshot& before, std::string_view name, const Sample& series);
// The same per second; nullopt also when no time passed.
std::optional<double> Rate(const Snapshot& now, const Snapshot& before, std::string_view name,
                           const Sample& series);

}  // namespace rdmascope::doctor
