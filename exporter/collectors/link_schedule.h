// When the link collector reads each module's dynamic pages (temperature, supply, lanes, CMIS
// state): every `interval`, staggered, so that 64 modules are not read in one burst each
// interval (a module read is a firmware transaction on most NICs: mlx5 takes an MCIA access
// register per 48 bytes). Module i of n has the slot `interval * i / n` within each interval
// (measured from the schedule's epoch); a module seen for the first time is due at once, and
// after each read its next read is its first slot at least half an interval later, so reads
// of one module are between 0.5 and 1.5 intervals apart while the set of modules changes, and
// exactly one interval apart once it is stable. Pure arithmetic on time points handed in:
// tested with a fake clock.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace rdmascope {

class LinkSchedule {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  using Duration = std::chrono::steady_clock::duration;

  // `interval` 0: every module is due at every pass (capture and replay read every sample).
  LinkSchedule(Duration interval, TimePoint epoch) : interval_(interval), epoch_(epoch) {}

  // The modules, in the order that gives them their slots; others are forgotten.
  void SetModules(const std::vector<std::string>& names);
  // Whether `name` is due at `now` (never read, or its next slot reached).
  bool Due(const std::string& name, TimePoint now) const;
  // `name` was read at `at`: its next read is its first slot at least half an interval later.
  void Done(const std::string& name, TimePoint at);
  // `name` is not to be read before `at` (a driver without module access: asked again at the
  // static interval, not every slot).
  void Defer(const std::string& name, TimePoint at);
  // The earliest next read of any module (now for one never read); max() without modules.
  TimePoint NextDue() const;
  // The slot offset of `name` within an interval (tests).
  Duration SlotOf(const std::string& name) const;

 private:
  struct Module {
    Duration slot{};
    std::optional<TimePoint> next;  // nullopt: never read, due at once
  };
  Duration interval_;
  TimePoint epoch_;
  std::map<std::string, Module> modules_;
};

}  // namespace rdmascope
