#include "sys/process_access.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <string>

#include "core/process_metrics.h"
#include "core/sysfs.h"

namespace rdmascope::sys {

LocalProcessAccess::LocalProcessAccess(std::filesystem::path procfs,
                                       std::shared_ptr<PrivilegedProcfs> privileged,
                                       ImageCurrent current)
    : procfs_(std::move(procfs)),
      real_procfs_(procfs_ == "/proc"),
      privileged_(privileged ? std::move(privileged) : std::make_shared<DirectProcfs>(procfs_)),
      current_(std::move(current)) {}

std::optional<uint64_t> LocalProcessAccess::StartTicks(uint32_t pid) {
  if (pid == 0 || pid > INT_MAX) return std::nullopt;
  {
    // A pidfd of the process that has not exited: its start time is the one read then.
    std::lock_guard lock(mutex_);
    const auto it = handles_.find(pid);
    if (it != handles_.end() && it->second.second.valid() && !it->second.second.Exited()) {
      return it->second.first;
    }
  }
  return ReadStartTicks(pid);
}

std::optional<uint64_t> LocalProcessAccess::ReadStartTicks(uint32_t pid) {
  const auto stat = sysfs::ReadFile(procfs_ / std::to_string(pid) / "stat", 4096);
  return stat ? ParseStartTicks(*stat) : std::nullopt;
}

bool LocalProcessAccess::StillRunning(uint32_t pid, uint64_t start_ticks) {
  if (!real_procfs_) return ReadStartTicks(pid) == start_ticks;
  {
    std::lock_guard lock(mutex_);
    const auto it = handles_.find(pid);
    if (it != handles_.end() && it->second.first == start_ticks && it->second.second.valid()) {
      return !it->second.second.Exited();
    }
  }
  // No handle yet (or one of an earlier process with this pid): open one, and make sure it is
  // of the process that started then (the pid may have been reused between the two reads).
  ProcessHandle handle = ProcessHandle::Open(pid);
  if (ReadStartTicks(pid) != start_ticks) return false;
  if (!handle.valid()) return true;  // no pidfd (kernel before 5.3): the start time said so
  std::lock_guard lock(mutex_);
  if (handles_.size() >= kMaxHandles && !handles_.contains(pid)) handles_.erase(handles_.begin());
  handles_[pid] = {start_ticks, std::move(handle)};
  return true;
}

std::expected<std::string, int> LocalProcessAccess::Maps(const ImageKey& image) {
  if (image.tgid == 0 || image.tgid > INT_MAX) return std::unexpected(ESRCH);
  auto maps = privileged_->Maps(image.tgid, kMaxMapsBytes);
  if (!maps) return maps;
  // Checked after the read: an image that still runs once its maps were read ran while they
  // were (an exec only ever moves on to a new image). The probes mark the old image at
  // sched_process_exec, after exec_mmap() switched the maps: a read in those microseconds of
  // the exec itself is the one that can pass.
  if (ReadStartTicks(image.tgid) != StartTicksOf(image)) return std::unexpected(ESRCH);
  if (current_ && !current_(image)) return std::unexpected(ESRCH);
  return maps;
}

std::expected<OpenedFile, std::string> LocalProcessAccess::OpenMapping(uint32_t pid,
                                                                       const MappedFile& mapping) {
  return privileged_->OpenMapping(pid, mapping);
}

std::expected<OpenedFile, std::string> LocalProcessAccess::OpenInRoot(uint32_t pid,
                                                                      std::string_view path) {
  return privileged_->OpenInRoot(pid, path);
}

void LocalProcessAccess::Retain(const std::vector<uint32_t>& live_pids) {
  std::lock_guard lock(mutex_);
  std::erase_if(handles_, [&](const auto& entry) {
    return std::find(live_pids.begin(), live_pids.end(), entry.first) == live_pids.end();
  });
}

}  // namespace rdmascope::sys
