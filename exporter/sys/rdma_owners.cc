#include "sys/rdma_owners.h"

#include <charconv>
#include <map>
#include <string_view>

#include "core/sysfs.h"

namespace rdmascope::sys {

std::optional<uint32_t> ThreadGroupOf(const std::filesystem::path& procfs, uint32_t pid) {
  const auto status = sysfs::ReadFile(procfs / std::to_string(pid) / "status", 8192);
  if (!status) return std::nullopt;
  const std::string_view text = *status;
  constexpr std::string_view kField = "\nTgid:";
  const size_t at = text.find(kField);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view rest = text.substr(at + kField.size());
  while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
  uint32_t tgid = 0;
  const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), tgid);
  if (ec != std::errc{} || end == rest.data() || tgid == 0) return std::nullopt;
  return tgid;
}

namespace {

bool IsUser(const RdmaResourceEntry& entry) { return entry.kernel_name.empty(); }

}  // namespace

void ResolveOwners(std::vector<RdmaDeviceResources>& devices, const ThreadGroupLookup& tgid_of) {
  std::map<uint32_t, std::optional<uint32_t>> threads;  // tid -> process, looked up once
  const auto process_of = [&](uint32_t tid) -> std::optional<uint32_t> {
    if (!tgid_of) return tid;
    const auto [it, inserted] = threads.try_emplace(tid);
    if (inserted) it->second = tgid_of(tid);
    return it->second;
  };
  for (RdmaDeviceResources& device : devices) {
    // First the entries' own pids, then the contexts', then the PDs' (a PD without a pid
    // takes its context's), then everything else from its parent.
    std::map<const RdmaResourceEntry*, uint32_t> unresolved;  // -> the pid as dumped
    for (RdmaResourceEntry& entry : device.entries) {
      if (!IsUser(entry) || !entry.pid) continue;
      const uint32_t dumped = *entry.pid;
      entry.pid = process_of(dumped);
      if (!entry.pid) unresolved[&entry] = dumped;
    }
    std::map<uint32_t, uint32_t> contexts;  // ctxn -> process
    std::map<uint32_t, uint32_t> pds;       // pdn -> process
    for (const RdmaResourceEntry& entry : device.entries) {
      if (entry.kind == RdmaResourceKind::kCtx && IsUser(entry) && entry.id && entry.pid) {
        contexts[*entry.id] = *entry.pid;
      }
    }
    const auto inherit = [](RdmaResourceEntry& entry, const std::map<uint32_t, uint32_t>& parents,
                            const std::optional<uint32_t>& parent) {
      if (entry.pid || !parent) return;
      const auto it = parents.find(*parent);
      if (it == parents.end()) return;
      entry.pid = it->second;
      entry.pid_from_parent = true;
    };
    for (RdmaResourceEntry& entry : device.entries) {
      if (entry.kind != RdmaResourceKind::kPd || !IsUser(entry)) continue;
      inherit(entry, contexts, entry.ctxn);
      if (entry.id && entry.pid) pds[*entry.id] = *entry.pid;
    }
    for (RdmaResourceEntry& entry : device.entries) {
      if (!IsUser(entry)) continue;
      inherit(entry, pds, entry.pdn);
      inherit(entry, contexts, entry.ctxn);
      // A thread that cannot be looked up (gone since the dump, or /proc hides it) and no
      // parent to go by: the pid as dumped, as before owners were resolved.
      if (const auto it = unresolved.find(&entry); !entry.pid && it != unresolved.end()) {
        entry.pid = it->second;
      }
    }
  }
}

}  // namespace rdmascope::sys
