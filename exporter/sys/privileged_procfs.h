// The reads of other users' processes that need a capability, in one interface with a fixed set
// of calls. Everything else the exporter reads of /proc is 0444 (stat, status, comm, cgroup,
// limits) and needs none. These need PTRACE_MODE_READ of the target (CAP_SYS_PTRACE for another
// user's process) or to list a 0500 directory (CAP_DAC_READ_SEARCH):
// - PID/maps (fs/proc/base.c proc_maps_open -> proc_mem_open -> mm_access);
// - a mapped file through PID/map_files or PID/root (proc_map_files_get_link, proc_root_link:
//   proc_fd_access_allowed);
// - the links of PID/ns (fs/proc/namespaces.c proc_ns_get_link, proc_ns_readlink);
// - the links of PID/fd (fs/proc/fd.c proc_fd_permission, proc_fd_link).
// `serve` answers them in a small broker process that keeps those two capabilities and nothing
// else (sys/proc_broker.h), so that the process parsing HTTP requests and tenants' files holds
// neither. DirectProcfs reads them in this process: tests, fixture trees, doctor and profile
// (which run as the user who started them, for the length of a command), and `serve
// --no-capabilities.broker`.
#pragma once

#include <cstdint>
#include <expected>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sys/untrusted_files.h"

namespace rdmascope::sys {

enum class NamespaceKind : uint8_t { kPid = 1, kUser = 2 };

// The processes holding /dev/infiniband/uverbsN open: pid -> {"uverbs0", ...}.
using UverbsHolderMap = std::map<uint32_t, std::set<std::string>>;

class PrivilegedProcfs {
 public:
  virtual ~PrivilegedProcfs() = default;
  // PID/maps, at most `max_bytes`, or an errno (ENOENT: gone; EACCES/EPERM: not allowed).
  virtual std::expected<std::string, int> Maps(uint32_t pid, size_t max_bytes) = 0;
  // sys/untrusted_files.h OpenMappedFile and OpenInRoot, for process `pid`.
  virtual std::expected<OpenedFile, std::string> OpenMapping(uint32_t pid,
                                                             const MappedFile& mapping) = 0;
  virtual std::expected<OpenedFile, std::string> OpenInRoot(uint32_t pid,
                                                            std::string_view path) = 0;
  // PID/ns/<kind>'s link text ("pid:[4026531836]") for each pid; nullopt where it cannot be
  // read (gone, or not allowed).
  virtual std::vector<std::optional<std::string>> Namespaces(NamespaceKind kind,
                                                             std::span<const uint32_t> pids) = 0;
  // Every process's uverbs descriptors (a walk of PID/fd for all of /proc).
  virtual std::expected<UverbsHolderMap, std::string> UverbsHolders() = 0;
  // True when these reads are made by this process with its own privileges, so that a library
  // reading PID/maps itself (libdwfl) is allowed what these calls are; false behind a broker
  // that holds a capability this process dropped.
  virtual bool InThisProcess() const = 0;
};

// This process reads `procfs` itself (the real /proc or a fixture tree of PID/...).
class DirectProcfs final : public PrivilegedProcfs {
 public:
  explicit DirectProcfs(std::filesystem::path procfs = "/proc") : procfs_(std::move(procfs)) {}
  std::expected<std::string, int> Maps(uint32_t pid, size_t max_bytes) override;
  std::expected<OpenedFile, std::string> OpenMapping(uint32_t pid,
                                                     const MappedFile& mapping) override;
  std::expected<OpenedFile, std::string> OpenInRoot(uint32_t pid, std::string_view path) override;
  std::vector<std::optional<std::string>> Namespaces(NamespaceKind kind,
                                                     std::span<const uint32_t> pids) override;
  std::expected<UverbsHolderMap, std::string> UverbsHolders() override;
  bool InThisProcess() const override { return true; }

  // PID/maps opened (not read): the broker passes this descriptor. The kernel took its
  // permission check and its reference to the process's memory at open (proc_maps_open), so
  // the receiver reads it with no capability.
  std::expected<UniqueFd, int> OpenMaps(uint32_t pid);

 private:
  const std::filesystem::path procfs_;
};

inline constexpr size_t kMaxUverbsHolders = 8192;  // (pid, device) pairs in one answer

}  // namespace rdmascope::sys
