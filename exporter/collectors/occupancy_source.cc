#include "collectors/occupancy_source.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include "core/log.h"
#include "core/sysfs.h"
#include "stats_file.h"

namespace rdmascope {
namespace {

// A directory only the exporter's user can write (a private one: `rdmascope profile`'s
// mkdtemp directory, a test's): every file in it was made by that user or root, so there is no
// other party's claim to check. /run/rdmascope (mode 1777) is not one.
bool PrivateDirectory(int dir_fd) {
  struct stat st {};
  return ::fstat(dir_fd, &st) == 0 && st.st_uid == ::geteuid() && (st.st_mode & 022) == 0;
}

class LiveFile final : public StatsFile {
 public:
  explicit LiveFile(sys::UntrustedFile file) : file_(std::move(file)) {}
  const struct stat& stat() const override { return file_.stat(); }
  // An OFD write lock taken by the preload library for its process's life. F_OFD_GETLK takes
  // no lock itself, so a scrape never disturbs an application.
  std::optional<bool> Held() override {
    struct flock lock {};
    lock.l_type = F_WRLCK;
    lock.l_whence = SEEK_SET;
    if (fcntl(file_.fd(), F_OFD_GETLK, &lock) != 0) return std::nullopt;
    return lock.l_type != F_UNLCK;
  }
  bool ReadHead(void* out, size_t size) override {
    return ::pread(file_.fd(), out, size, 0) == static_cast<ssize_t>(size);
  }
  std::expected<void, sys::Refusal> ReadAll(std::vector<uint8_t>& out) override {
    return file_.ReadAll(out);
  }

 private:
  sys::UntrustedFile file_;
};

class LiveDirectory final : public StatsDirectory {
 public:
  LiveDirectory(int fd, bool deletes) : fd_(fd), deletes_(deletes) {}
  ~LiveDirectory() override { ::close(fd_); }
  LiveDirectory(const LiveDirectory&) = delete;
  LiveDirectory& operator=(const LiveDirectory&) = delete;

  bool Private() const override { return PrivateDirectory(fd_); }
  std::optional<struct stat> Stat() const override {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) return std::nullopt;
    return st;
  }
  std::vector<std::string> Names() override {
    const int list_fd = ::dup(fd_);
    DIR* dir = list_fd >= 0 ? ::fdopendir(list_fd) : nullptr;
    if (dir == nullptr && list_fd >= 0) ::close(list_fd);
    auto names = dir != nullptr ? sysfs::TakeSortedNames(dir) : std::vector<std::string>{};
    return names ? std::move(*names) : std::vector<std::string>{};
  }
  // fstatat reads the inode, opens nothing.
  std::expected<struct stat, std::string> Lstat(const std::string& name) override {
    struct stat st {};
    if (::fstatat(fd_, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return std::unexpected("");
    return st;
  }
  std::expected<std::unique_ptr<StatsFile>, sys::Refusal> Open(const std::string& name,
                                                               size_t max_size) override {
    auto file = sys::OpenUntrusted(fd_, name, max_size);
    if (!file) return std::unexpected(file.error());
    return std::make_unique<LiveFile>(std::move(*file));
  }
  // By the directory's descriptor, and only if the name still is the inode read (an
  // application may have made a new file of that name since): never a path resolved again.
  void RemoveIfSame(const std::string& name, const struct stat& read) override {
    if (!deletes_) return;
    struct stat now {};
    if (::fstatat(fd_, name.c_str(), &now, AT_SYMLINK_NOFOLLOW) == 0 && now.st_ino == read.st_ino &&
        now.st_dev == read.st_dev) {
      ::unlinkat(fd_, name.c_str(), 0);
    }
  }

 private:
  const int fd_;
  const bool deletes_;
};

// `.readers` as the exporter wants it: a regular file it owns, opened without blocking (a FIFO
// in its place used to hang start-up: open(2) of a FIFO for reading waits for a writer).
int OpenOwnReaders(int dir_fd) {
  constexpr int kFlags = O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC;
  // A few tries: another party may put something back between the removal and the creation.
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto existing = sys::OpenUntrusted(dir_fd, OCC_READERS_FILE, 1 << 20);
    // Its own, or root's (an earlier exporter run as root: no user can make a root-owned file).
    const uid_t owner = existing ? existing->stat().st_uid : ::geteuid() + 1;
    if (existing && (owner == ::geteuid() || owner == 0)) {
      const int fd = ::dup(existing->fd());
      if (fd >= 0) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
      return fd;
    }
    struct stat st {};
    if (::fstatat(dir_fd, OCC_READERS_FILE, &st, AT_SYMLINK_NOFOLLOW) == 0) {
      // Not ours, or not a regular file: removed (never followed, never opened).
      log::Warn(
          "preload directory: replacing a .readers that is not the exporter's own file",
          {{"mode", std::to_string(st.st_mode & S_IFMT)}, {"uid", std::to_string(st.st_uid)}});
      if (::unlinkat(dir_fd, OCC_READERS_FILE, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) != 0) {
        return -1;
      }
    }
    const int fd = ::openat(dir_fd, OCC_READERS_FILE, kFlags | O_CREAT | O_EXCL, 0644);
    if (fd >= 0) return fd;
    if (errno != EEXIST) return -1;
  }
  errno = EEXIST;
  return -1;
}

}  // namespace

LiveStatsSource::LiveStatsSource(std::filesystem::path dir,
                                 std::shared_ptr<sys::PrivilegedProcfs> procfs, bool reader_lock,
                                 bool deletes)
    : dir_(std::move(dir)),
      procfs_(std::move(procfs)),
      reader_lock_(reader_lock),
      deletes_(deletes) {
  if (reader_lock_) HoldReaderLock();
}

LiveStatsSource::~LiveStatsSource() {
  if (reader_fd_ >= 0) ::close(reader_fd_);
}

std::expected<std::unique_ptr<StatsDirectory>, int> LiveStatsSource::OpenDirectory() {
  const int fd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return std::unexpected(errno);
  if (reader_lock_) HoldReaderLock(fd);
  return std::make_unique<LiveDirectory>(fd, deletes_);
}

void LiveStatsSource::HoldReaderLock() {
  {
    std::lock_guard lock(reader_mutex_);
    if (reader_fd_ >= 0) return;
  }
  const int dir_fd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) {
    std::lock_guard lock(reader_mutex_);
    if (!reader_failure_logged_) {
      reader_failure_logged_ = true;
      log::Debug("preload reader lock not held: no stats directory yet",
                 {{"path", dir_.string()}, {"err", std::strerror(errno)}});
    }
    return;
  }
  HoldReaderLock(dir_fd);
  ::close(dir_fd);
}

void LiveStatsSource::HoldReaderLock(int dir_fd) {
  std::lock_guard lock(reader_mutex_);
  if (reader_fd_ >= 0) return;
  const int fd = OpenOwnReaders(dir_fd);
  struct flock shared {};
  shared.l_type = F_RDLCK;
  shared.l_whence = SEEK_SET;
  if (fd >= 0 && fcntl(fd, F_OFD_SETLK, &shared) == 0) {
    reader_fd_ = fd;
    return;
  }
  const int err = errno;
  if (fd >= 0) ::close(fd);
  if (!reader_failure_logged_) {
    reader_failure_logged_ = true;
    log::Debug(
        "preload reader lock not held: exiting processes delete their stats files, so "
        "their last interval is not served",
        {{"path", (dir_ / OCC_READERS_FILE).string()}, {"err", std::strerror(err)}});
  }
}

}  // namespace rdmascope
