// Whether a preload stats file's claim on a process holds in the kernel. The directory is
// world-writable (mode 1777: every user's application writes its own file there), so a file's
// header (pid, namespace, comm) is only what its creator wrote: any user can write a file
// naming root's process. A claim is believed when
//  - the process it names lives (found in the exporter's /proc, through its pid namespace),
//  - the file's owner is that process's effective or filesystem uid (the uid it created the file
//    with: open(2) gives a new file the fsuid of the caller), and
//  - that process maps this very file: its /proc/PID/maps names the file's device and inode
//    (the preload library maps its stats file for its life, preload/tables.c open_file).
// The third is what the kernel alone can say: a user may own a file and name their own
// process, but only a process that opened and mapped that inode shows it in its maps.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <expected>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "sys/privileged_procfs.h"

namespace rdmascope {

// Why a claim failed; fixed names for the skipped files' `reason` label.
enum class AnchorFailure {
  kProcessNotFound,  // no such process in the exporter's /proc (gone, or a pid namespace it
                     // does not see)
  kOwnerMismatch,    // the file's owner is not the process's uid
  kNotMapped,        // the process does not map the file
};
const char* AnchorFailureName(AnchorFailure failure);

// Whether a /proc/PID/maps text has a mapping of the file (dev, ino): "start-end perms offset
// MAJOR:MINOR INODE [path]", the device in hex (fs/proc/task_mmu.c show_map_vma).
bool MapsNameFile(std::string_view maps, dev_t dev, ino_t ino);
// The lines of a maps text that map one of `files` (device, inode), each with its newline: what
// a capture keeps of a process's maps (the anchor's question, not the process's layout).
std::string MapsLinesNaming(std::string_view maps, const std::set<std::pair<dev_t, ino_t>>& files);

// The effective and filesystem uids of a /proc/PID/status text ("Uid:\tR\tE\tS\tF").
std::optional<std::pair<uid_t, uid_t>> EffectiveAndFsUid(std::string_view status);

// Checks a claim on the process `pid` (the exporter's numbering) for the file of `file_stat`.
// Its maps are read through `privileged` (another user's need CAP_SYS_PTRACE: in serve, the
// capability broker's).
std::expected<void, AnchorFailure> AnchorInProc(const std::filesystem::path& procfs,
                                                sys::PrivilegedProcfs& privileged, uint32_t pid,
                                                const struct stat& file_stat);

// The start time (field 22 of /proc/PID/stat) of a process: tells a reused pid apart.
std::optional<uint64_t> StartTicks(const std::filesystem::path& procfs, uint32_t pid);

// Pids of other pid namespaces in the exporter's numbering, from a walk of its /proc (each
// process's ns/pid link and the last NSpid of its status). The walk reads two files of every
// process on the host, so it runs at most once per `min_interval`, and only when a pid asked for
// is not in the last one's table (a process started since): a flood of files naming pids that
// do not exist costs one walk per interval, not one per file or scrape.
class PidTranslator {
 public:
  // `privileged`: where other processes' ns/pid links are read (null: `procfs` here).
  PidTranslator(std::filesystem::path procfs, std::chrono::milliseconds min_interval,
                std::shared_ptr<sys::PrivilegedProcfs> privileged = nullptr);
  // The exporter's pid for `pid` of the namespace whose inode is `pid_ns`; the same pid when the
  // namespace is the exporter's own (or 0: a library that could not read its own); nullopt
  // when the exporter does not see that process.
  std::optional<uint32_t> ExporterPid(uint64_t pid_ns, uint32_t pid);
  // Drops what the last walk said of that process: the claim it answered failed (the pid may
  // have been reused since), so the next lookup walks again (within the same bound).
  void Forget(uint64_t pid_ns, uint32_t pid);
  // Walks done so far (for tests and the debug line).
  uint64_t walks() const;

 private:
  void Walk();

  const std::filesystem::path procfs_;
  const std::chrono::milliseconds min_interval_;
  const std::shared_ptr<sys::PrivilegedProcfs> privileged_;
  mutable std::mutex mutex_;
  std::optional<uint64_t> own_ns_;
  bool own_ns_read_ = false;
  std::map<std::pair<uint64_t, uint32_t>, uint32_t> table_;
  std::optional<std::chrono::steady_clock::time_point> last_walk_;
  uint64_t walks_ = 0;
};

}  // namespace rdmascope
