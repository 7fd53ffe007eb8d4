#include "core/metric_set.h"

#include <algorithm>
#include <limits>

namespace rdmascope {

namespace {

bool IsContinuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// Length of the valid UTF-8 sequence starting at in[i], or 0 if it is invalid.
size_t ValidSequenceLength(std::string_view in, size_t i) {
  const auto c = static_cast<unsigned char>(in[i]);
  size_t len = 0;
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF)
    len = 2;
  else if (c >= 0xE0 && c <= 0xEF)
    len = 3;
  else if (c >= 0xF0 && c <= 0xF4)
    len = 4;
  else
    return 0;
  if (i + len > in.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    if (!IsContinuation(static_cast<unsigned char>(in[i + k]))) return 0;
  }
  const auto c1 = static_cast<unsigned char>(in[i + 1]);
  if (c == 0xE0 && c1 < 0xA0) return 0;  // overlong
  if (c == 0xED && c1 > 0x9F) return 0;  // surrogates
  if (c == 0xF0 && c1 < 0x90) return 0;  // overlong
  if (c == 0xF4 && c1 > 0x8F) return 0;  // above U+10FFFF
  return len;
}

}  // namespace

std::string SanitizeUtf8(std::string_view in) {
  // Nearly every label value is plain ASCII: one pass to check, one copy.
  if (std::ranges::all_of(in, [](char c) { return static_cast<unsigned char>(c) < 0x80; })) {
    return std::string(in);
  }
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size();) {
    const size_t len = ValidSequenceLength(in, i);
    if (len == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(in.substr(i, len));
      i += len;
    }
  }
  return out;
}

bool MetricSet::Add(const MetricDesc& desc, std::initializer_list<Label> labels, double value) {
  return AddImpl(desc, labels, value);
}

bool MetricSet::Add(const MetricDesc& desc, const std::vector<Label>& labels, double value) {
  return AddImpl(desc, labels, value);
}

bool MetricSet::AddHistogram(const MetricDesc& desc, std::initializer_list<Label> labels,
                             const std::vector<Bucket>& buckets, double sum, uint64_t count) {
  prometheus::ClientMetric::Histogram histogram;
  histogram.sample_count = count;
  histogram.sample_sum = sum;
  for (const Bucket& bucket : buckets) {
    histogram.bucket.push_back({bucket.cumulative_count, bucket.upper_bound});
  }
  histogram.bucket.push_back({count, std::numeric_limits<double>::infinity()});
  return AddImpl(desc, labels, 0, &histogram);
}

template <typename LabelRange>
bool MetricSet::AddImpl(const MetricDesc& desc, const LabelRange& labels, double value,
                        prometheus::ClientMetric::Histogram* histogram) {
  // Found without building a key string: a scrape adds thousands of samples to a few families.
  auto it = by_name_.find(desc.name);
  if (it == by_name_.end()) {
    it = by_name_.try_emplace(std::string(desc.name)).first;
    it->second.index = families_.size();
    prometheus::MetricFamily family;
    family.name = std::string(desc.name);
    family.help = std::string(desc.help);
    family.type = desc.type;
    families_.push_back(std::move(family));
  }
  prometheus::MetricFamily& family = families_[it->second.index];
  if (family.type != desc.type) {
    ++dropped_duplicates_;
    return false;
  }

  prometheus::ClientMetric metric;
  metric.label.reserve(labels.size());
  std::string key;
  for (const auto& [name, raw_value] : labels) {
    std::string label_value = SanitizeUtf8(raw_value);
    key.append(name).push_back('\0');
    key.append(label_value).push_back('\0');
    metric.label.push_back({std::string(name), std::move(label_value)});
  }
  if (!it->second.series.insert(std::move(key)).second) {
    ++dropped_duplicates_;
    return false;
  }
  switch (desc.type) {
    case prometheus::MetricType::Counter:
      metric.counter.value = value;
      break;
    case prometheus::MetricType::Gauge:
      metric.gauge.value = value;
      break;
    case prometheus::MetricType::Histogram:
      if (histogram != nullptr) metric.histogram = std::move(*histogram);
      break;
    default:
      metric.untyped.value = value;
      break;
  }
  family.metric.push_back(std::move(metric));
  ++samples_;
  return true;
}

std::vector<prometheus::MetricFamily> MetricSet::Take() {
  by_name_.clear();
  samples_ = 0;
  std::vector<prometheus::MetricFamily> out = std::move(families_);
  families_.clear();
  return out;
}

}  // namespace rdmascope
