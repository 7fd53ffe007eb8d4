#include "core/sysfs_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "core/capture.h"
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
  capture::Session* session = capture::Active();
  if (session != nullptr && session->replaying()) [[unlikely]] {
    // The capture's directory, resolved beneath its root once: each file is then opened
    // beneath this descriptor (the sample is the one current now).
    auto replay = session->ReplayOpenDirectory(path);
    if (!replay) return std::unexpected(replay.error());
    SysfsDir dir(-1);
    dir.replay_ = std::make_unique<capture::Directory>(std::move(*replay));
    dir.path_ = path.string();
    return dir;
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return std::unexpected(errno);
  SysfsDir dir(fd);
  if (session != nullptr) [[unlikely]] {
    dir.path_ = path.string();
  }
  return dir;
}

SysfsDir::SysfsDir(int fd) : fd_(fd) {}

SysfsDir::SysfsDir(SysfsDir&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      replay_(std::move(other.replay_)),
      path_(std::move(other.path_)) {}

SysfsDir& SysfsDir::operator=(SysfsDir&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    replay_ = std::move(other.replay_);
    path_ = std::move(other.path_);
  }
  return *this;
}

SysfsDir::~SysfsDir() {
  if (fd_ >= 0) ::close(fd_);
}

std::expected<std::vector<std::string>, int> SysfsDir::List() const {
  if (replay_) [[unlikely]] {
    if (capture::Session* session = capture::Active(); session != nullptr && session->replaying()) {
      return session->reader()->ListAt(*replay_);
    }
    return std::unexpected(EBADF);  // the replay this directory came from has ended
  }
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
  auto names = TakeSortedNames(dir);
  if (!path_.empty()) [[unlikely]] {
    if (capture::Session* session = capture::Active(); session != nullptr) {
      session->RecordList(path_, names);
    }
  }
  return names;
}

std::expected<size_t, FileError> SysfsDir::ReadRaw(const std::string& name) {
  capture::Session* session = path_.empty() ? nullptr : capture::Active();
  if (replay_) [[unlikely]] {
    if (session == nullptr || !session->replaying()) {
      return std::unexpected(FileError{.error = EBADF});  // the replay has ended
    }
    // From the sample's tree in memory, or beneath the capture's root.
    auto bytes = session->reader()->ReadFileAt(*replay_, name, buf_.size());
    if (!bytes && bytes.error() == EFBIG) {
      return std::unexpected(FileError{.kind = FileError::Kind::kTooLarge});
    }
    if (!bytes) return std::unexpected(FileError{.error = bytes.error()});
    std::memcpy(buf_.data(), bytes->data(), bytes->size());
    return bytes->size();
  }
  // O_NONBLOCK: a FIFO or device node planted in the tree answers at once instead of hanging.
  const int fd = ::openat(fd_, name.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int error = errno;
    if (session != nullptr) [[unlikely]] {
      session->RecordFile(std::filesystem::path(path_) / name, std::unexpected(error));
    }
    return std::unexpected(FileError{.error = error});
  }
  ssize_t n = 0;
  do {
    n = ::read(fd, buf_.data(), buf_.size());
  } while (n < 0 && errno == EINTR);
  const int error = errno;
  ::close(fd);
  if (session != nullptr) [[unlikely]] {
    session->RecordFile(std::filesystem::path(path_) / name,
                        n < 0 ? std::expected<std::string, int>(std::unexpected(error))
                              : std::string(buf_.data(), static_cast<size_t>(n)));
  }
  if (n < 0) return std::unexpected(FileError{.error = error});
  return static_cast<size_t>(n);
}

std::expected<std::string_view, FileError> SysfsDir::Read(const std::string& name) {
  const auto n = ReadRaw(name);
  if (!n) return std::unexpected(n.error());
  if (*n == buf_.size()) {
    return std::unexpected(FileError{.kind = FileError::Kind::kTooLarge});
  }
  std::string_view text(buf_.data(), *n);
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
