// Opening the files of another process (its program, its libraries, their debug info) without
// letting that process steer the open: every ELF file the unwinder parses is named by the
// process (the paths in its /proc/PID/maps, the .gnu_debuglink and .gnu_debugaltlink names in
// its files), and the exporter runs as root. A path is never opened in the exporter's own
// namespace:
// - a mapped file through the kernel's handle of that mapping, /proc/PID/map_files/<start>-<end>
//   (opentelemetry-ebpf-profiler and blazesym do the same), or when that is refused (following
//   it needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE, fs/proc/base.c proc_map_files_get_link),
//   through the process's root with openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS): a
//   symlink in the container resolves inside the container, never to the host's files;
// - the file is first opened O_PATH (no open of a device or FIFO happens: O_PATH runs no
//   driver's open and never blocks), must be a regular file within a size bound, and for a
//   mapping must have the device and inode the maps line gives; only then is it reopened for
//   reading (O_RDONLY | O_NONBLOCK | O_NOCTTY) through /proc/self/fd, which reopens that inode
//   and looks up no path;
// - debug info only from the process's own /usr/lib/debug/.build-id/xx/yyyy.debug, the same
//   way; a .gnu_debuglink name is used only as a plain file name (no '/', not "." or ".."), in
//   the process's /usr/lib/debug and beside its file.
#pragma once

#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <expected>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rdmascope::sys {

// A file descriptor closed with its owner.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd();
  UniqueFd(UniqueFd&& other) noexcept;
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release();

 private:
  int fd_ = -1;
};

// One line of /proc/PID/maps with a file: "start-end perms offset major:minor inode path".
struct MappedFile {
  uint64_t start = 0;
  uint64_t end = 0;
  uint64_t offset = 0;
  dev_t device = 0;
  uint64_t inode = 0;
  std::string path;
  bool executable = false;  // "r-xp": the line maps code
};

// The file-backed lines of a maps text (anonymous mappings and "[stack]"-like ones skipped;
// malformed lines skipped).
std::vector<MappedFile> ParseMappedFiles(std::string_view maps);

// A file opened for reading, with what fstat() said of it.
struct OpenedFile {
  UniqueFd fd;
  struct stat status {};
  // OnlyRootCanWrite(status) as the opener saw it: this process's fstat, or the parent's
  // answer in the sandboxed unwind worker, whose user namespace shows every owner as the
  // overflow uid (its own fstat would say nobody's file is root's, and every file would be
  // copied, every debug file refused). False: copied before parsing, never mapped.
  bool only_root_can_write = false;
};

inline constexpr uint64_t kMaxElfFileBytes = 1ULL << 30;  // 1 GiB: more than any libxul.so.debug

// Opens `mapping` of process `pid`: /proc/PID/map_files/<start>-<end>, or PID/root/<path> with
// RESOLVE_IN_ROOT when map_files is refused (or `procfs` is not the real one). The file must be
// regular, at most `max_bytes`, and be the mapped inode (device and inode of the maps line).
// The error says why not, with no absolute address.
std::expected<OpenedFile, std::string> OpenMappedFile(const std::filesystem::path& procfs,
                                                      uint32_t pid, const MappedFile& mapping,
                                                      uint64_t max_bytes = kMaxElfFileBytes);

// Opens `path` (absolute or relative, interpreted inside the root) below `root_fd` (an
// O_PATH descriptor of a process's root) with RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS: its
// symlinks resolve inside that root. Regular file, at most `max_bytes`.
std::expected<OpenedFile, std::string> OpenInRoot(int root_fd, std::string_view path,
                                                  uint64_t max_bytes = kMaxElfFileBytes);

// An O_PATH | O_DIRECTORY descriptor of PROCFS/PID/root (the process's root directory, in
// its mount namespace).
std::expected<UniqueFd, std::string> OpenProcessRoot(const std::filesystem::path& procfs,
                                                     uint32_t pid);

// Whether only root can change the file's bytes (owned by root, not writable by group or
// others). Anyone else could rewrite a file between a check and libelf's reading of it.
bool OnlyRootCanWrite(const struct stat& status);

// "usr/lib/debug/.build-id/ab/cdef....debug" for a build id of 3 to 64 bytes (the bounds
// libdwfl's __libdwfl_open_by_build_id uses), nullopt otherwise.
std::optional<std::string> BuildIdDebugPath(std::span<const uint8_t> build_id);

// Whether a .gnu_debuglink name may be looked up: a plain file name (no '/', not "." or "..",
// no control character, at most 255 bytes). Anything else is never used, not even its base.
bool IsPlainDebuglinkName(std::string_view name);

}  // namespace rdmascope::sys
