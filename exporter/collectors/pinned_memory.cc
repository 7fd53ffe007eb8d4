#include "collectors/pinned_memory.h"

#include <unistd.h>

#include <algorithm>

#include "core/sysfs.h"

namespace rdmascope {

std::optional<uint64_t> ParseVmPinBytes(std::string_view status) {
  const auto at = status.find("\nVmPin:");
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view line = status.substr(at + 7);
  line = line.substr(0, line.find('\n'));
  line = sysfs::Trim(line);
  if (!line.ends_with(" kB")) return std::nullopt;
  const auto kib = sysfs::ParseUnsigned(line.substr(0, line.size() - 3));
  if (!kib || *kib > UINT64_MAX / 1024) return std::nullopt;
  return *kib * 1024;
}

std::optional<uint64_t> ParseLockedMemoryLimit(std::string_view limits) {
  // "Max locked memory         8388608              8388608              bytes"
  const auto at = limits.find("Max locked memory");
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view line = limits.substr(at + 17);
  line = line.substr(0, line.find('\n'));
  line = sysfs::Trim(line);
  const std::string_view soft = line.substr(0, line.find_first_of(" \t"));
  return sysfs::ParseUnsigned(soft);  // "unlimited" does not parse: no limit to reach
}

std::optional<uint64_t> ParseMemTotalBytes(std::string_view meminfo) {
  if (!meminfo.starts_with("MemTotal:")) return std::nullopt;
  std::string_view line = meminfo.substr(9, meminfo.find('\n') - 9);
  line = sysfs::Trim(line);
  if (!line.ends_with(" kB")) return std::nullopt;
  const auto kib = sysfs::ParseUnsigned(line.substr(0, line.size() - 3));
  if (!kib || *kib > UINT64_MAX / 1024) return std::nullopt;
  return *kib * 1024;
}

std::vector<uint32_t> UverbsHolders::ScanHolders() const {
  std::vector<uint32_t> holders;
  for (const std::string& entry : sysfs::ListDirectory(procfs_)) {
    const auto pid = sysfs::ParseUnsigned(entry);
    if (!pid || *pid > UINT32_MAX) continue;
    const auto fd_dir = procfs_ / entry / "fd";
    for (const std::string& fd : sysfs::ListDirectory(fd_dir)) {
      char target[256];
      const ssize_t n = ::readlink((fd_dir / fd).c_str(), target, sizeof target - 1);
      if (n <= 0) continue;
      if (std::string_view(target, static_cast<size_t>(n)).starts_with("/dev/infiniband/uverbs")) {
        holders.push_back(static_cast<uint32_t>(*pid));
        break;
      }
    }
  }
  return holders;
}

std::vector<PinnedProcess> UverbsHolders::Read(const std::vector<uint32_t>& known) {
  std::lock_guard lock(mutex_);
  const auto now = std::chrono::steady_clock::now();
  if (!last_scan_ || now - *last_scan_ >= rescan_) {
    holders_ = ScanHolders();
    last_scan_ = now;
  }
  for (const uint32_t pid : known) {
    if (std::find(holders_.begin(), holders_.end(), pid) == holders_.end()) {
      holders_.push_back(pid);
    }
  }
  std::sort(holders_.begin(), holders_.end());
  std::vector<PinnedProcess> out;
  std::vector<uint32_t> alive;
  for (const uint32_t pid : holders_) {
    const auto dir = procfs_ / std::to_string(pid);
    const auto status = sysfs::ReadFile(dir / "status", 64 << 10);
    if (!status) continue;  // exited since the scan
    alive.push_back(pid);
    const auto pinned = ParseVmPinBytes(*status);
    if (!pinned) continue;
    const auto limits = sysfs::ReadFile(dir / "limits", 16 << 10);
    out.push_back({.pid = pid,
                   .comm = sysfs::ReadAttribute(dir / "comm").value_or(""),
                   .pinned_bytes = *pinned,
                   .locked_limit_bytes = limits ? ParseLockedMemoryLimit(*limits) : std::nullopt});
  }
  holders_ = std::move(alive);
  return out;
}

}  // namespace rdmascope
