#include "core/process_metrics.h"

#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <sstream>
#include <string>
#include <vector>

#include "core/sysfs.h"

namespace rdmascope {
namespace {

using prometheus::MetricType;

constexpr MetricDesc kCpu{"process_cpu_seconds_total",
                          "Total user and system CPU time spent in seconds.", MetricType::Counter};
constexpr MetricDesc kResident{"process_resident_memory_bytes", "Resident memory size in bytes.",
                               MetricType::Gauge};
constexpr MetricDesc kVirtual{"process_virtual_memory_bytes", "Virtual memory size in bytes.",
                              MetricType::Gauge};
constexpr MetricDesc kStart{"process_start_time_seconds",
                            "Start time of the process since unix epoch in seconds.",
                            MetricType::Gauge};
constexpr MetricDesc kOpenFds{"process_open_fds", "Number of open file descriptors.",
                              MetricType::Gauge};
constexpr MetricDesc kMaxFds{"process_max_fds", "Maximum number of open file descriptors.",
                             MetricType::Gauge};

std::optional<double> BootTime(const std::filesystem::path& procfs) {
  // The exporter's own series: read live even while a capture is replayed (sysfs::ReadOwnFile).
  const auto stat = sysfs::ReadOwnFile(procfs / "stat", 4 << 20);
  if (!stat) return std::nullopt;
  std::istringstream lines(*stat);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.starts_with("btime ")) {
      if (const auto v = sysfs::ParseUnsigned(std::string_view(line).substr(6))) {
        return static_cast<double>(*v);
      }
    }
  }
  return std::nullopt;
}

std::optional<double> MaxFds(const std::filesystem::path& procfs) {
  const auto limits = sysfs::ReadOwnFile(procfs / "self" / "limits", 64 << 10);
  if (!limits) return std::nullopt;
  std::istringstream lines(*limits);
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.starts_with("Max open files")) continue;
    std::istringstream fields(line.substr(std::string_view("Max open files").size()));
    std::string soft;
    fields >> soft;
    if (const auto v = sysfs::ParseUnsigned(soft)) return static_cast<double>(*v);
  }
  return std::nullopt;
}

// The fields after the last ')' (the comm may contain spaces and parentheses): field 3 first.
std::vector<std::string_view> FieldsAfterComm(std::string_view stat) {
  std::vector<std::string_view> fields;
  const auto close = stat.rfind(')');
  if (close == std::string_view::npos) return fields;
  std::string_view rest = stat.substr(close + 1);
  while (!rest.empty()) {
    const auto start = rest.find_first_not_of(' ');
    if (start == std::string_view::npos) break;
    rest.remove_prefix(start);
    const auto end = rest.find(' ');
    fields.push_back(rest.substr(0, end));
    if (end == std::string_view::npos) break;
    rest.remove_prefix(end);
  }
  return fields;
}

}  // namespace

std::optional<uint64_t> ParseStatField(std::string_view stat, size_t field) {
  const auto fields = FieldsAfterComm(stat);
  if (field < 3 || fields.size() <= field - 3) return std::nullopt;
  // The kernel ends the line with '\n' (fs/proc/array.c do_task_stat): a last field without
  // it may be cut by a short read ("1234" of "123456"), which must not pass for the value.
  if (fields.size() == field - 2 && !stat.ends_with('\n')) return std::nullopt;
  return sysfs::ParseUnsigned(fields[field - 3]);
}

std::optional<uint64_t> ParseStartTicks(std::string_view stat) { return ParseStatField(stat, 22); }

std::optional<ProcessStat> ParseProcessStat(std::string_view stat, double boot_time_seconds,
                                            long ticks_per_second, long page_size) {
  if (ticks_per_second <= 0) return std::nullopt;
  const auto fields = FieldsAfterComm(stat);
  // fields[0] is field 3; utime=14, stime=15, starttime=22, vsize=23, rss=24.
  const auto field = [&](size_t number) -> std::optional<uint64_t> {
    if (number - 3 >= fields.size()) return std::nullopt;
    return sysfs::ParseUnsigned(fields[number - 3]);
  };
  const auto utime = field(14), stime = field(15), start = field(22), vsize = field(23),
             rss = field(24);
  if (!utime || !stime || !start || !vsize || !rss) return std::nullopt;
  const auto ticks = static_cast<double>(ticks_per_second);
  return ProcessStat{
      .cpu_seconds = static_cast<double>(*utime + *stime) / ticks,
      .virtual_bytes = static_cast<double>(*vsize),
      .resident_bytes = static_cast<double>(*rss) * static_cast<double>(page_size),
      .start_time_seconds = boot_time_seconds + static_cast<double>(*start) / ticks,
  };
}

std::optional<size_t> OpenFdCount(const std::filesystem::path& fd_dir) {
  struct statfs fs {};
  struct stat st {};
  if (::stat(fd_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return std::nullopt;
  const bool procfs = ::statfs(fd_dir.c_str(), &fs) == 0 && fs.f_type == PROC_SUPER_MAGIC;
  if (procfs && st.st_size > 0) return static_cast<size_t>(st.st_size);
  size_t entries = sysfs::ListDirectory(fd_dir).size();
  // On procfs the descriptor open for the listing is one of the entries: not counted, so that
  // both ways give the same figure.
  if (procfs && entries > 0) --entries;
  return entries;
}

void AddProcessMetrics(const std::filesystem::path& procfs, MetricSet& out) {
  // The boot time never changes; /proc/stat is large on big hosts, so read it once.
  static const std::optional<double> boot = BootTime(procfs);
  auto stat_text = sysfs::ReadOwnFile(procfs / "self" / "stat", 4096);
  if (stat_text) *stat_text = std::string(sysfs::Trim(*stat_text));
  if (boot && stat_text) {
    if (const auto stat =
            ParseProcessStat(*stat_text, *boot, ::sysconf(_SC_CLK_TCK), ::sysconf(_SC_PAGESIZE))) {
      out.Add(kCpu, {}, stat->cpu_seconds);
      out.Add(kResident, {}, stat->resident_bytes);
      out.Add(kVirtual, {}, stat->virtual_bytes);
      out.Add(kStart, {}, stat->start_time_seconds);
    }
  }
  if (const auto fds = OpenFdCount(procfs / "self" / "fd")) {
    out.Add(kOpenFds, {}, static_cast<double>(*fds));
  }
  if (const auto max = MaxFds(procfs)) out.Add(kMaxFds, {}, *max);
}

}  // namespace rdmascope
