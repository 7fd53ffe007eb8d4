// perf_event_open(2) counting: resolving event names to perf_event_attr (libpfm4 for names
// like "cycles", "LLC-load-misses" or "INST_RETIRED:ANY_P"; sysfs PMUs for "pmu/event/"),
// event groups, reading with multiplexing correction, and a per-process counter set.
#pragma once

#include <linux/perf_event.h>
#include <sys/types.h>

#include <cstdint>
#include <expected>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rdmascope::sys {

struct PerfEventSpec {
  std::string name;  // as configured
  perf_event_attr attr{};
  double scale = 1.0;     // sysfs .scale of the event
  std::string unit;       // sysfs .unit of the event
  std::string pmu;        // sysfs PMU name, empty for libpfm4 events
  std::string pmu_event;  // the PMU's named event, if one was used ("cas_count_read")
  std::vector<int> cpus;  // uncore: the CPUs to count on (one per socket); empty: all
};

// "pmu/terms/" through sysfs, anything else through libpfm4. Errors are one-line reasons.
std::expected<PerfEventSpec, std::string> ResolvePerfEvent(const std::filesystem::path& sysfs,
                                                           std::string_view name);

// --collector.perf.event values: "name" or "{a,b,c}" (a group, counted together so that ratios such
// as instructions per cycle are consistent). Commas inside "pmu/.../" belong to the event.
std::expected<std::vector<std::vector<std::string>>, std::string> ParseEventGroups(
    const std::vector<std::string>& values);

struct PerfReading {
  uint64_t value = 0;
  uint64_t enabled = 0;  // ns the event was enabled
  uint64_t running = 0;  // ns it was on a counter (< enabled when multiplexed)
};

// The count corrected for multiplexing (value x enabled / running); nullopt if the event has
// not run at all yet (no estimate, rather than a made-up 0).
std::optional<double> ScaledValue(const PerfReading& reading);

// One group of counters on one CPU (pid -1) or one task (cpu -1).
class PerfGroup {
 public:
  // errno on failure (ENOENT/EOPNOTSUPP: not supported; EACCES/EPERM: permission).
  static std::expected<PerfGroup, int> Open(const std::vector<perf_event_attr>& attrs, pid_t pid,
                                            int cpu, bool inherit = false);
  PerfGroup(PerfGroup&& other) noexcept;
  PerfGroup& operator=(PerfGroup&& other) noexcept;
  PerfGroup(const PerfGroup&) = delete;
  PerfGroup& operator=(const PerfGroup&) = delete;
  ~PerfGroup();

  // One reading per member, in order; nullopt if the read failed.
  std::optional<std::vector<PerfReading>> Read() const;
  size_t size() const { return fds_.size(); }

 private:
  PerfGroup() = default;
  std::vector<int> fds_;
  bool grouped_ = true;
};

// Test seam (tests/unit/fault_seams_test.cc): the system calls PerfGroup makes, so that a test
// can make perf_event_open fail (EMFILE, ENOENT, EACCES...) or a read come back short. Each
// returns -1 with errno set on failure, as the system call does.
struct PerfSyscalls {
  long (*open)(perf_event_attr* attr, pid_t pid, int cpu, int group_fd, unsigned long flags);
  ssize_t (*read)(int fd, void* buf, size_t count);
  int (*close)(int fd);
};
// nullptr restores the real system calls. Tests only: not while groups are opened or read.
void SetPerfSyscallsForTesting(const PerfSyscalls* syscalls);

// A one-line reason for a perf_event_open errno, naming the setting to change.
std::string PerfOpenErrorReason(int err);

// Counting the events of one process (every thread it has now, and those they create),
// for the profiler. Events that cannot be opened are reported with their reason.
class ProcessPerfCounters {
 public:
  struct Event {
    std::string name;
    std::optional<double> value;  // summed over threads, scaled; nullopt: unsupported
    std::string reason;
  };
  static std::expected<ProcessPerfCounters, std::string> Open(
      pid_t pid, const std::vector<PerfEventSpec>& events, const std::filesystem::path& procfs);
  std::vector<Event> Read() const;

 private:
  std::vector<PerfEventSpec> events_;
  std::vector<std::vector<PerfGroup>> counters_;  // per event, per thread
  std::vector<std::string> reasons_;
};

}  // namespace rdmascope::sys
