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

// boost::hash_combine's mixing, widened to 64 bits.
uint64_t HashCombine(uint64_t seed, uint64_t value) {
  return seed ^ (value + 0x9e3779b97f4a7c15ULL + (seed << 12) + (seed >> 4));
}

using Labels = std::vector<prometheus::ClientMetric::Label>;

// Whether Prometheus sees one series: the same non-empty labels, in any order (a handful each).
bool SameSeries(const Labels& a, const Labels& b) {
  const auto non_empty = [](const prometheus::ClientMetric::Label& l) { return !l.value.empty(); };
  const auto contains_all = [&](const Labels& x, const Labels& y) {
    return std::ranges::all_of(x, [&](const prometheus::ClientMetric::Label& label) {
      return label.value.empty() || std::ranges::any_of(y, [&](const auto& other) {
               return other.name == label.name && other.value == label.value;
             });
    });
  };
  // Both ways: a label name repeated on one side ({x,x} against {x,y}) is no match.
  return std::ranges::count_if(a, non_empty) == std::ranges::count_if(b, non_empty) &&
         contains_all(a, b) && contains_all(b, a);
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
  return AddHistogram(desc, std::vector<Label>(labels), buckets, sum, count);
}

bool MetricSet::AddHistogram(const MetricDesc& desc, const std::vector<Label>& labels,
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
  // A scrape adds thousands of samples to a few families, mostly several in a row to one:
  // the last family is compared first, then looked up without building a key string.
  if (last_ == nullptr || last_->first != desc.name) {
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
    last_ = &*it;  // elements of an unordered_map stay where they are when it rehashes
  }
  FamilyState& state = last_->second;
  prometheus::MetricFamily& family = families_[state.index];
  if (family.type != desc.type) {
    ++dropped_duplicates_;
    return false;
  }

  prometheus::ClientMetric metric;
  metric.label.reserve(labels.size());
  // Summed per label: Prometheus sorts a series' labels, so {a,b} and {b,a} are one series;
  // and a label with an empty value is no label to it, so {a,b=""} and {a} are one too.
  uint64_t hash = 0;
  for (const auto& [name, raw_value] : labels) {
    metric.label.push_back({std::string(name), SanitizeUtf8(raw_value)});
    if (raw_value.empty()) continue;
    hash += HashCombine(std::hash<std::string_view>{}(name),
                        std::hash<std::string_view>{}(metric.label.back().value));
  }
  if ((state.hashes.size() + 1) * 2 > state.slots.size()) Grow(state);
  uint32_t* slot = FindSlot(state, family, metric, hash);
  if (*slot != 0) {
    ++dropped_duplicates_;
    return false;
  }
  *slot = static_cast<uint32_t>(family.metric.size() + 1);
  state.hashes.push_back(hash);
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

uint32_t* MetricSet::FindSlot(FamilyState& state, const prometheus::MetricFamily& family,
                              const prometheus::ClientMetric& metric, uint64_t hash) {
  const size_t mask = state.slots.size() - 1;
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    uint32_t& slot = state.slots[i];
    if (slot == 0) return &slot;
    if (state.hashes[slot - 1] != hash) continue;
    if (SameSeries(family.metric[slot - 1].label, metric.label)) return &slot;
  }
}

void MetricSet::Grow(FamilyState& state) {
  state.slots.assign(std::max<size_t>(16, state.slots.size() * 2), 0);
  const size_t mask = state.slots.size() - 1;
  for (size_t series = 0; series < state.hashes.size(); ++series) {
    size_t i = state.hashes[series] & mask;
    while (state.slots[i] != 0) i = (i + 1) & mask;
    state.slots[i] = static_cast<uint32_t>(series + 1);
  }
}

std::vector<prometheus::MetricFamily> MetricSet::Take() {
  last_ = nullptr;
  by_name_.clear();
  samples_ = 0;
  std::vector<prometheus::MetricFamily> out = std::move(families_);
  families_.clear();
  return out;
}

}  // namespace rdmascope
