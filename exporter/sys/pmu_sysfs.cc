#include "sys/pmu_sysfs.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>

#include "core/sysfs.h"

namespace rdmascope::sys {
namespace {

std::filesystem::path PmuDir(const std::filesystem::path& sysfs, std::string_view pmu) {
  return sysfs / "bus" / "event_source" / "devices" / std::string(pmu);
}

std::vector<std::string_view> Split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  while (true) {
    const auto at = text.find(separator);
    parts.push_back(text.substr(0, at));
    if (at == std::string_view::npos) return parts;
    text.remove_prefix(at + 1);
  }
}

std::optional<uint64_t> ParseNumber(std::string_view text) {
  text = sysfs::Trim(text);
  int base = 10;
  if (text.starts_with("0x") || text.starts_with("0X")) {
    base = 16;
    text.remove_prefix(2);
  }
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, base);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

// Applies "term=value,term,..." to `event` using the PMU's format files.
std::expected<void, std::string> ApplyTerms(const PmuFiles& files, const std::filesystem::path& dir,
                                            std::string_view terms, PmuEvent& event) {
  for (std::string_view term : Split(terms, ',')) {
    term = sysfs::Trim(term);
    if (term.empty()) continue;
    const auto eq = term.find('=');
    const std::string_view name = term.substr(0, eq);
    std::optional<uint64_t> value = 1;
    if (eq != std::string_view::npos) value = ParseNumber(term.substr(eq + 1));
    if (!value) return std::unexpected("bad value in \"" + std::string(term) + "\"");
    if (name == "config" || name == "config1" || name == "config2") {
      event.config[name == "config" ? 0 : name == "config1" ? 1 : 2] = *value;
      continue;
    }
    const auto text = files(dir / "format" / std::string(name));
    if (!text) return std::unexpected("unknown term \"" + std::string(name) + "\"");
    const auto format = ParsePmuFormat(*text);
    if (!format) return std::unexpected(format.error());
    if (!ApplyPmuFormat(*format, *value, event.config)) {
      return std::unexpected("value of \"" + std::string(name) + "\" does not fit " + *text);
    }
  }
  return {};
}

}  // namespace

std::expected<PmuFormat, std::string> ParsePmuFormat(std::string_view text) {
  text = sysfs::Trim(text);
  const auto colon = text.find(':');
  if (colon == std::string_view::npos)
    return std::unexpected("format without ':': " + std::string(text));
  const std::string_view word = text.substr(0, colon);
  PmuFormat format;
  if (word == "config")
    format.config = 0;
  else if (word == "config1")
    format.config = 1;
  else if (word == "config2")
    format.config = 2;
  else
    return std::unexpected("unknown config word \"" + std::string(word) + "\"");
  for (std::string_view range : Split(text.substr(colon + 1), ',')) {
    const auto dash = range.find('-');
    const auto lo = ParseNumber(range.substr(0, dash));
    const auto hi = dash == std::string_view::npos ? lo : ParseNumber(range.substr(dash + 1));
    if (!lo || !hi || *lo > *hi || *hi > 63) {
      return std::unexpected("bad bit range \"" + std::string(range) + "\"");
    }
    format.ranges.emplace_back(static_cast<int>(*lo), static_cast<int>(*hi));
  }
  return format;
}

bool ApplyPmuFormat(const PmuFormat& format, uint64_t value, uint64_t config[3]) {
  int used = 0;
  for (const auto& [lo, hi] : format.ranges) {
    const int width = hi - lo + 1;
    const uint64_t mask = width == 64 ? ~0ULL : (1ULL << width) - 1;
    const uint64_t part = used >= 64 ? 0 : (value >> used) & mask;
    config[format.config] = (config[format.config] & ~(mask << lo)) | (part << lo);
    used += width;
  }
  return used >= 64 || (value >> used) == 0;
}

std::vector<int> ParseCpuList(std::string_view text) {
  std::vector<int> cpus;
  text = sysfs::Trim(text);
  if (text.empty()) return cpus;
  for (std::string_view part : Split(text, ',')) {
    const auto dash = part.find('-');
    const auto lo = ParseNumber(part.substr(0, dash));
    const auto hi = dash == std::string_view::npos ? lo : ParseNumber(part.substr(dash + 1));
    if (!lo || !hi || *lo > *hi || *hi > 65535) return {};
    // The kernel prints bitmaps in ascending, disjoint runs (%*pbl): anything else is not its
    // text, and refusing it bounds the list to 65536 CPUs (the fuzzer made 33 million entries
    // from 4 KiB of "0-65535," repeated).
    if (!cpus.empty() && *lo <= static_cast<uint64_t>(cpus.back())) return {};
    for (uint64_t cpu = *lo; cpu <= *hi; ++cpu) cpus.push_back(static_cast<int>(cpu));
  }
  return cpus;
}

std::expected<PmuEvent, std::string> ResolvePmuEvent(const std::filesystem::path& sysfs,
                                                     std::string_view spec) {
  return ResolvePmuEvent(
      sysfs, spec, [](const std::filesystem::path& path) { return sysfs::ReadAttribute(path); });
}

std::expected<PmuEvent, std::string> ResolvePmuEvent(const std::filesystem::path& sysfs,
                                                     std::string_view spec, const PmuFiles& files) {
  // "pmu/terms/" (the trailing slash is optional, as perf accepts).
  const auto slash = spec.find('/');
  if (slash == std::string_view::npos || slash == 0) {
    return std::unexpected("not a pmu/event/ string: " + std::string(spec));
  }
  PmuEvent event{.pmu = std::string(spec.substr(0, slash))};
  std::string_view terms = spec.substr(slash + 1);
  if (terms.ends_with('/')) terms.remove_suffix(1);
  if (terms.find('/') != std::string_view::npos) {
    return std::unexpected("modifiers after the last '/' are not supported: " + std::string(spec));
  }
  const auto dir = PmuDir(sysfs, event.pmu);
  const auto type_text = files(dir / "type");
  const auto type = type_text ? sysfs::ParseUnsigned(*type_text) : std::nullopt;
  if (!type || *type > UINT32_MAX) return std::unexpected("no PMU \"" + event.pmu + "\" in sysfs");
  event.type = static_cast<uint32_t>(*type);
  if (const auto mask = files(dir / "cpumask")) event.cpus = ParseCpuList(*mask);

  // A leading term without '=' that names an event of the PMU expands to its definition.
  const auto first = Split(terms, ',').front();
  if (!first.empty() && first.find('=') == std::string_view::npos &&
      !files(dir / "format" / std::string(first))) {
    const auto definition = files(dir / "events" / std::string(first));
    if (!definition) {
      return std::unexpected("PMU \"" + event.pmu + "\" has no event \"" + std::string(first) +
                             "\"");
    }
    if (auto applied = ApplyTerms(files, dir, *definition, event); !applied)
      return std::unexpected(applied.error());
    if (const auto scale = files(dir / "events" / (std::string(first) + ".scale"))) {
      // Positive and finite only: strtod took "inf" (counts scaled to infinity).
      const auto value = sysfs::ParseDouble(sysfs::Trim(*scale));
      if (value && *value > 0) event.scale = *value;
    }
    if (const auto unit = files(dir / "events" / (std::string(first) + ".unit"))) {
      event.unit = *unit;
    }
    terms.remove_prefix(std::min(terms.size(), first.size() + 1));
  }
  if (auto applied = ApplyTerms(files, dir, terms, event); !applied)
    return std::unexpected(applied.error());
  return event;
}

std::vector<std::string> ListPmus(const std::filesystem::path& sysfs, std::string_view prefix) {
  std::vector<std::string> pmus;
  for (const std::string& name : sysfs::ListDirectory(sysfs / "bus" / "event_source" / "devices")) {
    if (name.starts_with(prefix)) pmus.push_back(name);
  }
  std::sort(pmus.begin(), pmus.end());
  return pmus;
}

}  // namespace rdmascope::sys
