// What the DWARF unwinder reads of a process from the host, in one interface: its start time,
// whether it still runs, its maps and its files. The unwinder (sys/dwarf_unwinder.h) parses;
// this opens. In the exporter the two live in different processes: the unwinder in a sandboxed
// worker with no capabilities and no file system (sys/unwind_worker.h), which asks its parent
// for each of these over a socket (sys/unwind_client.h); the parent answers with a
// LocalProcessAccess, the only code that touches /proc for the unwinder. Tests and the fuzzers
// run both in one process, or hand the unwinder fakes.
#pragma once

#include <cstdint>
#include <expected>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sys/image_key.h"
#include "sys/privileged_procfs.h"
#include "sys/process_handle.h"
#include "sys/untrusted_files.h"

namespace rdmascope::sys {

class ProcessAccess {
 public:
  virtual ~ProcessAccess() = default;
  // PID/stat's start time (clock ticks after boot), nullopt when the process is gone.
  virtual std::optional<uint64_t> StartTicks(uint32_t pid) = 0;
  // Whether `pid` still names the process that started at `start_ticks`.
  virtual bool StillRunning(uint32_t pid, uint64_t start_ticks) = 0;
  // The maps of `image`'s process while it runs that image, or an errno: ESRCH (or ENOENT)
  // when it does not (the process is gone, its pid names another process, or it exec'd since):
  // the modules of whatever runs in its place are never handed out as the image's.
  virtual std::expected<std::string, int> Maps(const ImageKey& image) = 0;
  // A mapped file (sys/untrusted_files.h OpenMappedFile: the maps line's inode, regular, bounded).
  virtual std::expected<OpenedFile, std::string> OpenMapping(uint32_t pid,
                                                             const MappedFile& mapping) = 0;
  // A file below the process's root (RESOLVE_IN_ROOT), regular, bounded.
  virtual std::expected<OpenedFile, std::string> OpenInRoot(uint32_t pid,
                                                            std::string_view path) = 0;
  // Processes not in `live_pids` are of no more interest (what is held for them can go).
  virtual void Retain(const std::vector<uint32_t>& live_pids) { (void)live_pids; }
  // libdwfl may read the process itself (its auxv and memory, for the vDSO): only in the
  // process that holds the privileges, on the real /proc.
  virtual bool libdwfl_may_read_proc() const { return false; }
};

// The host's /proc (or a fixture tree of PID/{stat,maps,root}). Thread-safe. What needs a
// capability (maps, opens) goes through `privileged`: in `serve`, the capability broker
// (sys/capability_broker.h); by default this process reads `procfs` itself. `current` says
// whether an image is still its process's (the MR probes know its execs); without it only
// the start time is checked.
class LocalProcessAccess final : public ProcessAccess {
 public:
  explicit LocalProcessAccess(std::filesystem::path procfs = "/proc",
                              std::shared_ptr<PrivilegedProcfs> privileged = nullptr,
                              ImageCurrent current = nullptr);

  std::optional<uint64_t> StartTicks(uint32_t pid) override;
  // A pidfd per process (one poll() per check) on the real /proc; PID/stat's start time
  // elsewhere.
  bool StillRunning(uint32_t pid, uint64_t start_ticks) override;
  std::expected<std::string, int> Maps(const ImageKey& image) override;
  std::expected<OpenedFile, std::string> OpenMapping(uint32_t pid,
                                                     const MappedFile& mapping) override;
  std::expected<OpenedFile, std::string> OpenInRoot(uint32_t pid, std::string_view path) override;
  void Retain(const std::vector<uint32_t>& live_pids) override;
  // Only where this process reads /proc itself: behind the capability broker (serve) it holds
  // no CAP_SYS_PTRACE, and libdwfl's own read of PID/maps would be refused (EACCES) where the
  // broker's succeeded.
  bool libdwfl_may_read_proc() const override {
    return real_procfs_ && privileged_->InThisProcess();
  }

  const std::filesystem::path& procfs() const { return procfs_; }

 private:
  std::optional<uint64_t> ReadStartTicks(uint32_t pid);  // PID/stat, every time
  const std::filesystem::path procfs_;
  const bool real_procfs_;
  const std::shared_ptr<PrivilegedProcfs> privileged_;
  const ImageCurrent current_;
  std::mutex mutex_;  // guards handles_
  std::map<uint32_t, std::pair<uint64_t, ProcessHandle>> handles_;
  static constexpr size_t kMaxHandles = 1024;
};

inline constexpr size_t kMaxMapsBytes = 8 << 20;  // /proc/PID/maps of a process with ~100k mappings

}  // namespace rdmascope::sys
