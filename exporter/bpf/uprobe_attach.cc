#include "bpf/uprobe_attach.h"

#include <bpf/libbpf.h>
#include <dlfcn.h>
#include <infiniband/verbs.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>

#include "core/log.h"
#include "sys/elf_symbols.h"

namespace rdmascope {
namespace {

int LibbpfPrint(enum libbpf_print_level level, const char* format, va_list args) {
  if (level == LIBBPF_DEBUG || !log::Enabled(log::Level::kDebug)) return 0;
  // A verifier log comes as one message and says why at its end: its last 16 KiB are kept.
  constexpr size_t kTail = 16 << 10;
  va_list again;
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, format, args);
  std::string text(n > 0 ? static_cast<size_t>(n) : 0, '\0');
  if (n > 0) std::vsnprintf(text.data(), text.size() + 1, format, again);
  va_end(again);
  while (!text.empty() && text.back() == '\n') text.pop_back();
  if (text.size() > kTail) text = "[...] " + text.substr(text.size() - kTail);
  log::Debug("libbpf", {{"msg", text}});
  return 0;
}

std::string Printable(const sys::FunctionSymbol& symbol) {
  if (symbol.version.empty()) return symbol.name;
  return symbol.name + (symbol.default_version ? "@@" : "@") + symbol.version;
}

}  // namespace

std::string ErrnoText(int err) { return std::strerror(err < 0 ? -err : err); }

void RouteLibbpfLogs() { libbpf_set_print(&LibbpfPrint); }

std::string LinkedLibibverbsPath() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&ibv_get_device_list), &info) == 0 ||
      info.dli_fname == nullptr) {
    return "";
  }
  std::error_code ec;
  const auto canonical = std::filesystem::canonical(info.dli_fname, ec);
  return ec ? info.dli_fname : canonical.string();
}

std::vector<std::string> UprobeTargets(const std::vector<std::string>& libraries,
                                       const std::vector<std::string>& binaries) {
  std::vector<std::string> targets = libraries;
  if (targets.empty()) {
    if (auto linked = LinkedLibibverbsPath(); !linked.empty()) targets.push_back(linked);
  }
  targets.insert(targets.end(), binaries.begin(), binaries.end());
  return targets;
}

std::expected<UprobeAttachment, std::string> AttachUprobes(const std::string& target,
                                                           std::span<const UprobeEntryPoint> table,
                                                           bool default_versions_only,
                                                           std::vector<bpf_link*>& links) {
  const auto symbols = sys::ReadFunctionSymbols(target);
  if (!symbols) return std::unexpected(symbols.error());
  const auto in_table = [&](std::string_view name) {
    return std::any_of(table.begin(), table.end(),
                       [&](const UprobeEntryPoint& entry) { return entry.symbol == name; });
  };
  std::set<std::string> probed_names;
  for (const sys::FunctionSymbol& symbol : *symbols) {
    if (in_table(symbol.name)) probed_names.insert(symbol.name);
  }
  UprobeAttachment attachment;
  struct Site {
    const sys::FunctionSymbol* symbol;
    const UprobeEntryPoint* entry;
  };
  std::vector<Site> sites;
  std::set<uint64_t> seen_offsets;  // aliases share an address: attach once
  // In the table's order (the caller's: the MR probe attaches the ends of regions first).
  for (const UprobeEntryPoint& entry : table) {
    for (const sys::FunctionSymbol& symbol : *symbols) {
      if (symbol.name != entry.symbol) continue;
      if (default_versions_only && !symbol.default_version) continue;
      if (probed_names.contains(symbol.forwards_to)) {
        ++attachment.forwarders_skipped;
        log::Debug("uprobe: forwarder not probed", {{"target", target},
                                                    {"symbol", Printable(symbol)},
                                                    {"forwards_to", symbol.forwards_to}});
        continue;
      }
      if (!seen_offsets.insert(symbol.file_offset).second) continue;
      sites.push_back({&symbol, &entry});
    }
  }
  // Every return probe before any entry probe: a thread entering while we attach then either
  // has no record (its return finds nothing) or a record whose return will be seen. Entry
  // probes first would leave a record for every call caught in between, never closed.
  for (const bool retprobe : {true, false}) {
    for (const Site& site : sites) {
      bpf_program* program = retprobe ? site.entry->on_return : site.entry->on_entry;
      if (program == nullptr) continue;
      bpf_link* link = bpf_program__attach_uprobe(program, retprobe, -1, target.c_str(),
                                                  site.symbol->file_offset);
      if (link == nullptr) {
        return std::unexpected("cannot attach to " + Printable(*site.symbol) + " in " + target +
                               ": " + ErrnoText(errno));
      }
      links.push_back(link);
    }
  }
  for (const Site& site : sites) {
    ++attachment.entry_points;
    log::Debug("uprobe attached", {{"target", target}, {"symbol", Printable(*site.symbol)}});
  }
  if (attachment.entry_points == 0) {
    return std::unexpected("none of " + std::string(table.front().symbol) + "... in " + target);
  }
  return attachment;
}

}  // namespace rdmascope
