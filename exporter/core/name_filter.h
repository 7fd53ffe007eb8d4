// Include/exclude filtering of device and counter names by regular expression.
// Both patterns are anchored (they must match the whole name), as in Prometheus relabelling.
// Results are memoised: names repeat on every scrape and std::regex is slow, so a scrape
// pays a hash lookup per name, not a regex match.
#pragma once

#include <mutex>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace rdmascope {

class NameFilter {
 public:
  // Empty patterns mean "everything" (include) and "nothing" (exclude).
  // Throws std::regex_error on an invalid pattern.
  NameFilter(const std::string& include, const std::string& exclude);
  NameFilter() = default;

  bool Allows(std::string_view name) const;

 private:
  bool Evaluate(const std::string& name) const;

  // Bounds the cache so that a host with ever-changing names cannot grow it without limit.
  static constexpr size_t kMaxCachedNames = 65536;

  std::optional<std::regex> include_;
  std::optional<std::regex> exclude_;
  mutable std::mutex mutex_;
  mutable std::unordered_map<std::string, bool> cache_;
};

}  // namespace rdmascope
