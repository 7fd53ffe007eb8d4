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
  MetricSet() = default;
  // `last_` points into `by_name_`: never copied; a move leaves it unset on both sides.
  MetricSet(const MetricSet&) = delete;
  MetricSet& operator=(const MetricSet&) = delete;
  MetricSet(MetricSet&& other) noexcept { *this = std::move(other); }
  MetricSet& operator=(MetricSet&& other) noexcept {
    families_ = std::move(other.families_);
    by_name_ = std::move(other.by_name_);
    dropped_duplicates_ = other.dropped_duplicates_;
    samples_ = other.samples_;
    last_ = other.last_ = nullptr;
    other.dropped_duplicates_ = other.samples_ = 0;
    other.families_.clear();
    other.by_name_.clear();
    return *this;
  }

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
  bool AddHistogram(const MetricDesc& desc, const std::vector<Label>& labels,
                    const std::vector<Bucket>& buckets, double sum, uint64_t count);

  size_t dropped_duplicates() const { return dropped_duplicates_; }
  size_t sample_count() const { return samples_; }

  // Moves the families out, in first-use order.
  std::vector<prometheus::MetricFamily> Take();

 private:
  template <typename LabelRange>
  bool AddImpl(const MetricDesc& desc, const LabelRange& labels, double value,
               prometheus::ClientMetric::Histogram* histogram = nullptr);

  // The label sets of a family's series, to refuse a duplicate: an open-addressing table of
  // series indexes by label hash. Built without a key string or a node per series, which cost
  // more than the series themselves (a scrape adds about a thousand).
  struct FamilyState {
    size_t index;
    std::vector<uint64_t> hashes;  // per series of the family, in order
    std::vector<uint32_t> slots;   // series index + 1; 0 is free; size a power of two
  };
  // The index of a series of `family` with these labels, or where to insert it.
  static uint32_t* FindSlot(FamilyState& state, const prometheus::MetricFamily& family,
                            const prometheus::ClientMetric& metric, uint64_t hash);
  static void Grow(FamilyState& state);
  // Transparent: find() takes the descriptor's string_view as it is.
  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view name) const { return std::hash<std::string_view>{}(name); }
  };
  std::vector<prometheus::MetricFamily> families_;
  std::unordered_map<std::string, FamilyState, NameHash, std::equal_to<>> by_name_;
  std::pair<const std::string, FamilyState>* last_ = nullptr;  // the family added to last
  size_t dropped_duplicates_ = 0;
  size_t samples_ = 0;
};

// Replaces bytes that are not valid UTF-8 by U+FFFD so that the exposition stays parseable
// whatever a driver or a hostile interface name contains.
std::string SanitizeUtf8(std::string_view in);

}  // namespace rdmascope
