#include "collectors/perf.h"

#include <algorithm>
#include <cerrno>
#include <set>

#include "core/log.h"
#include "core/sysfs.h"
#include "sys/pmu_libpfm.h"
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

// Memory-controller read/write event pairs, by the names the kernel gives them
// (arch/x86/events/intel/uncore_snbep.c and uncore_snb.c):
//   Skylake-SP/Cascade Lake (skx_uncore_imc, programmable): cas_count_read / cas_count_write
//   Ice Lake-SP and Sapphire Rapids (icx/spr_uncore_imc_freerunning_events): read / write
//   Tiger Lake/Alder Lake clients (tgl/adl_uncore_imc_freerunning_events): data_read / data_write
//   Sandy Bridge..Skylake clients (snb_uncore_imc_events): data_reads / data_writes
constexpr std::pair<std::string_view, std::string_view> kImcEventPairs[] = {
    {"cas_count_read", "cas_count_write"},
    {"read", "write"},
    {"data_read", "data_write"},
    {"data_reads", "data_writes"},
};

double UnitBytes(std::string_view unit) {
  if (unit == "B" || unit == "Bytes") return 1;
  if (unit == "KiB" || unit == "KB") return 1024;
  if (unit == "MiB" || unit == "MB") return 1024.0 * 1024;
  if (unit == "GiB" || unit == "GB") return 1024.0 * 1024 * 1024;
  return 0;
}

}  // namespace

std::vector<std::string> DefaultPerfEvents(const std::filesystem::path& sysfs) {
  std::vector<std::string> events = kCoreDefaults;
  const auto has_event = [&](const std::string& pmu, std::string_view event) {
    return sysfs::ReadAttribute(sysfs / "bus/event_source/devices" / pmu / "events" /
                                std::string(event))
        .has_value();
  };
  for (const std::string& pmu : sys::ListPmus(sysfs, "uncore_imc")) {
    for (const auto& [read, write] : kImcEventPairs) {
      if (has_event(pmu, read) && has_event(pmu, write)) {
        events.push_back(pmu + "/" + std::string(read) + "/");
        events.push_back(pmu + "/" + std::string(write) + "/");
        break;
      }
    }
  }
  return events;
}

MemoryTraffic MemoryTrafficOf(const sys::PerfEventSpec& spec) {
  if (!spec.pmu.starts_with("uncore_imc")) return {};
  MemoryTraffic traffic;
  for (const auto& [read, write] : kImcEventPairs) {
    if (spec.pmu_event == read) traffic.direction = MemoryTraffic::Direction::kRead;
    if (spec.pmu_event == write) traffic.direction = MemoryTraffic::Direction::kWrite;
  }
  if (traffic.direction == MemoryTraffic::Direction::kNone) return {};
  // The kernel's .scale/.unit turn a count into MiB (6.103515625e-5 MiB = 64 bytes, one
  // cache line per CAS); without them, a CAS moves one 64-byte line.
  const double unit = UnitBytes(spec.unit);
  traffic.bytes_per_count = unit > 0 ? spec.scale * unit : 64;
  return traffic;
}

void PerfTotals::Update(size_t event, int cpu, const sys::PerfReading& reading) {
  const auto value = sys::ScaledValue(reading);
  if (!value) return;  // never on a counter yet: no estimate
  Entry& entry = entries_[{event, cpu}];
  entry.total = std::max(entry.total, entry.banked + *value);
  entry.any = true;
}

void PerfTotals::Restart(size_t event, int cpu) {
  const auto it = entries_.find({event, cpu});
  if (it != entries_.end()) it->second.banked = it->second.total;
}

void MapPerf(const std::vector<PerfEventState>& events, const std::vector<PerfSample>& samples,
             const sys::CpuTopology& topology, bool per_cpu, PerfTotals& totals, MetricSet& out) {
  for (const PerfEventState& event : events) {
    out.Add(kSupported, {{"event", event.name}}, event.supported ? 1 : 0);
  }
  // (event, node or cpu) -> time enabled/running of the perf events open now.
  std::map<std::pair<size_t, int>, std::pair<uint64_t, uint64_t>> times;
  for (const PerfSample& sample : samples) {
    totals.Update(sample.event, sample.cpu, sample.reading);
    auto& [enabled, running] =
        times[{sample.event, per_cpu ? sample.cpu : topology.NodeOf(sample.cpu)}];
    enabled += sample.reading.enabled;
    running += sample.reading.running;
  }
  // Sums over every CPU seen, online or not: a CPU that left keeps its count in the sum.
  struct Sum {
    double value = 0;
    bool any = false;
  };
  std::map<std::pair<size_t, int>, Sum> sums;
  std::map<std::pair<int, MemoryTraffic::Direction>, double> traffic;
  for (const auto& [key, entry] : totals.entries()) {
    const auto [event, cpu] = key;
    Sum& sum = sums[{event, per_cpu ? cpu : topology.NodeOf(cpu)}];
    if (!entry.any) continue;
    sum.value += entry.total;
    sum.any = true;
    const MemoryTraffic& kind = events[event].traffic;
    if (kind.direction != MemoryTraffic::Direction::kNone) {
      traffic[{topology.SocketOf(cpu), kind.direction}] += entry.total * kind.bytes_per_count;
    }
  }
  for (const auto& [key, sum] : sums) {
    const std::string& name = events[key.first].name;
    const std::string node = std::to_string(per_cpu ? topology.NodeOf(key.second) : key.second);
    // Named: a Label views its string, and a temporary would be gone before Add() reads it
    // (ASan: stack-use-after-scope with --collector.perf.per-cpu).
    const std::string cpu = std::to_string(key.second);
    std::vector<Label> labels{{"event", name}, {"node", node}};
    if (per_cpu) labels.emplace_back("cpu", cpu);
    if (sum.any) out.Add(kEvents, labels, sum.value);
    const auto time = times.find(key);
    if (time != times.end() && time->second.first > 0) {
      out.Add(kRunning, labels,
              static_cast<double>(time->second.second) / static_cast<double>(time->second.first));
    }
  }
  for (const auto& [key, bytes] : traffic) {
    const bool read = key.second == MemoryTraffic::Direction::kRead;
    out.Add(read ? kReadBytes : kWriteBytes, {{"socket", std::to_string(key.first)}}, bytes);
  }
}

namespace {

class SystemCounterGroup : public PerfCounterGroup {
 public:
  explicit SystemCounterGroup(sys::PerfGroup group) : group_(std::move(group)) {}
  std::optional<std::vector<sys::PerfReading>> Read() const override { return group_.Read(); }

 private:
  sys::PerfGroup group_;
};

class SystemHost : public PerfHost {
 public:
  explicit SystemHost(std::filesystem::path sysfs) : sysfs_(std::move(sysfs)) {}
  std::vector<int> OnlineCpus() const override {
    const auto online = sysfs::ReadAttribute(sysfs_ / "devices/system/cpu/online");
    return online ? sys::ParseCpuList(*online) : std::vector<int>{};
  }
  sys::CpuTopology ReadTopology() const override { return sys::ReadCpuTopology(sysfs_); }
  std::expected<std::unique_ptr<PerfCounterGroup>, int> Open(
      const std::vector<perf_event_attr>& attrs, int cpu) const override {
    auto group = sys::PerfGroup::Open(attrs, -1, cpu);
    if (!group) return std::unexpected(group.error());
    return std::make_unique<SystemCounterGroup>(std::move(*group));
  }

 private:
  std::filesystem::path sysfs_;
};

// perf_event_open failures that say nothing about the event: the exporter's (or the
// system's) file descriptors or memory are exhausted for now, or the PMU is busy.
bool TransientOpenError(int err) {
  return err == EMFILE || err == ENFILE || err == ENOMEM || err == EBUSY || err == EAGAIN ||
         err == EINTR;
}

// Adds what `fresh` knows to `known`; CPUs that went offline keep their node and socket.
void MergeTopology(sys::CpuTopology& known, const sys::CpuTopology& fresh) {
  known.online = fresh.online;
  for (const auto& [cpu, node] : fresh.node_of_cpu) known.node_of_cpu[cpu] = node;
  for (const auto& [cpu, socket] : fresh.socket_of_cpu) known.socket_of_cpu[cpu] = socket;
}

}  // namespace

std::unique_ptr<PerfHost> SystemPerfHost(std::filesystem::path sysfs) {
  return std::make_unique<SystemHost>(std::move(sysfs));
}

PerfCollector::PerfCollector(const PerfOptions& options, std::filesystem::path sysfs)
    : PerfCollector(options, sysfs, SystemPerfHost(sysfs)) {}

PerfCollector::PerfCollector(const PerfOptions& options, std::filesystem::path sysfs,
                             std::unique_ptr<PerfHost> host)
    : host_(std::move(host)), per_cpu_(options.per_cpu) {
  topology_ = host_->ReadTopology();
  online_ = topology_.online;
  const auto groups =
      sys::ParseEventGroups(options.events.empty() ? DefaultPerfEvents(sysfs) : options.events);
  if (!groups) throw std::invalid_argument("--collector.perf.event: " + groups.error());
  std::vector<sys::PerfEventSpec> specs;
  // libpfm4 loaded once for all the names, unloaded after them (sys/pmu_libpfm.h).
  const sys::LibpfmScope libpfm;
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
  const bool follows_online = specs[members.front()].cpus.empty();
  const std::vector<int> cpus = follows_online ? online_ : specs[members.front()].cpus;
  Group group{.events = members, .follows_online = follows_online};
  for (const size_t member : members) group.attrs.push_back(specs[member].attr);
  std::vector<Counter> opened;
  int error = 0;
  for (const int cpu : cpus) {
    auto counters = host_->Open(group.attrs, cpu);
    if (!counters) {
      error = counters.error();
      break;
    }
    opened.push_back({groups_.size(), cpu, std::move(*counters)});
  }
  if (error == 0 && !opened.empty()) {
    for (const size_t member : members) events_[member].supported = true;
    groups_.push_back(std::move(group));
    std::move(opened.begin(), opened.end(), std::back_inserter(counters_));
    return;
  }
  if (follows_online && TransientOpenError(error)) {
    // Out of file descriptors or memory for now: not a verdict on the events. The group is
    // kept without counters; FollowHotplug opens it on each online CPU at the next scrapes.
    for (const size_t member : members) {
      events_[member].reason = sys::PerfOpenErrorReason(error) + "; tried again at each scrape";
    }
    groups_.push_back(std::move(group));
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

bool PerfCollector::OpenOn(size_t group, int cpu) const {
  auto counters = host_->Open(groups_[group].attrs, cpu);
  if (!counters) {
    // ENODEV: the CPU left again meanwhile; the next scrape tries again.
    log::Debug("cannot count on a CPU that came online",
               {{"cpu", std::to_string(cpu)}, {"err", sys::PerfOpenErrorReason(counters.error())}});
    return false;
  }
  for (const size_t event : groups_[group].events) {
    totals_.Restart(event, cpu);
    if (!events_[event].supported) {  // its first open failed for want of fds or memory
      log::Info("perf event counted after all", {{"event", events_[event].name}});
      events_[event].supported = true;
      events_[event].reason.clear();
    }
  }
  counters_.push_back({group, cpu, std::move(*counters)});
  return true;
}

void PerfCollector::Retire(Counter& counter, const char* why) const {
  // The detached event still reads its final count (frozen when the CPU left): keep it.
  if (const auto readings = counter.counters->Read()) {
    const auto& events = groups_[counter.group].events;
    for (size_t i = 0; i < readings->size() && i < events.size(); ++i) {
      totals_.Update(events[i], counter.cpu, (*readings)[i]);
    }
  }
  for (const size_t event : groups_[counter.group].events) totals_.Restart(event, counter.cpu);
  log::Debug("perf events closed", {{"cpu", std::to_string(counter.cpu)}, {"why", why}});
  counter.counters.reset();
}

void PerfCollector::FollowHotplug() const {
  const std::vector<int> online = host_->OnlineCpus();
  if (online != online_) {
    log::Info("online CPUs changed; perf events follow",
              {{"before", std::to_string(online_.size())}, {"now", std::to_string(online.size())}});
    MergeTopology(topology_, host_->ReadTopology());
    online_ = online;
  }
  const auto is_online = [&](int cpu) {
    return std::find(online_.begin(), online_.end(), cpu) != online_.end();
  };
  std::set<std::pair<size_t, int>> open;
  for (Counter& counter : counters_) {
    if (!groups_[counter.group].follows_online) continue;
    if (!is_online(counter.cpu)) {
      Retire(counter, "CPU offline");
    } else {
      open.insert({counter.group, counter.cpu});
    }
  }
  std::erase_if(counters_, [](const Counter& c) { return c.counters == nullptr; });
  for (size_t group = 0; group < groups_.size(); ++group) {
    if (!groups_[group].follows_online) continue;
    for (const int cpu : online_) {
      if (!open.contains({group, cpu})) OpenOn(group, cpu);
    }
  }
}

CollectResult PerfCollector::Collect(MetricSet& out) const {
  std::lock_guard lock(mutex_);
  FollowHotplug();
  std::vector<PerfSample> samples;
  std::vector<std::pair<size_t, int>> reopen;
  for (Counter& counter : counters_) {
    const auto readings = counter.counters->Read();
    if (!readings || readings->empty()) {
      // Counts missing this time (a failed or short read), not zero.
      log::Debug("perf counters unreadable this scrape", {{"cpu", std::to_string(counter.cpu)}});
      continue;
    }
    const uint64_t enabled = readings->front().enabled;
    if (groups_[counter.group].follows_online && counter.last_enabled > 0 &&
        enabled == counter.last_enabled) {
      // Enabled time stands still on an online CPU: the CPU went offline and came back
      // between two scrapes and the kernel left this event detached. Replace it.
      Retire(counter, "event detached by CPU hotplug");
      reopen.emplace_back(counter.group, counter.cpu);
      continue;
    }
    counter.last_enabled = enabled;
    const auto& events = groups_[counter.group].events;
    for (size_t i = 0; i < readings->size() && i < events.size(); ++i) {
      samples.push_back({events[i], counter.cpu, (*readings)[i]});
    }
  }
  std::erase_if(counters_, [](const Counter& c) { return c.counters == nullptr; });
  for (const auto& [group, cpu] : reopen) OpenOn(group, cpu);
  MapPerf(events_, samples, topology_, per_cpu_, totals_, out);
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
