// Where a process runs and where its memory sits, from procfs: the CPU each thread last ran on
// (/proc/PID/task/TID/stat field 39, "processor": task_cpu() in fs/proc/array.c do_task_stat)
// mapped to its NUMA node through sys::CpuTopology, and the resident pages per node of every
// mapping (/proc/PID/numa_maps, fs/proc/task_mmu.c show_numa_map). Every path hangs off the
// configured procfs root. A task or process that vanished between listing and reading is
// skipped; a malformed line is skipped, never counted as 0.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sys/cpu_topology.h"

namespace rdmascope::sys {

// One thread of the process at the moment it was read.
struct ThreadCpu {
  uint32_t tid = 0;
  std::string comm;  // between the first '(' and the last ')' of its stat
  int cpu = 0;       // the CPU it last ran on
  int node = 0;      // that CPU's NUMA node
};

// The "processor" field (39) of a stat line, counted after the LAST ')' since the comm may
// itself contain ") 9 9 (". nullopt for a truncated or malformed line.
std::optional<int> ParseStatProcessor(std::string_view stat);
// The comm of a stat line: between the first '(' and the last ')'.
std::optional<std::string> ParseStatComm(std::string_view stat);

// Every thread of `pid` whose CPU maps to a known node of `topology`. Threads that exit while
// being read, zombies (state Z or X), malformed stat lines and CPUs of no known node are left
// out (never node 0).
std::vector<ThreadCpu> ReadThreadCpus(const std::filesystem::path& procfs, uint32_t pid,
                                      const CpuTopology& topology);

struct NumaMemory {
  std::map<int, uint64_t> bytes_by_node;  // N<node>=<pages> x kernelpagesize_kB
  uint64_t malformed_lines = 0;           // skipped
};

// /proc/PID/numa_maps text. Per mapping: "N<node>=<pages>" tokens count the mapping's
// resident pages on each node, in units of the mapping's kernel page size
// ("kernelpagesize_kB=<kB>", the last token: hugetlb pages count one each at their huge size,
// a THP counts its 4 KiB base pages). A mapping with no resident page prints neither. A line
// with N tokens but no valid page size, or an unparsable N token, is skipped whole.
NumaMemory ParseNumaMaps(std::string_view text);

// The process's numa_maps read and parsed; nullopt when it cannot be read (gone, no NUMA
// support in the kernel, no permission).
std::optional<NumaMemory> ReadNumaMemory(const std::filesystem::path& procfs, uint32_t pid);

}  // namespace rdmascope::sys
