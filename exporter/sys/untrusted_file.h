// Opening a file another party controls (a stats file in the world-writable preload directory,
// the `.readers` lock file beside them): never by a path that may be a symlink, a FIFO, a device
// or a file growing without bound, and never mapped.
//
// The name is opened O_PATH|O_NOFOLLOW first: that resolves the inode without calling any
// driver's open (a FIFO's open would wait for a writer; a device's open has side effects:
// /dev/watchdog arms itself). Only a regular file of a bounded size is then opened for reading,
// through /proc/self/fd/N of that O_PATH descriptor, which reopens that very inode (proc(5),
// "/proc/pid/fd"): a name swapped in between cannot turn it into something else. The read
// descriptor has O_NONBLOCK|O_NOFOLLOW|O_NOCTTY|O_CLOEXEC all the same. Reads are pread(2)s into
// private memory: a file truncated while it is read gives a short read, never the SIGBUS of a
// shared mapping whose pages vanished.
#pragma once

#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <expected>
#include <string>
#include <vector>

namespace rdmascope::sys {

// Why a file was refused; each has a fixed name for a metric's `reason` label.
enum class Refusal {
  kOpenFailed,  // gone, or not openable (EACCES, EMFILE...)
  kNotRegular,  // a FIFO, socket, device, directory or symlink
  kTooLarge,    // larger than the caller's bound
  kShortRead,   // fewer bytes than fstat said (truncated while read)
};
const char* RefusalName(Refusal refusal);

// An open regular file and what fstat said of it; closes on destruction.
class UntrustedFile {
 public:
  UntrustedFile() = default;
  UntrustedFile(int fd, const struct stat& st) : fd_(fd), stat_(st) {}
  UntrustedFile(UntrustedFile&& other) noexcept;
  UntrustedFile& operator=(UntrustedFile&& other) noexcept;
  UntrustedFile(const UntrustedFile&) = delete;
  UntrustedFile& operator=(const UntrustedFile&) = delete;
  ~UntrustedFile();

  int fd() const { return fd_; }
  const struct stat& stat() const { return stat_; }
  // The whole file (as large as fstat said at open) into `out`, by pread: kShortRead when the
  // file ended early.
  std::expected<void, Refusal> ReadAll(std::vector<uint8_t>& out) const;

 private:
  int fd_ = -1;
  struct stat stat_ {};
};

// `name` (one component, no '/') in the directory `dir_fd`, when it is a regular file of at most
// `max_size` bytes. Never follows a symlink, never opens anything but a regular file.
std::expected<UntrustedFile, Refusal> OpenUntrusted(int dir_fd, const std::string& name,
                                                    size_t max_size);

}  // namespace rdmascope::sys
