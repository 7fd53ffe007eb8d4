// The standard process_* metrics of Prometheus client libraries, for rdmascope itself,
// read from <procfs>/self: CPU time, memory, file descriptors and start time.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string_view>

#include "core/metric_set.h"

namespace rdmascope {

struct ProcessStat {
  double cpu_seconds;
  double virtual_bytes;
  double resident_bytes;
  double start_time_seconds;  // since the epoch
};

// Parses /proc/PID/stat (the comm field may contain spaces and parentheses) given the
// machine's boot time, clock ticks per second and page size.
std::optional<ProcessStat> ParseProcessStat(std::string_view stat, double boot_time_seconds,
                                            long ticks_per_second, long page_size);

// Field 22 of /proc/PID/stat: the process's start in clock ticks since boot (the kernel's
// start_boottime / (1e9 / USER_HZ)), which tells a reused pid apart.
std::optional<uint64_t> ParseStartTicks(std::string_view stat);

// Field `field` (numbered as in proc(5), from 3) of /proc/PID/stat; e.g. 39: the CPU the task
// last ran on. nullopt when the text ends inside that field (a short read): no end of line or
// separator after it.
std::optional<uint64_t> ParseStatField(std::string_view stat, size_t field);

// Open descriptors in `fd_dir` (<procfs>/self/fd). On procfs since Linux 6.2 the directory's
// size is that count (fs/proc/fd.c, proc_fd_getattr: proc_readfd_count): one stat instead of
// listing every descriptor (~150 for the exporter's BPF links, programs and perf events);
// otherwise (older kernels: size 0; a fixture directory) the entries are counted, less the
// listing's own descriptor on procfs.
// nullopt if it is not a directory.
std::optional<size_t> OpenFdCount(const std::filesystem::path& fd_dir);

void AddProcessMetrics(const std::filesystem::path& procfs, MetricSet& out);

}  // namespace rdmascope
