#include "doctor/samples.h"

#include <algorithm>

namespace rdmascope::doctor {
namespace {

using prometheus::MetricType;

double ValueOf(const prometheus::ClientMetric& metric, MetricType type) {
  switch (type) {
    case MetricType::Counter:
      return metric.counter.value;
    case MetricType::Gauge:
      return metric.gauge.value;
    default:
      return metric.untyped.value;
  }
}

}  // namespace

const std::string& Sample::Label(const std::string& name) const {
  static const std::string kEmpty;
  const auto it = labels.find(name);
  return it == labels.end() ? kEmpty : it->second;
}

Snapshot::Snapshot(const std::vector<prometheus::MetricFamily>& families, double seconds,
                   std::map<std::string, CollectorOutcome> collectors)
    : seconds_(seconds), collectors_(std::move(collectors)) {
  for (const prometheus::MetricFamily& family : families) {
    for (const prometheus::ClientMetric& metric : family.metric) {
      Sample sample;
      for (const auto& label : metric.label) sample.labels[label.name] = label.value;
      if (family.type == MetricType::Histogram || family.type == MetricType::Summary) {
        const bool histogram = family.type == MetricType::Histogram;
        Sample count = sample;
        sample.value = histogram ? metric.histogram.sample_sum : metric.summary.sample_sum;
        count.value = static_cast<double>(histogram ? metric.histogram.sample_count
                                                    : metric.summary.sample_count);
        series_[family.name + "_sum"].push_back(std::move(sample));
        series_[family.name + "_count"].push_back(std::move(count));
      } else {
        sample.value = ValueOf(metric, family.type);
        series_[family.name].push_back(std::move(sample));
      }
    }
  }
}

Snapshot::Snapshot(SeriesByName series, double seconds,
                   std::map<std::string, CollectorOutcome> collectors)
    : series_(std::move(series)), seconds_(seconds), collectors_(std::move(collectors)) {}

std::vector<const Sample*> Snapshot::Find(std::string_view name, const Matchers& matchers) const {
  std::vector<const Sample*> found;
  const auto it = series_.find(name);
  if (it == series_.end()) return found;
  for (const Sample& sample : it->second) {
    bool match = true;
    for (const auto& [label, value] : matchers) match &= sample.Label(label) == value;
    if (match) found.push_back(&sample);
  }
  return found;
}

std::optional<double> Snapshot::Value(std::string_view name, const Matchers& matchers) const {
  const auto found = Find(name, matchers);
  if (found.empty()) return std::nullopt;
  return found.front()->value;
}

const Sample* Snapshot::Exact(std::string_view name,
                              const std::map<std::string, std::string>& labels) const {
  const auto it = series_.find(name);
  if (it == series_.end()) return nullptr;
  for (const Sample& sample : it->second) {
    if (sample.labels == labels) return &sample;
  }
  return nullptr;
}

Snapshot Snapshot::Only(std::span<const std::string_view> names,
                        std::span<const SeriesSelector> selected) const {
  Snapshot copy(SeriesByName{}, seconds_);
  for (std::string_view name : names) {
    if (const auto it = series_.find(name); it != series_.end()) copy.series_.insert(*it);
  }
  for (const SeriesSelector& selector : selected) {
    const auto it = series_.find(selector.name);
    if (it == series_.end()) continue;
    const std::string label(selector.label);
    for (const Sample& sample : it->second) {
      if (std::ranges::find(selector.values, std::string_view(sample.Label(label))) !=
          selector.values.end()) {
        copy.series_[it->first].push_back(sample);
      }
    }
  }
  return copy;
}

size_t Snapshot::SeriesCount() const {
  size_t count = 0;
  for (const auto& [name, series] : series_) count += series.size();
  return count;
}

const Snapshot* HistoryView::Earliest(std::string_view name,
                                      const std::map<std::string, std::string>& labels) const {
  for (const auto& snapshot : kept) {
    if (snapshot->Exact(name, labels) != nullptr) return snapshot.get();
  }
  return nullptr;
}

const Snapshot* HistoryView::CounterBase(double now_seconds) const {
  const Snapshot* newest = nullptr;
  for (const auto& snapshot : counters) {
    if (snapshot->seconds() >= now_seconds) break;
    if (now_seconds - snapshot->seconds() <= lookback_seconds) return snapshot.get();
    newest = snapshot.get();
  }
  return newest;
}

bool HistoryView::IsStart(const Snapshot& base) const { return base.seconds() == started_seconds; }

std::optional<std::string> Snapshot::Unavailable(std::string_view collector) const {
  if (collectors_.empty()) return std::nullopt;
  const auto it = collectors_.find(std::string(collector));
  if (it == collectors_.end()) {
    return "collector " + std::string(collector) + " is disabled (--collector." +
           std::string(collector) + " enables it)";
  }
  if (it->second.failed) {
    return "collector " + std::string(collector) + " failed: " + it->second.detail;
  }
  return std::nullopt;
}

std::optional<double> Increase(const Snapshot& before, std::string_view name,
                               const Sample& series) {
  const Sample* earlier = before.Exact(name, series.labels);
  if (earlier == nullptr || series.value < earlier->value) return std::nullopt;
  return series.value - earlier->value;
}

std::optional<double> Rate(const Snapshot& now, const Snapshot& before, std::string_view name,
                           const Sample& series) {
  const double elapsed = now.seconds() - before.seconds();
  if (elapsed <= 0) return std::nullopt;
  const auto increase = Increase(before, name, series);
  if (!increase) return std::nullopt;
  return *increase / elapsed;
}

}  // namespace rdmascope::doctor
