#include "collectors/perf.h"

#include <algorithm>
#include <set>

#include "core/log.h"
#include "core/sysfs.h"
#include "sys/pmu_sysfs.h"

namespace rdmascope {
namespace {

using prometheus::MetricType;

constexpr MetricDesc kSupported{"rdma_perf_event_supported",
                                "1 if the configured perf event is counted on this host, 0 if "
                                "it cannot be (reason in the log).",
                                MetricType::Gauge};
constexpr MetricDesc kEvents{"rdma_perf_events_total",
                             "Count of a perf event since the exporter started, summed over the "
                             "node's CPUs (or the socket's uncore unit), scaled for "
                             "multiplexing.",
                             MetricType::Counter};
constexpr MetricDesc kRunning{"rdma_perf_event_running_ratio",
                              "Share of the time the event was on a hardware counter "
                              "(time_running / time_enabled); below 1 the count is an estimate.",
                              MetricType::Gauge};
constexpr MetricDesc kReadBytes{"rdma_memory_controller_read_bytes_total",
                                "Bytes read from DRAM by the socket's memory controllers.",
                                MetricType::Counter};
constexpr MetricDesc kWriteBytes{"rdma_memory_controller_write_bytes_total",
                                 "Bytes written to DRAM by the socket's memory controllers.",
                                 MetricType::Counter};

// Core events the pitfalls need: IPC (counted together), front-end stalls, LLC misses.
const std::vector<std::string> kCoreDefaults = {"{cycles,instructions}", "stalled-cycles-frontend",
                                                "LLC-loads", "LLC-load-misses"};

double UnitBytes(std::string_view unit) {
  if (unit == "B" || unit == "Bytes") return 1;
  if (unit == "KiB" || unit == "KB") return 1024;
  if (unit == "MiB" || unit == "MB") return 1024.0 * 1024;
  if (unit == "GiB" || unit == "GB") return 1024.0 * 1024 * 1024;
  return 0;
}

// Adds `value` to a series key's total, never letting the exported counter go down.
double Monotonic(std::map<std::string, double>& last, const std::string& key, double value) {
  double& previous = last[key];
  previous = std::max(previous, value);
  return previous;
}

}  // namespace

std::vector<std::string> DefaultPerfEvents(const std::filesystem::path& sysfs) {
  std::vector<std::string> events = kCoreDefaults;
  const auto has_event = [&](const std::string& pmu, const char* event) {
    return sysfs::ReadAttribute(sysfs / "bus/event_source/devices" / pmu / "events" / event)
        .has_value();
  };
  for (const std::string& pmu : sys::ListPmus(sysfs, "uncore_imc")) {
    // Skylake/Cascade Lake: programmable CAS counters. Ice Lake and later: free-running ones.
    for (const auto& [read, write] :
         {std::pair{"cas_count_read", "cas_count_write"}, std::pair{"data_read", "data_write"}}) {
      if (has_event(pmu, read) && has_event(pmu, write)) {
        events.push_back(pmu + "/" + read + "/");
        events.push_back(pmu + "/" + write + "/");
        break;
      }
    }
  }
  return events;
}

MemoryTraffic MemoryTrafficOf(const sys::PerfEventSpec& spec) {
  if (!spec.pmu.starts_with("uncore_imc")) return {};
  MemoryTraffic traffic;
  if (spec.pmu_event == "cas_count_read" || spec.pmu_event == "data_read") {
    traffic.direction = MemoryTraffic::Direction::kRead;
  } else if (spec.pmu_event == "cas_count_write" || spec.pmu_event == "data_write") {
    traffic.direction = MemoryTraffic::Direction::kWrite;
  } else {
    return {};
  }
  // The kernel's .scale/.unit turn a count into MiB (6.103515625e-5 MiB = 64 bytes, one
  // cache line per CAS); without them, a CAS moves one 64-byte line.
  const double unit = UnitBytes(spec.unit);
  traffic.bytes_per_count = unit > 0 ? spec.scale * unit : 64;
  return traffic;
}

void MapPerf(const std::vector<PerfEventState>& events, const std::vector<PerfSample>& samples,
             const sys::CpuTopology& topology, bool per_cpu, std::map<std::string, double>& last,
             MetricSet& out) {
  for (const PerfEventState& event : events) {
    out.Add(kSupported, {{"event", event.name}}, event.supported ? 1 : 0);
  }
  struct Sum {
    double value = 0;
    uint64_t enabled = 0;
    uint64_t running = 0;
    bool any = false;
  };
  // (event, node or cpu) -> sum; (socket, direction) -> bytes.
  std::map<std::pair<size_t, int>, Sum> sums;
  std::map<std::pair<int, MemoryTraffic::Direction>, double> traffic;
  for (const PerfSample& sample : samples) {
    Sum& sum = sums[{sample.event, per_cpu ? sample.cpu : topology.NodeOf(sample.cpu)}];
    sum.enabled += sample.reading.enabled;
    sum.running += sample.reading.running;
    if (const auto value = sys::ScaledValue(sample.reading)) {
      sum.value += *value;
      sum.any = true;
      const MemoryTraffic& kind = events[sample.event].traffic;
      if (kind.direction != MemoryTraffic::Direction::kNone) {
        traffic[{topology.SocketOf(sample.cpu), kind.direction}] += *value * kind.bytes_per_count;
      }
    }
  }
  for (const auto& [key, sum] : sums) {
    const std::string& name = events[key.first].name;
    const std::string where = std::to_string(key.second);
    const std::string node = std::to_string(per_cpu ? topology.NodeOf(key.second) : key.second);
    std::vector<Label> labels{{"event", name}, {"node", node}};
    if (per_cpu) labels.emplace_back("cpu", where);
    if (sum.any) {
      out.Add(kEvents, labels, Monotonic(last, "e\x1f" + name + "\x1f" + where, sum.value));
    }
    if (sum.enabled > 0) {
      out.Add(kRunning, labels,
              static_cast<double>(sum.running) / static_cast<double>(sum.enabled));
    }
  }
  for (const auto& [key, bytes] : traffic) {
    const std::string socket = std::to_string(key.first);
    const bool read = key.second == MemoryTraffic::Direction::kRead;
    out.Add(read ? kReadBytes : kWriteBytes, {{"socket", socket}},
            Monotonic(last, std::string(read ? "r" : "w") + "\x1f" + socket, bytes));
  }
}

PerfCollector::PerfCollector(const PerfOptions& options, std::filesystem::path sysfs)
    : topology_(sys::ReadCpuTopology(sysfs)), per_cpu_(options.per_cpu) {
  const auto groups =
      sys::ParseEventGroups(options.events.empty() ? DefaultPerfEvents(sysfs) : options.events);
  if (!groups) throw std::invalid_argument("--perf.event: " + groups.error());
  std::vector<sys::PerfEventSpec> specs;
  for (const auto& group : *groups) {
    std::vector<size_t> members;
    for (const std::string& name : group) {
      const size_t index = events_.size();
      events_.push_back({.name = name});
      auto spec = sys::ResolvePerfEvent(sysfs, name);
      if (!spec) {
        events_[index].reason = spec.error();
        specs.emplace_back();
        continue;
      }
      events_[index].traffic = MemoryTrafficOf(*spec);
      specs.push_back(std::move(*spec));
      members.push_back(index);
    }
    if (!members.empty()) OpenGroup(members, specs);
  }
  for (const PerfEventState& event : events_) {
    if (!event.supported) {
      log::Info("perf event not counted", {{"event", event.name}, {"reason", event.reason}});
    }
  }
}

void PerfCollector::OpenGroup(const std::vector<size_t>& members,
                              const std::vector<sys::PerfEventSpec>& specs) {
  // Uncore events count on their PMU's CPUs; core events on every online CPU.
  std::vector<int> cpus = specs[members.front()].cpus;
  if (cpus.empty()) cpus = topology_.online;
  std::vector<perf_event_attr> attrs;
  for (const size_t member : members) attrs.push_back(specs[member].attr);
  std::vector<Counter> opened;
  int error = 0;
  for (const int cpu : cpus) {
    auto group = sys::PerfGroup::Open(attrs, -1, cpu);
    if (!group) {
      error = group.error();
      break;
    }
    opened.push_back({members, cpu, std::move(*group)});
  }
  if (error == 0 && !opened.empty()) {
    for (const size_t member : members) events_[member].supported = true;
    std::move(opened.begin(), opened.end(), std::back_inserter(counters_));
    return;
  }
  if (members.size() > 1) {
    // One member the host cannot count (or PMUs that cannot be grouped) must not take the
    // others down: count each on its own, so that each gets its own verdict.
    for (const size_t member : members) OpenGroup({member}, specs);
    return;
  }
  events_[members.front()].reason =
      cpus.empty() ? "no online CPU to count on" : sys::PerfOpenErrorReason(error);
}

CollectResult PerfCollector::Collect(MetricSet& out) const {
  std::vector<PerfSample> samples;
  for (const Counter& counter : counters_) {
    const auto readings = counter.group.Read();
    if (!readings) continue;  // a CPU went offline: its counts are missing, not zero
    for (size_t i = 0; i < readings->size() && i < counter.events.size(); ++i) {
      samples.push_back({counter.events[i], counter.cpu, (*readings)[i]});
    }
  }
  std::lock_guard lock(mutex_);
  MapPerf(events_, samples, topology_, per_cpu_, last_, out);
  const auto supported = std::count_if(events_.begin(), events_.end(),
                                       [](const PerfEventState& e) { return e.supported; });
  if (supported == 0) {
    return {.no_data = true,
            .detail = "no configured perf event can be counted here (" +
                      std::to_string(events_.size()) + " configured; reasons in the log)"};
  }
  return {.detail = std::to_string(supported) + " of " + std::to_string(events_.size()) +
                    " events counted on " + std::to_string(counters_.size()) + " counters"};
}

}  // namespace rdmascope
