// The perf collector: CPU and memory-controller counters, system-wide, with perf_event_open.
// Core events count on every online CPU and are summed per NUMA node (per CPU on request);
// uncore events (memory controllers: uncore_imc_*) count once per socket, on the CPU their
// PMU's cpumask names. Multiplexed counts are scaled by time_enabled/time_running and the
// ratio is exported. An event this host cannot count is rdma_perf_event_supported 0 with its
// reason logged once; it never fails a scrape.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/collector.h"
#include "sys/cpu_topology.h"
#include "sys/perf_events.h"

namespace rdmascope {

struct PerfOptions {
  std::vector<std::string> events;  // --perf.event; empty: the defaults
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

// Maps one set of readings to metrics; `last` keeps every counter monotonic across the small
// dips a multiplexing estimate can take.
void MapPerf(const std::vector<PerfEventState>& events, const std::vector<PerfSample>& samples,
             const sys::CpuTopology& topology, bool per_cpu, std::map<std::string, double>& last,
             MetricSet& out);

class PerfCollector : public Collector {
 public:
  PerfCollector(const PerfOptions& options, std::filesystem::path sysfs);
  CollectResult Collect(MetricSet& out) const override;

 private:
  struct Counter {
    std::vector<size_t> events;  // members, as indices into events_
    int cpu;
    sys::PerfGroup group;
  };
  void OpenGroup(const std::vector<size_t>& members, const std::vector<sys::PerfEventSpec>& specs);

  std::vector<PerfEventState> events_;
  std::vector<Counter> counters_;
  sys::CpuTopology topology_;
  bool per_cpu_;
  mutable std::mutex mutex_;
  mutable std::map<std::string, double> last_;
};

}  // namespace rdmascope
