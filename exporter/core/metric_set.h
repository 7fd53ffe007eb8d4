// MetricSet: what a collector fills during one scrape. It groups samples into families in
// first-use order (so output is deterministic), keeps label values valid UTF-8, and refuses
// duplicate series: Prometheus rejects a whole scrape that carries one, so one bad driver
// string must cost one series, not the scrape.
#pragma once

#include <prometheus/metric_family.h>
#include <prometheus/metric_type.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace rdmascope {

struct MetricDesc {
  std::string_view name;
  std::string_view help;
  prometheus::MetricType type;
};

// Views, not copies: a scrape adds thousands of samples and copying every label would double
// its allocations. The viewed strings must outlive the Add() call: build labels from members or
// named locals, never from temporaries kept in a named vector
// (`std::vector<Label> l{{"pid", std::to_string(pid)}}` dangles).
using Label = std::pair<std::string_view, std::string_view>;

class MetricSet {
 public:
  // Adds one sample. Returns false (and adds nothing) for a duplicate series or a family
  // redeclared with another type.
  bool Add(const MetricDesc& desc, std::initializer_list<Label> labels, double value);
  bool Add(const MetricDesc& desc, const std::vector<Label>& labels, double value);

  struct Bucket {
    double upper_bound;
    uint64_t cumulative_count;
  };
  // A histogram sample; buckets in increasing order, without +Inf (added from `count`).
  bool AddHistogram(const MetricDesc& desc, std::initializer_list<Label> labels,
                    const std::vector<Bucket>& buckets, double sum, uint64_t count);

  size_t dropped_duplicates() const { return dropped_duplicates_; }
  size_t sample_count() const { return samples_; }

  // Moves the families out, in first-use order.
  std::vector<prometheus::MetricFamily> Take();

 private:
  template <typename LabelRange>
  bool AddImpl(const MetricDesc& desc, const LabelRange& labels, double value,
               prometheus::ClientMetric::Histogram* histogram = nullptr);

  struct FamilyState {
    size_t index;
    std::unordered_set<std::string> series;  // serialised label sets seen
  };
  // Transparent: find() takes the descriptor's string_view as it is.
  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view name) const { return std::hash<std::string_view>{}(name); }
  };
  std::vector<prometheus::MetricFamily> families_;
  std::unordered_map<std::string, FamilyState, NameHash, std::equal_to<>> by_name_;
  size_t dropped_duplicates_ = 0;
  size_t samples_ = 0;
};

// Replaces bytes that are not valid UTF-8 by U+FFFD so that the exposition stays parseable
// whatever a driver or a hostile interface name contains.
std::string SanitizeUtf8(std::string_view in);

}  // namespace rdmascope
