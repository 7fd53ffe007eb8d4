// Perf PMUs as the kernel describes them in sysfs, and perf-style event strings resolved
// against them: "uncore_imc_0/cas_count_read/", "amd_df/event=0x07,umask=0x38/",
// "cpu/event=0xc0,umask=0x00/". Reads <sysfs>/bus/event_source/devices/<pmu>/:
//   type                 the perf_event_attr.type to use
//   format/<term>        where a term's bits go: "config:0-7", "config:0-7,32-35", "config1:0"
//   events/<name>        named events: "event=0x04,umask=0x03"
//   events/<name>.scale  multiply counts by this ("6.103515625e-5")
//   events/<name>.unit   the unit after scaling ("MiB")
//   cpumask              for uncore PMUs, the CPU (one per socket) to count on
#pragma once

#include <cstdint>
#include <expected>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rdmascope::sys {

// "config:0-7,32-35" -> which config word and which bit ranges, low bits of the value first.
struct PmuFormat {
  int config = 0;                           // 0: config, 1: config1, 2: config2
  std::vector<std::pair<int, int>> ranges;  // inclusive [lo, hi]
};
std::expected<PmuFormat, std::string> ParsePmuFormat(std::string_view text);

// Scatters `value` into the format's bit ranges; false if it does not fit.
bool ApplyPmuFormat(const PmuFormat& format, uint64_t value, uint64_t config[3]);

// "0-3,8,10-11" -> {0,1,2,3,8,10,11}; nullopt-like empty on malformed input.
std::vector<int> ParseCpuList(std::string_view text);

struct PmuEvent {
  std::string pmu;
  uint32_t type = 0;
  uint64_t config[3] = {0, 0, 0};
  double scale = 1.0;     // from <event>.scale, else 1
  std::string unit;       // from <event>.unit, else empty
  std::vector<int> cpus;  // the PMU's cpumask; empty: every CPU (core PMUs)
};

// Resolves "pmu/terms/" against the PMUs under `sysfs`; terms are "name" (a named event of
// the PMU), "term=value" (a format term, or config/config1/config2 directly) or "term"
// (a format term set to 1), separated by commas.
std::expected<PmuEvent, std::string> ResolvePmuEvent(const std::filesystem::path& sysfs,
                                                     std::string_view spec);

// Where ResolvePmuEvent's attributes come from: the text of <path> as sysfs::ReadAttribute
// returns it (trailing newlines and NULs removed, nullopt when absent or "N/A"). The overload
// above reads the files; the fuzz target (fuzz/pmu_fuzzer.cc) serves an in-memory tree, as
// rewriting files on every input made it run at a few hundred inputs a second.
using PmuFiles = std::function<std::optional<std::string>(const std::filesystem::path&)>;
std::expected<PmuEvent, std::string> ResolvePmuEvent(const std::filesystem::path& sysfs,
                                                     std::string_view spec, const PmuFiles& files);

// PMUs whose name starts with `prefix` (e.g. "uncore_imc_"), sorted.
std::vector<std::string> ListPmus(const std::filesystem::path& sysfs, std::string_view prefix);

}  // namespace rdmascope::sys
