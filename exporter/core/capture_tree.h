// A capture held in memory (core/capture.h's Reader): a sample directory read once into a tree
// that is then read-only, so replayed reads are map look-ups instead of an openat2, an fstat
// and a read each (issue 39: replay at least as fast as live); and a `.tar.gz` capture, which
// exists only as such a tree. Also the writer of that archive.
#pragma once

#include <cstdint>
#include <expected>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <string_view>

namespace rdmascope::capture {

// One name of a capture: what the Reader answers about it without touching the disk, or
// kOnDisk where only the disk gives the right answer (a symbolic link inside a directory
// capture, a file larger than kMaxTreeFile, a directory deeper than kMaxTreeDepth).
struct Node {
  enum class Kind { kFile, kDirectory, kOther, kOnDisk };
  Kind kind = Kind::kDirectory;
  std::string bytes;                                  // kFile
  std::map<std::string, Node, std::less<>> children;  // kDirectory

  const Node* Child(std::string_view name) const {
    const auto it = children.find(name);
    return it == children.end() ? nullptr : &it->second;
  }
};

// What a capture may cost in memory. A directory capture's samples are cached up to
// cache_bytes in all (beyond it a sample is read from its files, as before); an archive is
// refused past the archive_* bounds, since it has no files to fall back to.
struct Limits {
  uint64_t cache_bytes = uint64_t{256} << 20;
  uint64_t archive_bytes = uint64_t{1} << 30;  // uncompressed, names and bookkeeping included
  uint64_t archive_entries = 1'000'000;
  uint64_t archive_file_bytes = uint64_t{64} << 20;  // one file
};

// A node's share of a budget: its bytes, its name and what a map node costs around them.
constexpr uint64_t kNodeOverhead = 96;
// A directory capture's file larger than this stays on disk (its reads are EFBIG or rare).
constexpr uint64_t kMaxTreeFile = uint64_t{16} << 20;
constexpr int kMaxTreeDepth = 64;

// A name beneath a capture's root: relative, no empty, "." or ".." part, no NUL.
bool ValidRelative(std::string_view rel);

// The directory `dir_fd` (taken: closed here) and everything beneath it, never following a
// link (O_NOFOLLOW beneath descriptors already open). False, and `root` incomplete, when it
// needs more than `budget` bytes; `used` is what it took.
bool LoadTree(int dir_fd, Node& root, uint64_t budget, uint64_t& used);

// A gzip'd tar read from `fd` (not taken) into a tree: only regular files and directories,
// relative names without "..", each name once, within `limits`. The message says what was
// refused. A tree with no index.json but one directory holding it (`tar czf x.tar.gz cap/`)
// is that directory.
std::expected<Node, std::string> LoadArchive(int fd, const Limits& limits);

// True when the file starts with gzip's magic (1f 8b): a capture archive, not a directory.
bool IsGzip(int fd);

// The capture directory `dir` as a gzip'd pax tar in `out` (created 0600, O_EXCL), each name
// under `top`/: what a user's `tar xzf` gives back as a directory again. Regular files and
// directories only; links are not followed.
std::expected<void, std::string> WriteArchive(const std::filesystem::path& dir,
                                              const std::filesystem::path& out,
                                              const std::string& top);

}  // namespace rdmascope::capture
