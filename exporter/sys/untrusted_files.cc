#include "sys/untrusted_files.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <utility>

namespace rdmascope::sys {
namespace {

std::string Errno(int error) { return std::strerror(error); }

std::optional<uint64_t> Hex(std::string_view text) {
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, 16);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::optional<uint64_t> Decimal(std::string_view text) {
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// The next space-separated field of `line` (runs of spaces skipped).
std::string_view Field(std::string_view& line) {
  const size_t begin = line.find_first_not_of(' ');
  if (begin == std::string_view::npos) {
    line = {};
    return {};
  }
  line.remove_prefix(begin);
  const size_t end = line.find(' ');
  const std::string_view field = line.substr(0, end);
  line = end == std::string_view::npos ? std::string_view{} : line.substr(end);
  return field;
}

int OpenAt2(int dirfd, const char* path, uint64_t flags, uint64_t resolve) {
  open_how how{};
  how.flags = flags;
  how.resolve = resolve;
  int fd = -1;
  do {
    fd = static_cast<int>(syscall(SYS_openat2, dirfd, path, &how, sizeof how));
  } while (fd < 0 && errno == EINTR);
  return fd;
}

// The O_PATH descriptor `path_fd` checked and reopened for reading. O_PATH opened no driver and
// read nothing; the reopen through /proc/self/fd reaches the same inode without a path lookup
// (fs/proc/fd.c proc_fd_link), and only once it is known to be a regular file: opening a device
// node (a watchdog, a tape) can act, opening a FIFO can block.
std::expected<OpenedFile, std::string> CheckAndReopen(UniqueFd path_fd, uint64_t max_bytes,
                                                      const MappedFile* mapping) {
  struct stat status {};
  if (fstat(path_fd.get(), &status) != 0) return std::unexpected("fstat: " + Errno(errno));
  if (!S_ISREG(status.st_mode)) return std::unexpected("not a regular file");
  if (status.st_size <= 0) return std::unexpected("empty file");
  if (static_cast<uint64_t>(status.st_size) > max_bytes) {
    return std::unexpected("larger than " + std::to_string(max_bytes >> 20) + " MiB");
  }
  if (mapping != nullptr && (status.st_dev != mapping->device || status.st_ino != mapping->inode)) {
    return std::unexpected("not the mapped file (device or inode differs from the maps line)");
  }
  char self[64];
  std::snprintf(self, sizeof self, "/proc/self/fd/%d", path_fd.get());
  UniqueFd fd(open(self, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (!fd.valid()) return std::unexpected("reopen: " + Errno(errno));
  struct stat reopened {};
  if (fstat(fd.get(), &reopened) != 0 || reopened.st_dev != status.st_dev ||
      reopened.st_ino != status.st_ino || !S_ISREG(reopened.st_mode)) {
    return std::unexpected("the file changed while it was opened");
  }
  return OpenedFile{
      .fd = std::move(fd), .status = reopened, .only_root_can_write = OnlyRootCanWrite(reopened)};
}

constexpr uint64_t kInRoot = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;

}  // namespace

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) close(fd_);
}

UniqueFd::UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

int UniqueFd::release() { return std::exchange(fd_, -1); }

std::vector<MappedFile> ParseMappedFiles(std::string_view maps) {
  std::vector<MappedFile> files;
  while (!maps.empty()) {
    const size_t newline = maps.find('\n');
    std::string_view line = maps.substr(0, newline);
    maps = newline == std::string_view::npos ? std::string_view{} : maps.substr(newline + 1);
    const std::string_view range = Field(line);
    const std::string_view perms = Field(line);
    const std::string_view offset = Field(line);
    const std::string_view device = Field(line);
    const std::string_view inode = Field(line);
    // The path: the rest of the line after the spaces that align it (it may hold spaces).
    const size_t path_begin = line.find_first_not_of(' ');
    if (path_begin == std::string_view::npos) continue;
    const std::string_view path = line.substr(path_begin);
    const size_t dash = range.find('-');
    const size_t colon = device.find(':');
    if (path.empty() || path[0] != '/' || dash == std::string_view::npos ||
        colon == std::string_view::npos) {
      continue;
    }
    const auto start = Hex(range.substr(0, dash));
    const auto end = Hex(range.substr(dash + 1));
    const auto file_offset = Hex(offset);
    const auto major = Hex(device.substr(0, colon));
    const auto minor = Hex(device.substr(colon + 1));
    const auto inode_number = Decimal(inode);
    if (!start || !end || *end <= *start || !file_offset || !major || !minor || !inode_number ||
        *major > 0xfff || *minor > 0xfffff) {
      continue;
    }
    files.push_back(
        {.start = *start,
         .end = *end,
         .offset = *file_offset,
         .device = makedev(static_cast<unsigned>(*major), static_cast<unsigned>(*minor)),
         .inode = *inode_number,
         .path = std::string(path),
         .executable = perms.size() >= 3 && perms[2] == 'x'});
  }
  return files;
}

std::expected<UniqueFd, std::string> OpenProcessRoot(const std::filesystem::path& procfs,
                                                     uint32_t pid) {
  const std::string root = (procfs / std::to_string(pid) / "root").string();
  UniqueFd fd(open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return std::unexpected("process root: " + Errno(errno));
  return fd;
}

std::expected<OpenedFile, std::string> OpenInRoot(int root_fd, std::string_view path,
                                                  uint64_t max_bytes) {
  if (path.empty() || path.find('\0') != std::string_view::npos) {
    return std::unexpected("invalid path");
  }
  const std::string name(path);
  // O_PATH follows a symlink at the end as well, inside the root (RESOLVE_IN_ROOT), which
  // the .build-id links of debug packages need; magic links (/proc/self/...) are refused.
  UniqueFd path_fd(OpenAt2(root_fd, name.c_str(), O_PATH | O_CLOEXEC, kInRoot));
  if (!path_fd.valid()) return std::unexpected(Errno(errno));
  return CheckAndReopen(std::move(path_fd), max_bytes, nullptr);
}

std::expected<OpenedFile, std::string> OpenMappedFile(const std::filesystem::path& procfs,
                                                      uint32_t pid, const MappedFile& mapping,
                                                      uint64_t max_bytes) {
  // The kernel's handle of the mapping: the very file mapped, whatever was renamed or
  // replaced at its path since, in whatever mount namespace.
  char range[64];
  std::snprintf(range, sizeof range, "%llx-%llx", static_cast<unsigned long long>(mapping.start),
                static_cast<unsigned long long>(mapping.end));
  const std::string map_file = (procfs / std::to_string(pid) / "map_files" / range).string();
  UniqueFd path_fd(open(map_file.c_str(), O_PATH | O_CLOEXEC));
  if (path_fd.valid()) return CheckAndReopen(std::move(path_fd), max_bytes, &mapping);
  // EPERM without CAP_SYS_ADMIN/CAP_CHECKPOINT_RESTORE (what `serve` keeps has neither), ENOENT
  // in a fixture tree: the path in the maps, resolved inside the process's root.
  auto root = OpenProcessRoot(procfs, pid);
  if (!root) return std::unexpected(root.error());
  UniqueFd in_root(
      OpenAt2(root->get(), mapping.path.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC, kInRoot));
  if (!in_root.valid()) return std::unexpected(Errno(errno));
  return CheckAndReopen(std::move(in_root), max_bytes, &mapping);
}

bool OnlyRootCanWrite(const struct stat& status) {
  return status.st_uid == 0 && (status.st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

std::optional<std::string> BuildIdDebugPath(std::span<const uint8_t> build_id) {
  if (build_id.size() < 3 || build_id.size() > 64) return std::nullopt;
  std::string path = "usr/lib/debug/.build-id/";
  char hex[3];
  for (size_t i = 0; i < build_id.size(); ++i) {
    std::snprintf(hex, sizeof hex, "%02x", build_id[i]);
    path += hex;
    if (i == 0) path += '/';
  }
  return path + ".debug";
}

bool IsPlainDebuglinkName(std::string_view name) {
  if (name.empty() || name.size() > 255 || name == "." || name == "..") return false;
  for (const char c : name) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '/' || byte < 0x20 || byte == 0x7f) return false;
  }
  return true;
}

}  // namespace rdmascope::sys
