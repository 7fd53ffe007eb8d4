#include "sys/numa_placement.h"

#include <limits>

#include "core/process_metrics.h"
#include "core/sysfs.h"

namespace rdmascope::sys {
namespace {

// A stat line is one line of about 300 bytes; a thread's comm is at most 64.
constexpr size_t kStatMaxBytes = 4096;
// numa_maps has one line per mapping, about 100 bytes: 64 MiB is over half a million.
constexpr size_t kNumaMapsMaxBytes = 64u << 20;

std::vector<std::string_view> Tokens(std::string_view line) {
  std::vector<std::string_view> tokens;
  while (!line.empty()) {
    const auto start = line.find_first_not_of(" \t");
    if (start == std::string_view::npos) break;
    line.remove_prefix(start);
    const auto end = line.find_first_of(" \t");
    tokens.push_back(line.substr(0, end));
    if (end == std::string_view::npos) break;
    line.remove_prefix(end);
  }
  return tokens;
}

}  // namespace

std::optional<int> ParseStatProcessor(std::string_view stat) {
  const auto cpu = ParseStatField(stat, 39);
  if (!cpu || *cpu > static_cast<uint64_t>(std::numeric_limits<int>::max())) return std::nullopt;
  return static_cast<int>(*cpu);
}

std::optional<std::string> ParseStatComm(std::string_view stat) {
  const auto open = stat.find('(');
  const auto close = stat.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) {
    return std::nullopt;
  }
  return std::string(stat.substr(open + 1, close - open - 1));
}

std::vector<ThreadCpu> ReadThreadCpus(const std::filesystem::path& procfs, uint32_t pid,
                                      const CpuTopology& topology) {
  std::vector<ThreadCpu> threads;
  const auto tasks = procfs / std::to_string(pid) / "task";
  for (const std::string& entry : sysfs::ListDirectory(tasks)) {
    const auto tid = sysfs::ParseUnsigned(entry);
    if (!tid || *tid > UINT32_MAX) continue;
    const auto stat = sysfs::ReadFile(tasks / entry / "stat", kStatMaxBytes);
    if (!stat) continue;  // exited since the listing
    // A zombie or dead task runs nowhere: its last CPU says nothing about the window.
    const auto close = stat->rfind(')');
    if (close == std::string::npos || close + 2 >= stat->size()) continue;
    if ((*stat)[close + 2] == 'Z' || (*stat)[close + 2] == 'X') continue;
    const auto cpu = ParseStatProcessor(*stat);
    if (!cpu) continue;
    const auto node = topology.node_of_cpu.find(*cpu);
    if (node == topology.node_of_cpu.end()) continue;  // no known node: no figure, not node 0
    threads.push_back({.tid = static_cast<uint32_t>(*tid),
                       .comm = ParseStatComm(*stat).value_or(""),
                       .cpu = *cpu,
                       .node = node->second});
  }
  return threads;
}

NumaMemory ParseNumaMaps(std::string_view text) {
  NumaMemory memory;
  while (!text.empty()) {
    const auto end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    if (sysfs::Trim(line).empty()) continue;
    const auto tokens = Tokens(line);
    std::map<int, uint64_t> pages;
    bool malformed = false;
    std::optional<uint64_t> page_kib;
    for (size_t i = 1; i < tokens.size(); ++i) {  // token 0 is the start address
      const std::string_view token = tokens[i];
      if (token.starts_with("kernelpagesize_kB=")) {
        page_kib = sysfs::ParseUnsigned(token.substr(18));
        // The last token; a page size is never 0.
        if (!page_kib || *page_kib == 0 || i + 1 != tokens.size()) malformed = true;
        continue;
      }
      if (token.size() < 2 || token[0] != 'N' || token[1] < '0' || token[1] > '9') continue;
      const auto equals = token.find('=');
      const auto node = equals == std::string_view::npos
                            ? std::nullopt
                            : sysfs::ParseUnsigned(token.substr(1, equals - 1));
      const auto count = equals == std::string_view::npos
                             ? std::nullopt
                             : sysfs::ParseUnsigned(token.substr(equals + 1));
      if (!node || !count || *node > 4096) {
        malformed = true;
        continue;
      }
      pages[static_cast<int>(*node)] += *count;
    }
    if (!pages.empty() && !page_kib) malformed = true;
    // The mapping's start address, hexadecimal without 0x.
    if (tokens.empty() ||
        tokens[0].find_first_not_of("0123456789abcdef") != std::string_view::npos) {
      malformed = true;
    }
    std::map<int, uint64_t> bytes;
    for (const auto& [node, count] : pages) {
      if (malformed) break;
      const uint64_t page_bytes = *page_kib * 1024;
      if (*page_kib > UINT64_MAX / 1024 || count > UINT64_MAX / page_bytes)
        malformed = true;
      else
        bytes[node] = count * page_bytes;
    }
    if (malformed) {
      ++memory.malformed_lines;
      continue;
    }
    for (const auto& [node, count] : bytes) memory.bytes_by_node[node] += count;
  }
  return memory;
}

std::optional<NumaMemory> ReadNumaMemory(const std::filesystem::path& procfs, uint32_t pid) {
  const auto text = sysfs::ReadFile(procfs / std::to_string(pid) / "numa_maps", kNumaMapsMaxBytes);
  if (!text) return std::nullopt;
  return ParseNumaMaps(*text);
}

}  // namespace rdmascope::sys
