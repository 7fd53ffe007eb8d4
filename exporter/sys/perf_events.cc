#include "sys/perf_events.h"

#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <set>
#include <utility>

#include "core/sysfs.h"
#include "sys/libpfm_capture.h"
#include "sys/pmu_sysfs.h"

namespace rdmascope::sys {
namespace {

// libpfm4 is loaded for the call (sys/pmu_libpfm.*) unless the caller holds a LibpfmScope;
// a capture records its answer, a replay answers from the capture (sys/libpfm_capture.h).
std::expected<PerfEventSpec, std::string> EncodeWithLibpfm(std::string_view name) {
  auto attr = CapturedLibpfmEncode(name);
  if (!attr) return std::unexpected(attr.error());
  return PerfEventSpec{.name = std::string(name), .attr = *attr};
}

long RealOpen(perf_event_attr* attr, pid_t pid, int cpu, int group_fd, unsigned long flags) {
  return syscall(SYS_perf_event_open, attr, pid, cpu, group_fd, flags);
}
ssize_t RealRead(int fd, void* buf, size_t count) { return ::read(fd, buf, count); }
int RealClose(int fd) { return ::close(fd); }

constexpr PerfSyscalls kRealPerfSyscalls{RealOpen, RealRead, RealClose};
std::atomic<const PerfSyscalls*> perf_syscalls{&kRealPerfSyscalls};

const PerfSyscalls& Syscalls() { return *perf_syscalls.load(std::memory_order_acquire); }

long PerfEventOpen(perf_event_attr* attr, pid_t pid, int cpu, int group_fd) {
  return Syscalls().open(attr, pid, cpu, group_fd, PERF_FLAG_FD_CLOEXEC);
}

}  // namespace

void SetPerfSyscallsForTesting(const PerfSyscalls* syscalls) {
  perf_syscalls.store(syscalls != nullptr ? syscalls : &kRealPerfSyscalls,
                      std::memory_order_release);
}

std::expected<PerfEventSpec, std::string> ResolvePerfEvent(const std::filesystem::path& sysfs,
                                                           std::string_view name) {
  if (name.find('/') == std::string_view::npos) return EncodeWithLibpfm(name);
  const auto event = ResolvePmuEvent(sysfs, name);
  if (!event) return std::unexpected(event.error());
  PerfEventSpec spec{.name = std::string(name),
                     .scale = event->scale,
                     .unit = event->unit,
                     .pmu = event->pmu,
                     .cpus = event->cpus};
  const std::string_view terms = name.substr(name.find('/') + 1);
  const std::string_view first = terms.substr(0, terms.find_first_of(",/"));
  if (first.find('=') == std::string_view::npos) spec.pmu_event = std::string(first);
  spec.attr.type = event->type;
  spec.attr.config = event->config[0];
  spec.attr.config1 = event->config[1];
  spec.attr.config2 = event->config[2];
  return spec;
}

std::expected<std::vector<std::vector<std::string>>, std::string> ParseEventGroups(
    const std::vector<std::string>& values) {
  std::vector<std::vector<std::string>> groups;
  for (std::string_view value : values) {
    value = sysfs::Trim(value);
    const bool group = value.starts_with('{');
    if (group) {
      if (!value.ends_with('}')) return std::unexpected("unclosed group: " + std::string(value));
      value = value.substr(1, value.size() - 2);
    }
    std::vector<std::string> members;
    std::string current;
    bool in_pmu_terms = false;  // between "pmu/" and its closing "/"
    for (const char c : value) {
      if (c == '/') in_pmu_terms = !in_pmu_terms;
      if (c == ',' && !in_pmu_terms && group) {
        members.emplace_back(sysfs::Trim(current));
        current.clear();
        continue;
      }
      current.push_back(c);
    }
    members.emplace_back(sysfs::Trim(current));
    for (const std::string& member : members) {
      if (member.empty())
        return std::unexpected("empty event name in \"" + std::string(value) + "\"");
    }
    groups.push_back(std::move(members));
  }
  // One name, one series: the same event twice would report one count twice.
  std::set<std::string> seen;
  for (const auto& group : groups) {
    for (const std::string& member : group) {
      if (!seen.insert(member).second)
        return std::unexpected("\"" + member + "\" configured twice");
    }
  }
  return groups;
}

std::optional<double> ScaledValue(const PerfReading& reading) {
  if (reading.running == 0) return std::nullopt;
  if (reading.running >= reading.enabled) return static_cast<double>(reading.value);
  return static_cast<double>(reading.value) * static_cast<double>(reading.enabled) /
         static_cast<double>(reading.running);
}

std::expected<PerfGroup, int> PerfGroup::Open(const std::vector<perf_event_attr>& attrs, pid_t pid,
                                              int cpu, bool inherit) {
  PerfGroup group;
  // The kernel refuses PERF_FORMAT_GROUP with inherit: inherited counters are read one by one.
  group.grouped_ = !inherit && attrs.size() > 1;
  for (size_t i = 0; i < attrs.size(); ++i) {
    perf_event_attr attr = attrs[i];
    attr.size = sizeof attr;
    attr.disabled = 0;
    attr.inherit = inherit ? 1 : 0;
    attr.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING |
                       (group.grouped_ ? PERF_FORMAT_GROUP : 0);
    const int leader = group.grouped_ && i > 0 ? group.fds_.front() : -1;
    const long fd = PerfEventOpen(&attr, pid, cpu, leader);
    if (fd < 0) return std::unexpected(errno);
    group.fds_.push_back(static_cast<int>(fd));
  }
  return group;
}

PerfGroup::PerfGroup(PerfGroup&& other) noexcept
    : fds_(std::exchange(other.fds_, {})), grouped_(other.grouped_) {}

PerfGroup& PerfGroup::operator=(PerfGroup&& other) noexcept {
  if (this != &other) {
    for (const int fd : fds_) Syscalls().close(fd);
    fds_ = std::exchange(other.fds_, {});
    grouped_ = other.grouped_;
  }
  return *this;
}

PerfGroup::~PerfGroup() {
  for (const int fd : fds_) Syscalls().close(fd);
}

std::optional<std::vector<PerfReading>> PerfGroup::Read() const {
  std::vector<PerfReading> readings;
  if (fds_.empty()) return readings;
  if (grouped_) {
    // { nr, time_enabled, time_running, value[nr] }
    std::vector<uint64_t> buf(3 + fds_.size());
    const ssize_t n = Syscalls().read(fds_.front(), buf.data(), buf.size() * sizeof(uint64_t));
    // The whole group or nothing: a short read leaves members' values unread, not 0.
    if (n != static_cast<ssize_t>(buf.size() * sizeof(uint64_t)) || buf[0] != fds_.size()) {
      return std::nullopt;
    }
    for (size_t i = 0; i < fds_.size(); ++i) readings.push_back({buf[3 + i], buf[1], buf[2]});
    return readings;
  }
  for (const int fd : fds_) {
    uint64_t buf[3];
    if (Syscalls().read(fd, buf, sizeof buf) != static_cast<ssize_t>(sizeof buf)) {
      return std::nullopt;
    }
    readings.push_back({buf[0], buf[1], buf[2]});
  }
  return readings;
}

std::string PerfOpenErrorReason(int err) {
  switch (err) {
    case ENOENT:
    case EOPNOTSUPP:
      return "not supported by this CPU or kernel (no such PMU event; virtual machines often "
             "have no hardware PMU)";
    case EACCES:
    case EPERM: {
      const auto paranoid = sysfs::ReadAttribute("/proc/sys/kernel/perf_event_paranoid");
      return "permission denied: system-wide counting needs CAP_PERFMON (or CAP_SYS_ADMIN) or "
             "kernel.perf_event_paranoid <= 0 (it is " +
             paranoid.value_or("unknown") + ")";
    }
    case EINVAL:
      return "invalid for this PMU (bad config bits, or a group mixing PMUs)";
    case EMFILE:
      return "too many open files (raise the exporter's file limit)";
    default:
      return std::strerror(err);
  }
}

std::expected<ProcessPerfCounters, std::string> ProcessPerfCounters::Open(
    pid_t pid, const std::vector<PerfEventSpec>& events, const std::filesystem::path& procfs) {
  const auto tasks = sysfs::ListDirectory(procfs / std::to_string(pid) / "task");
  if (tasks.empty()) return std::unexpected("no process " + std::to_string(pid));
  ProcessPerfCounters counters;
  counters.events_ = events;
  counters.counters_.resize(events.size());
  counters.reasons_.resize(events.size());
  for (size_t e = 0; e < events.size(); ++e) {
    for (const std::string& task : tasks) {
      const auto tid = sysfs::ParseUnsigned(task);
      if (!tid) continue;
      auto group = PerfGroup::Open({events[e].attr}, static_cast<pid_t>(*tid), -1,
                                   /*inherit=*/true);
      if (!group) {
        if (group.error() == ESRCH) continue;  // the thread ended meanwhile
        counters.reasons_[e] = PerfOpenErrorReason(group.error());
        counters.counters_[e].clear();
        break;
      }
      counters.counters_[e].push_back(std::move(*group));
    }
  }
  return counters;
}

std::vector<ProcessPerfCounters::Event> ProcessPerfCounters::Read() const {
  std::vector<Event> out;
  for (size_t e = 0; e < events_.size(); ++e) {
    Event event{.name = events_[e].name, .reason = reasons_[e]};
    if (reasons_[e].empty()) {
      double sum = 0;
      bool any = false;
      for (const PerfGroup& group : counters_[e]) {
        const auto readings = group.Read();
        if (!readings || readings->empty()) continue;
        if (const auto value = ScaledValue(readings->front())) {
          sum += *value;
          any = true;
        }
      }
      if (any) event.value = sum;
    }
    out.push_back(std::move(event));
  }
  return out;
}

}  // namespace rdmascope::sys
