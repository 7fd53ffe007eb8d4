#include "profile/output_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <stdexcept>

namespace rdmascope::profile {
namespace {

std::runtime_error Refused(const std::filesystem::path& path, const std::string& why) {
  return std::runtime_error("--output " + path.string() + ": " + why);
}

}  // namespace

OutputDir::OutputDir(const std::filesystem::path& path) : path_(path) {
  // mkdir never follows a symlink at the final component: EEXIST, then the checks below.
  if (mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    throw Refused(path, std::string("cannot create: ") + std::strerror(errno));
  }
  // O_NOFOLLOW: a symlink at the final component fails with ELOOP (open(2)), and O_DIRECTORY
  // anything but a directory; the checks then apply to what is open, not to a path that could
  // be swapped in between.
  fd_ = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd_ < 0) {
    const int error = errno;
    throw Refused(path, error == ELOOP || error == ENOTDIR
                            ? std::string("a symlink or not a directory; give a directory of "
                                          "your own")
                            : std::string("cannot open: ") + std::strerror(error));
  }
  struct stat st {};
  if (fstat(fd_, &st) != 0) {
    const int error = errno;
    close(fd_);
    throw Refused(path, std::string("cannot stat: ") + std::strerror(error));
  }
  std::string why;
  if (st.st_uid != geteuid()) {
    why = "owned by uid " + std::to_string(st.st_uid) + ", not by this user (uid " +
          std::to_string(geteuid()) + "): another user could replace its files";
  } else if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    why = std::string("writable by group or others (mode ") + mode +
          "): another user could plant files in it; chmod go-w it or give another directory";
  }
  if (!why.empty()) {
    close(fd_);
    throw Refused(path, why);
  }
}

OutputDir::~OutputDir() {
  if (fd_ >= 0) close(fd_);
}

void OutputDir::Write(const std::string& name, std::string_view bytes) const {
  // A name no one can have planted: random, and created exclusively (EEXIST otherwise).
  std::random_device random;
  const std::string temporary = "." + name + "." + std::to_string(random()) + ".tmp";
  const int fd =
      openat(fd_, temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw std::runtime_error("cannot create " + (path_ / temporary).string() + ": " +
                             std::strerror(errno));
  }
  size_t written = 0;
  int error = 0;
  while (written < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      error = n < 0 ? errno : EIO;
      break;
    }
    written += static_cast<size_t>(n);
  }
  if (close(fd) != 0 && error == 0) error = errno;
  // rename(2) replaces whatever is at `name`, a symlink included, without following it.
  if (error == 0 && renameat(fd_, temporary.c_str(), fd_, name.c_str()) != 0) error = errno;
  if (error != 0) {
    unlinkat(fd_, temporary.c_str(), 0);
    throw std::runtime_error("cannot write " + (path_ / name).string() + ": " +
                             std::strerror(error));
  }
}

void OutputDir::Remove(const std::string& name) const {
  unlinkat(fd_, name.c_str(), 0);  // unlink(2) removes a symlink itself
}

bool OutputDir::Contains(const std::string& name) const {
  struct stat st {};
  return fstatat(fd_, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
}

}  // namespace rdmascope::profile
