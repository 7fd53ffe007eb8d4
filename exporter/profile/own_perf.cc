#include "profile/own_perf.h"

#include "sys/pmu_libpfm.h"

namespace rdmascope::profile {
namespace {

constexpr const char* kOwnPerfEvents[] = {"task-clock",  "context-switches", "cpu-migrations",
                                          "page-faults", "cycles",           "instructions",
                                          "LLC-loads",   "LLC-load-misses"};

}  // namespace

OwnPerf OpenOwnPerf(pid_t pid, const std::filesystem::path& sysfs,
                    const std::filesystem::path& procfs) {
  OwnPerf own;
  std::vector<sys::PerfEventSpec> specs;
  const sys::LibpfmScope libpfm;  // loaded once for the names, unloaded after them
  for (const char* name : kOwnPerfEvents) {
    auto spec = sys::ResolvePerfEvent(sysfs, name);
    if (spec) {
      specs.push_back(std::move(*spec));
    } else {
      own.unopened.push_back({.name = name, .reason = spec.error()});
    }
  }
  auto counters = sys::ProcessPerfCounters::Open(pid, specs, procfs);
  if (counters) {
    own.counters = std::move(*counters);
  } else {
    for (const auto& spec : specs)
      own.unopened.push_back({.name = spec.name, .reason = counters.error()});
  }
  return own;
}

std::vector<sys::ProcessPerfCounters::Event> ReadOwnPerf(const OwnPerf& own) {
  std::vector<sys::ProcessPerfCounters::Event> events = own.unopened;
  if (own.counters) {
    for (auto& event : own.counters->Read()) events.push_back(std::move(event));
  }
  return events;
}

}  // namespace rdmascope::profile
