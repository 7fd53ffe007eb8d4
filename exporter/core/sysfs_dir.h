// A sysfs directory of many small attribute files (an RDMA port's counters/ or hw_counters/),
// read relative to one open directory: `openat` + one `read` per file into a reusable buffer,
// no path walk from the root, no fstat, no allocation per file. The per-file cost of
// sysfs::ReadUnsigned (open of the whole path, a second read for EOF, a 4 KiB string) is what
// the rdma collector paid ~3,600 times a scrape on a 32-port host.
#pragma once

#include <array>
#include <cstdint>
#include <expected>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace rdmascope::capture {
class Directory;
}

namespace rdmascope::sysfs {

// Why one file of the directory gave no value: an errno from openat/read (ENOENT when the
// file vanished, EACCES, EISDIR, EINVAL/EOPNOTSUPP from a driver) or one of the kinds below.
struct FileError {
  enum class Kind { kErrno, kTooLarge, kPlaceholder, kEmpty, kNotNumeric };
  Kind kind = Kind::kErrno;
  int error = 0;  // errno, for kErrno
  // "No such file or directory", "larger than a sysfs attribute", "N/A placeholder",
  // "empty", "not a number".
  std::string Reason() const;
};

class SysfsDir {
 public:
  // The directory's errno when it cannot be opened (ENOENT, ENOTDIR: absent; EACCES...).
  static std::expected<SysfsDir, int> Open(const std::filesystem::path& path);

  SysfsDir(SysfsDir&& other) noexcept;
  SysfsDir& operator=(SysfsDir&& other) noexcept;
  SysfsDir(const SysfsDir&) = delete;
  SysfsDir& operator=(const SysfsDir&) = delete;
  ~SysfsDir();

  // Entry names, sorted, without "." and ".."; the errno of a failed listing.
  std::expected<std::vector<std::string>, int> List() const;

  // The file's contents without trailing newlines and NULs; valid until the next Read. One
  // read(2): a sysfs attribute is shown whole into one page (fs/sysfs/file.c
  // sysfs_kf_seq_show), so a buffer larger than a page gets it all; a file that fills the
  // buffer is larger than any attribute and refused. "N/A..." (mlx5 ports without a PMA) and
  // an empty file are errors, as in sysfs::ReadAttribute.
  std::expected<std::string_view, FileError> Read(const std::string& name);

  // A decimal or 0x-prefixed unsigned integer, surrounding blanks allowed (sysfs::ParseUnsigned).
  std::expected<uint64_t, FileError> ReadUnsigned(const std::string& name);

 private:
  explicit SysfsDir(int fd);
  // The bytes of `name` into buf_ (their count), as read(2) or the capture gave them.
  std::expected<size_t, FileError> ReadRaw(const std::string& name);
  int fd_ = -1;
  // Replaying: the capture's directory, in memory or beneath its root (fd_ is then -1).
  std::unique_ptr<capture::Directory> replay_;
  // Only while a capture is recorded or replayed (core/capture.h): where this directory is on
  // the host, so each file is named in the capture. Empty on the live path: no allocation.
  std::string path_;
  // One page plus one byte: a read that fills it is of a file larger than an attribute.
  std::array<char, 4097> buf_{};
};

}  // namespace rdmascope::sysfs
