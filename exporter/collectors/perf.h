// The perf collector: CPU and memory-controller counters, system-wide, with perf_event_open.
// Core events count on every online CPU and are summed per NUMA node (per CPU on request);
// uncore events (memory controllers: uncore_imc_*) count once per socket, on the CPU their
// PMU's cpumask names. Multiplexed counts are scaled by time_enabled/time_running and the
// ratio is exported. An event this host cannot count is rdma_perf_event_supported 0 with its
// reason logged once; it never fails a scrape.
#pragma once

#include <expected>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/collector.h"
#include "sys/cpu_topology.h"
#include "sys/perf_events.h"

namespace rdmascope {

struct PerfOptions {
  std::vector<std::string> events;  // --collector.perf.event; empty: the defaults
  bool per_cpu = false;             // series per CPU instead of per NUMA node
};

// The default event list for a host: core events, then the memory controllers' read and
// write CAS counts on every IMC PMU sysfs shows.
std::vector<std::string> DefaultPerfEvents(const std::filesystem::path& sysfs);

// What a memory-controller event counts, in bytes per count (0: not a memory-controller event).
struct MemoryTraffic {
  enum class Direction { kNone, kRead, kWrite } direction = Direction::kNone;
  double bytes_per_count = 0;
};
MemoryTraffic MemoryTrafficOf(const sys::PerfEventSpec& spec);

struct PerfEventState {
  std::string name;
  bool supported = false;
  std::string reason;  // when unsupported
  MemoryTraffic traffic;
};

struct PerfSample {
  size_t event = 0;  // index into the event states
  int cpu = 0;
  sys::PerfReading reading;
};

// Running totals per (event, CPU): the exported per-node counters are sums of these, so they
// stay right when a CPU leaves (its total stays in the sum, frozen) and when it comes back (a
// new perf event starts from 0 on top of the banked total). Each total never decreases, which
// also absorbs the small dips a multiplexing estimate can take.
class PerfTotals {
 public:
  struct Entry {
    double banked = 0;  // counted by earlier perf events of this (event, CPU)
    double total = 0;   // what is exported for this (event, CPU)
    bool any = false;   // false until the event has run at least once (no estimate yet)
  };
  // A reading of the perf event currently open for (event, cpu).
  void Update(size_t event, int cpu, const sys::PerfReading& reading);
  // The perf event of (event, cpu) was closed (CPU offline) or is being replaced: what it
  // counted is kept, and the next one's readings add to it.
  void Restart(size_t event, int cpu);
  const std::map<std::pair<size_t, int>, Entry>& entries() const { return entries_; }

 private:
  std::map<std::pair<size_t, int>, Entry> entries_;
};

// Maps one set of readings to metrics: `samples` update `totals` (see PerfTotals), which hold
// every CPU seen so far, online or not.
void MapPerf(const std::vector<PerfEventState>& events, const std::vector<PerfSample>& samples,
             const sys::CpuTopology& topology, bool per_cpu, PerfTotals& totals, MetricSet& out);

// The kernel side of the collector, a seam for tests: the CPU topology and perf_event_open.
class PerfCounterGroup {
 public:
  virtual ~PerfCounterGroup() = default;
  // One reading per member, in order; nullopt if the read failed.
  virtual std::optional<std::vector<sys::PerfReading>> Read() const = 0;
};

class PerfHost {
 public:
  virtual ~PerfHost() = default;
  // The online CPUs (<sysfs>/devices/system/cpu/online): read on every scrape.
  virtual std::vector<int> OnlineCpus() const = 0;
  // Nodes and sockets of the online CPUs: read again when the online set changes.
  virtual sys::CpuTopology ReadTopology() const = 0;
  // A group counted system-wide on one CPU; errno on failure (ENODEV: the CPU is offline).
  virtual std::expected<std::unique_ptr<PerfCounterGroup>, int> Open(
      const std::vector<perf_event_attr>& attrs, int cpu) const = 0;
};

// perf_event_open(2) and <sysfs>/devices/system.
std::unique_ptr<PerfHost> SystemPerfHost(std::filesystem::path sysfs);

// Core events follow CPU hotplug: the kernel detaches a CPU's perf events when it goes
// offline (kernel/events/core.c, perf_event_exit_cpu -> __perf_event_exit_context) and does not
// re-enable them when it returns; read() then keeps returning the frozen count. So on every
// scrape the online CPUs are read again: events of CPUs that left are read one last time and
// closed, CPUs that came back (or are new) get new events, and an event whose time_enabled
// stopped moving on an online CPU (an offline/online cycle between two scrapes) is replaced.
// Uncore events are left alone: the uncore drivers migrate them to another CPU of the socket.
class PerfCollector : public Collector {
 public:
  PerfCollector(const PerfOptions& options, std::filesystem::path sysfs);
  PerfCollector(const PerfOptions& options, std::filesystem::path sysfs,
                std::unique_ptr<PerfHost> host);
  CollectResult Collect(MetricSet& out) const override;

 private:
  struct Group {
    std::vector<size_t> events;  // members, as indices into events_
    std::vector<perf_event_attr> attrs;
    bool follows_online = true;  // core events: one per online CPU; uncore: fixed CPUs
  };
  struct Counter {
    size_t group;
    int cpu;
    std::unique_ptr<PerfCounterGroup> counters;
    uint64_t last_enabled = 0;  // time_enabled at the previous read
  };
  void OpenGroup(const std::vector<size_t>& members, const std::vector<sys::PerfEventSpec>& specs);
  void FollowHotplug() const;
  bool OpenOn(size_t group, int cpu) const;
  void Retire(Counter& counter, const char* why) const;

  std::unique_ptr<PerfHost> host_;
  // Mutable: an event whose first open failed for want of fds or memory (kept, retried at
  // each scrape) becomes supported when it opens.
  mutable std::vector<PerfEventState> events_;
  std::vector<Group> groups_;
  bool per_cpu_;
  mutable std::mutex mutex_;
  mutable std::vector<Counter> counters_;
  mutable std::vector<int> online_;
  mutable sys::CpuTopology topology_;  // never forgets a CPU: offline CPUs keep their node
  mutable PerfTotals totals_;
};

}  // namespace rdmascope
