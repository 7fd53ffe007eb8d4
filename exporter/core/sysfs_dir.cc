#include "core/sysfs_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "core/sysfs.h"

namespace rdmascope::sysfs {

std::string FileError::Reason() const {
  switch (kind) {
    case Kind::kErrno:
      return std::strerror(error);
    case Kind::kTooLarge:
      return "larger than a sysfs attribute";
    case Kind::kPlaceholder:
      return "N/A placeholder";
    case Kind::kEmpty:
      return "empty";
    case Kind::kNotNumeric:
      return "not a number";
  }
  return "unknown";
}

std::expected<SysfsDir, int> SysfsDir::Open(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return std::unexpected(errno);
  return SysfsDir(fd);
}

SysfsDir::SysfsDir(SysfsDir&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

SysfsDir& SysfsDir::operator=(SysfsDir&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

SysfsDir::~SysfsDir() {
  if (fd_ >= 0) ::close(fd_);
}

std::expected<std::vector<std::string>, int> SysfsDir::List() const {
  // fdopendir takes the descriptor it is given: a duplicate, so fd_ stays ours for openat
  // (rewound: a duplicate shares the file offset).
  const int dup = ::fcntl(fd_, F_DUPFD_CLOEXEC, 0);
  if (dup < 0) return std::unexpected(errno);
  DIR* dir = ::fdopendir(dup);
  if (dir == nullptr) {
    const int error = errno;
    ::close(dup);
    return std::unexpected(error);
  }
  ::rewinddir(dir);
  return TakeSortedNames(dir);
}

std::expected<std::string_view, FileError> SysfsDir::Read(const std::string& name) {
  // O_NONBLOCK: a FIFO or device node planted in the tree answers at once instead of hanging.
  const int fd = ::openat(fd_, name.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return std::unexpected(FileError{.error = errno});
  ssize_t n = 0;
  do {
    n = ::read(fd, buf_.data(), buf_.size());
  } while (n < 0 && errno == EINTR);
  const int error = errno;
  ::close(fd);
  if (n < 0) return std::unexpected(FileError{.error = error});
  if (static_cast<size_t>(n) == buf_.size()) {
    return std::unexpected(FileError{.kind = FileError::Kind::kTooLarge});
  }
  std::string_view text(buf_.data(), static_cast<size_t>(n));
  while (!text.empty() && (text.back() == '\n' || text.back() == '\0')) text.remove_suffix(1);
  if (text.empty()) return std::unexpected(FileError{.kind = FileError::Kind::kEmpty});
  if (text.starts_with("N/A")) {
    return std::unexpected(FileError{.kind = FileError::Kind::kPlaceholder});
  }
  return text;
}

std::expected<uint64_t, FileError> SysfsDir::ReadUnsigned(const std::string& name) {
  const auto text = Read(name);
  if (!text) return std::unexpected(text.error());
  const auto value = ParseUnsigned(*text);
  if (!value) return std::unexpected(FileError{.kind = FileError::Kind::kNotNumeric});
  return *value;
}

}  // namespace rdmascope::sysfs
