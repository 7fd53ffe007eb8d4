// perf counters behind the host boundary of core/capture.h: live, the system's perf host
// answers and its groups are read directly (one branch per open); recording, each open's
// result and each read's counts are also written into the sample; replaying, the capture
// answers and perf_event_open is never called. Files (docs/capture.md "Format"), one directory
// per group of events and CPU, named by what was opened:
//
//   perf/t0-c0+t0-c1/cpu3/open        "ok", or perf_event_open's errno by name (EACCES)
//   perf/t0-c0+t0-c1/cpu3/read        one line per member: value time_enabled time_running
//
// A group is named by its members' perf_event_attr (type, config, config1, config2 in hex),
// so a replay finds the counters of the events its own configuration resolves to.
#pragma once

#include <linux/perf_event.h>

#include <expected>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "collectors/perf.h"

namespace rdmascope {

// "perf/<group>/cpu<N>", or nullopt for a CPU number no host has.
std::optional<std::string> PerfCaptureDir(const std::vector<perf_event_attr>& attrs, int cpu);

// A read's file, and back: exactly `members` lines of three unsigned decimals, else nullopt.
std::string FormatPerfReadings(const std::vector<sys::PerfReading>& readings);
std::optional<std::vector<sys::PerfReading>> ParsePerfReadings(std::string_view text,
                                                               size_t members);

class CapturedPerfHost : public PerfHost {
 public:
  explicit CapturedPerfHost(std::unique_ptr<PerfHost> live) : live_(std::move(live)) {}
  std::vector<int> OnlineCpus() const override { return live_->OnlineCpus(); }
  sys::CpuTopology ReadTopology() const override { return live_->ReadTopology(); }
  std::expected<std::unique_ptr<PerfCounterGroup>, int> Open(
      const std::vector<perf_event_attr>& attrs, int cpu) const override;

 private:
  std::unique_ptr<PerfHost> live_;  // its OnlineCpus, ReadTopology read sysfs: recorded there
};

}  // namespace rdmascope
