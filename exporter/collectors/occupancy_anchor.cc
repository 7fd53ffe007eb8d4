#include "collectors/occupancy_anchor.h"

#include <sys/sysmacros.h>

#include <charconv>
#include <string>

#include "core/process_metrics.h"
#include "core/sysfs.h"

namespace rdmascope {
namespace {

// A process's maps is one line per mapping; a process with a million mappings (vm.max_map_count
// allows 65,530 by default) would be ~100 MiB: beyond this bound the claim is refused rather
// than read without end.
constexpr size_t kMaxMapsBytes = 32 << 20;
constexpr size_t kMaxStatusBytes = 64 << 10;

std::optional<uint64_t> ParseHex(std::string_view text) {
  uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value, 16);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// The next blank-separated field of `line`, consumed from it.
std::string_view NextField(std::string_view& line) {
  const size_t start = line.find_first_not_of(' ');
  if (start == std::string_view::npos) {
    line = {};
    return {};
  }
  line.remove_prefix(start);
  const size_t end = line.find(' ');
  const std::string_view field = line.substr(0, end);
  line.remove_prefix(end == std::string_view::npos ? line.size() : end);
  return field;
}

// The inode of a pid namespace link's text ("pid:[4026531836]").
std::optional<uint64_t> PidNamespaceInode(std::string_view text) {
  if (!text.starts_with("pid:[") || !text.ends_with("]")) return std::nullopt;
  uint64_t inode = 0;
  const char* first = text.data() + 5;
  const char* last = text.data() + text.size() - 1;
  if (std::from_chars(first, last, inode).ptr != last) return std::nullopt;
  return inode;
}

// The same of a link read here (the exporter's own: no capability needed), nullopt if
// unreadable. Through the host boundary: a replay answers the capturing process's namespace.
std::optional<uint64_t> PidNamespaceOf(const std::filesystem::path& link) {
  const auto text = sysfs::ReadLinkBasename(link);
  return text ? PidNamespaceInode(*text) : std::nullopt;
}

// The last NSpid field of a /proc/<pid>/status: the pid in the process's own namespace.
std::optional<uint32_t> InnermostPid(std::string_view status) {
  const size_t at = status.find("\nNSpid:");
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view line = status.substr(at + 7);
  line = line.substr(0, line.find('\n'));
  line = sysfs::Trim(line);
  const size_t start = line.find_last_of(" \t");
  const std::string_view last = start == std::string_view::npos ? line : line.substr(start + 1);
  uint32_t pid = 0;
  const auto [end, error] = std::from_chars(last.data(), last.data() + last.size(), pid);
  if (error != std::errc() || end != last.data() + last.size()) return std::nullopt;
  return pid;
}

}  // namespace

const char* AnchorFailureName(AnchorFailure failure) {
  switch (failure) {
    case AnchorFailure::kProcessNotFound:
      return "process_not_found";
    case AnchorFailure::kOwnerMismatch:
      return "owner_mismatch";
    case AnchorFailure::kNotMapped:
      return "not_mapped";
  }
  return "process_not_found";
}

namespace {

// The device and inode a maps line names, if it is one.
std::optional<std::pair<dev_t, ino_t>> LineFile(std::string_view line) {
  NextField(line);  // range
  NextField(line);  // perms
  NextField(line);  // offset
  const std::string_view device = NextField(line);
  const std::string_view inode = NextField(line);
  const size_t colon = device.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  const auto major_number = ParseHex(device.substr(0, colon));
  const auto minor_number = ParseHex(device.substr(colon + 1));
  const auto inode_number = sysfs::ParseUnsigned(inode);
  if (!major_number || !minor_number || !inode_number || *major_number > 0xfff ||
      *minor_number > 0xfffff) {
    return std::nullopt;
  }
  return std::pair{
      makedev(static_cast<unsigned>(*major_number), static_cast<unsigned>(*minor_number)),
      static_cast<ino_t>(*inode_number)};
}

// Calls `each(line, file)` for every line of `maps` naming a file.
template <typename Each>
void ForEachMappedFile(std::string_view maps, Each each) {
  while (!maps.empty()) {
    const size_t newline = maps.find('\n');
    const std::string_view line = maps.substr(0, newline);
    maps.remove_prefix(newline == std::string_view::npos ? maps.size() : newline + 1);
    if (const auto file = LineFile(line)) {
      if (each(line, *file)) return;
    }
  }
}

}  // namespace

bool MapsNameFile(std::string_view maps, dev_t dev, ino_t ino) {
  bool found = false;
  ForEachMappedFile(maps, [&](std::string_view, const std::pair<dev_t, ino_t>& file) {
    found = file.first == dev && file.second == ino;
    return found;
  });
  return found;
}

std::string MapsLinesNaming(std::string_view maps, const std::set<std::pair<dev_t, ino_t>>& files) {
  std::string kept;
  ForEachMappedFile(maps, [&](std::string_view line, const std::pair<dev_t, ino_t>& file) {
    if (files.contains(file)) {
      kept += line;
      kept += '\n';
    }
    return false;
  });
  return kept;
}

std::optional<std::pair<uid_t, uid_t>> EffectiveAndFsUid(std::string_view status) {
  const size_t at = status.find("\nUid:");
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view line = status.substr(at + 5);
  line = line.substr(0, line.find('\n'));
  uint64_t ids[4] = {};
  for (uint64_t& id : ids) {
    const size_t start = line.find_first_not_of(" \t");
    if (start == std::string_view::npos) return std::nullopt;
    line.remove_prefix(start);
    const auto [end, error] = std::from_chars(line.data(), line.data() + line.size(), id);
    if (error != std::errc() || id > UINT32_MAX) return std::nullopt;
    line.remove_prefix(static_cast<size_t>(end - line.data()));
  }
  return std::pair{static_cast<uid_t>(ids[1]), static_cast<uid_t>(ids[3])};
}

std::expected<void, AnchorFailure> AnchorInProc(const std::filesystem::path& procfs,
                                                sys::PrivilegedProcfs& privileged, uint32_t pid,
                                                const struct stat& file_stat) {
  if (pid == 0) return std::unexpected(AnchorFailure::kProcessNotFound);
  const auto dir = procfs / std::to_string(pid);
  const auto status = sysfs::ReadFile(dir / "status", kMaxStatusBytes);
  const auto uids = status ? EffectiveAndFsUid(*status) : std::nullopt;
  if (!uids) return std::unexpected(AnchorFailure::kProcessNotFound);
  if (file_stat.st_uid != uids->first && file_stat.st_uid != uids->second) {
    return std::unexpected(AnchorFailure::kOwnerMismatch);
  }
  const auto maps = privileged.Maps(pid, kMaxMapsBytes);
  if (!maps) return std::unexpected(AnchorFailure::kProcessNotFound);
  if (!MapsNameFile(*maps, file_stat.st_dev, file_stat.st_ino)) {
    return std::unexpected(AnchorFailure::kNotMapped);
  }
  return {};
}

std::optional<uint64_t> StartTicks(const std::filesystem::path& procfs, uint32_t pid) {
  const auto stat = sysfs::ReadFile(procfs / std::to_string(pid) / "stat", 4096);
  return stat ? ParseStatField(*stat, 22) : std::nullopt;
}

PidTranslator::PidTranslator(std::filesystem::path procfs, std::chrono::milliseconds min_interval,
                             std::shared_ptr<sys::PrivilegedProcfs> privileged)
    : procfs_(std::move(procfs)),
      min_interval_(min_interval),
      privileged_(privileged ? std::move(privileged)
                             : std::make_shared<sys::DirectProcfs>(procfs_)) {}

uint64_t PidTranslator::walks() const {
  std::lock_guard lock(mutex_);
  return walks_;
}

void PidTranslator::Walk() {
  table_.clear();
  ++walks_;
  last_walk_ = std::chrono::steady_clock::now();
  std::vector<uint32_t> pids;
  for (const std::string& name : sysfs::ListDirectory(procfs_)) {
    uint32_t pid = 0;
    const auto [end, error] = std::from_chars(name.data(), name.data() + name.size(), pid);
    if (error == std::errc() && end == name.data() + name.size()) pids.push_back(pid);
  }
  // ns/pid of other users' processes needs PTRACE_MODE_READ: asked in one batch.
  const auto links = privileged_->Namespaces(sys::NamespaceKind::kPid, pids);
  for (size_t i = 0; i < pids.size(); ++i) {
    const auto ns = links[i] ? PidNamespaceInode(*links[i]) : std::nullopt;
    if (!ns || ns == own_ns_) continue;
    const auto status =
        sysfs::ReadFile(procfs_ / std::to_string(pids[i]) / "status", kMaxStatusBytes);
    const auto inner = status ? InnermostPid(*status) : std::nullopt;
    if (inner) table_[{*ns, *inner}] = pids[i];
  }
}

void PidTranslator::Forget(uint64_t pid_ns, uint32_t pid) {
  std::lock_guard lock(mutex_);
  table_.erase({pid_ns, pid});
}

std::optional<uint32_t> PidTranslator::ExporterPid(uint64_t pid_ns, uint32_t pid) {
  std::lock_guard lock(mutex_);
  if (!own_ns_read_) {
    own_ns_read_ = true;
    own_ns_ = PidNamespaceOf(procfs_ / "self/ns/pid");
  }
  if (pid_ns == 0 || !own_ns_ || pid_ns == *own_ns_) return pid;
  auto it = table_.find({pid_ns, pid});
  if (it == table_.end()) {
    const auto now = std::chrono::steady_clock::now();
    if (last_walk_ && now - *last_walk_ < min_interval_) return std::nullopt;
    Walk();
    it = table_.find({pid_ns, pid});
    if (it == table_.end()) return std::nullopt;
  }
  return it->second;
}

}  // namespace rdmascope
