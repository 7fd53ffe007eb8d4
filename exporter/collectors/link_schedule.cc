#include "collectors/link_schedule.h"

#include <algorithm>

namespace rdmascope {

void LinkSchedule::SetModules(const std::vector<std::string>& names) {
  std::map<std::string, Module> kept;
  const auto count = static_cast<Duration::rep>(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    Module module;
    if (const auto it = modules_.find(names[i]); it != modules_.end()) module = it->second;
    // Slots spread evenly: i * interval / n, in the clock's own ticks (no rounding drift).
    module.slot = Duration(interval_.count() * static_cast<Duration::rep>(i) / count);
    kept.emplace(names[i], module);
  }
  modules_ = std::move(kept);
}

bool LinkSchedule::Due(const std::string& name, TimePoint now) const {
  const auto it = modules_.find(name);
  if (it == modules_.end()) return false;
  return interval_ <= Duration::zero() || !it->second.next || now >= *it->second.next;
}

void LinkSchedule::Done(const std::string& name, TimePoint at) {
  const auto it = modules_.find(name);
  if (it == modules_.end()) return;
  if (interval_ <= Duration::zero()) {
    it->second.next = at;
    return;
  }
  // The first epoch + slot + k * interval at or after at + interval / 2.
  const TimePoint earliest = at + interval_ / 2;
  const TimePoint first = epoch_ + it->second.slot;
  Duration::rep k = 0;
  if (earliest > first) k = ((earliest - first) + interval_ - Duration(1)) / interval_;
  it->second.next = first + k * interval_;
}

void LinkSchedule::Defer(const std::string& name, TimePoint at) {
  if (const auto it = modules_.find(name); it != modules_.end()) it->second.next = at;
}

LinkSchedule::TimePoint LinkSchedule::NextDue() const {
  TimePoint next = TimePoint::max();
  for (const auto& [name, module] : modules_) {
    if (!module.next) return TimePoint::min();
    next = std::min(next, *module.next);
  }
  return next;
}

LinkSchedule::Duration LinkSchedule::SlotOf(const std::string& name) const {
  const auto it = modules_.find(name);
  return it == modules_.end() ? Duration::zero() : it->second.slot;
}

}  // namespace rdmascope
