#include "sys/untrusted_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <utility>

namespace rdmascope::sys {

const char* RefusalName(Refusal refusal) {
  switch (refusal) {
    case Refusal::kOpenFailed:
      return "open_failed";
    case Refusal::kNotRegular:
      return "not_regular";
    case Refusal::kTooLarge:
      return "too_large";
    case Refusal::kShortRead:
      return "short_read";
  }
  return "open_failed";
}

UntrustedFile::UntrustedFile(UntrustedFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), stat_(other.stat_) {}

UntrustedFile& UntrustedFile::operator=(UntrustedFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    stat_ = other.stat_;
  }
  return *this;
}

UntrustedFile::~UntrustedFile() {
  if (fd_ >= 0) ::close(fd_);
}

std::expected<void, Refusal> UntrustedFile::ReadAll(std::vector<uint8_t>& out) const {
  const size_t size = static_cast<size_t>(stat_.st_size);
  out.resize(size);
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd_, out.data() + done, size - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // an error, or the end of a file truncated since fstat
    done += static_cast<size_t>(n);
  }
  if (done != size) {
    out.resize(done);
    return std::unexpected(Refusal::kShortRead);
  }
  return {};
}

std::expected<UntrustedFile, Refusal> OpenUntrusted(int dir_fd, const std::string& name,
                                                    size_t max_size) {
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
    return std::unexpected(Refusal::kOpenFailed);
  }
  // O_PATH opens no file: no FIFO wait, no device open; with O_NOFOLLOW a symlink is the link
  // itself (open(2): "If pathname is a symbolic link and O_NOFOLLOW ... O_PATH, return a file
  // descriptor referring to the symbolic link").
  const int path_fd = ::openat(dir_fd, name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (path_fd < 0) return std::unexpected(Refusal::kOpenFailed);
  struct stat st {};
  if (::fstat(path_fd, &st) != 0) {
    ::close(path_fd);
    return std::unexpected(Refusal::kOpenFailed);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(path_fd);
    return std::unexpected(Refusal::kNotRegular);
  }
  if (st.st_size < 0 || static_cast<uint64_t>(st.st_size) > max_size) {
    ::close(path_fd);
    return std::unexpected(Refusal::kTooLarge);
  }
  // Reopened through the kernel's handle of that inode, not the name.
  const std::string self = "/proc/self/fd/" + std::to_string(path_fd);
  int fd = ::open(self.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0 && (errno == ENOENT || errno == ENOTDIR)) {
    // No /proc in this mount namespace: by name, with the same flags, checked to be the inode
    // just tested (a swap in between is refused, not followed).
    fd = ::openat(dir_fd, name.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC);
  }
  ::close(path_fd);
  if (fd < 0) return std::unexpected(Refusal::kOpenFailed);
  struct stat now {};
  if (::fstat(fd, &now) != 0 || now.st_dev != st.st_dev || now.st_ino != st.st_ino ||
      !S_ISREG(now.st_mode)) {
    ::close(fd);
    return std::unexpected(Refusal::kNotRegular);
  }
  if (now.st_size < 0 || static_cast<uint64_t>(now.st_size) > max_size) {
    ::close(fd);
    return std::unexpected(Refusal::kTooLarge);
  }
  return UntrustedFile(fd, now);
}

}  // namespace rdmascope::sys
