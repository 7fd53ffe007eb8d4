#include "core/name_filter.h"

namespace rdmascope {

NameFilter::NameFilter(const std::string& include, const std::string& exclude) {
  if (!include.empty()) include_.emplace(include, std::regex::ECMAScript | std::regex::optimize);
  if (!exclude.empty()) exclude_.emplace(exclude, std::regex::ECMAScript | std::regex::optimize);
}

bool NameFilter::Evaluate(const std::string& name) const {
  if (include_ && !std::regex_match(name, *include_)) return false;
  if (exclude_ && std::regex_match(name, *exclude_)) return false;
  return true;
}

bool NameFilter::Allows(std::string_view name) const {
  if (!include_ && !exclude_) return true;
  std::string key(name);
  std::lock_guard lock(mutex_);
  if (const auto it = cache_.find(key); it != cache_.end()) return it->second;
  const bool allowed = Evaluate(key);
  if (cache_.size() < kMaxCachedNames) cache_.emplace(std::move(key), allowed);
  return allowed;
}

}  // namespace rdmascope
