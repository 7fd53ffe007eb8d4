// One process, whatever happens to its pid: a pidfd (pidfd_open(2), Linux 5.3) refers to the
// process it was opened for and polls readable once that process has exited, so a cache keyed
// by pid can tell, in one poll(), a process it read before from a later one given the same pid.
// The alternative, comparing the start time in PID/stat, costs a procfs read per check (about
// 6 us), as much as most of what such a cache saves.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

namespace rdmascope::sys {

class ProcessHandle {
 public:
  ProcessHandle() = default;
  // Invalid when the process is gone or pidfds are unavailable (kernel before 5.3, no fd left).
  static ProcessHandle Open(uint32_t pid);
  ~ProcessHandle();
  ProcessHandle(ProcessHandle&& other) noexcept;
  ProcessHandle& operator=(ProcessHandle&& other) noexcept;
  ProcessHandle(const ProcessHandle&) = delete;
  ProcessHandle& operator=(const ProcessHandle&) = delete;

  bool valid() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  // The process has exited (or the handle is invalid): its pid may name another one now.
  bool Exited() const;

  // Exited() of each handle, in one poll(2) for all of them.
  static std::vector<bool> Exited(std::span<const ProcessHandle* const> handles);

 private:
  explicit ProcessHandle(int fd) : fd_(fd) {}
  int fd_ = -1;
};

// `procfs` shows this process's pid namespace (its "self" is our pid): pids read there can be
// opened with pidfd_open. False for a fixture directory or another namespace's procfs.
bool IsOwnProcfs(const std::filesystem::path& procfs);

}  // namespace rdmascope::sys
