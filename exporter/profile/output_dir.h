// Where `profile --output DIR` writes, as root, in a directory a person named: often under
// /tmp (the README's example), where any local user may have created DIR first, or planted a
// symlink at profile.html pointing at /etc/shadow. So DIR is created 0700 when missing and
// refused when it is a symlink, not ours, or writable by group or others; each file is written
// under a fresh name (O_CREAT|O_EXCL|O_NOFOLLOW: never an existing file, never through a
// symlink) and renamed over the final one, which replaces a symlink planted there instead of
// following it (rename(2) acts on the link itself).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace rdmascope::profile {

class OutputDir {
 public:
  // Creates `path` (mode 0700) or opens it; throws std::runtime_error saying why it refuses.
  explicit OutputDir(const std::filesystem::path& path);
  ~OutputDir();
  OutputDir(const OutputDir&) = delete;
  OutputDir& operator=(const OutputDir&) = delete;

  // Writes `bytes` to `name` in the directory (a plain file name); throws on failure, leaving
  // no temporary file behind.
  void Write(const std::string& name, std::string_view bytes) const;
  // Removes `name` (a previous run's) if present; a symlink is removed, not followed.
  void Remove(const std::string& name) const;
  bool Contains(const std::string& name) const;

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};

}  // namespace rdmascope::profile
