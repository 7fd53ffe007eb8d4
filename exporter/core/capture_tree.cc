#include "core/capture_tree.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "core/sysfs.h"
#include "core/terminal_text.h"

namespace rdmascope::capture {

bool ValidRelative(std::string_view rel) {
  if (rel.empty() || rel.front() == '/' || rel.find('\0') != std::string_view::npos) return false;
  size_t start = 0;
  while (start <= rel.size()) {
    const size_t end = std::min(rel.find('/', start), rel.size());
    const std::string_view part = rel.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = end + 1;
  }
  return true;
}

namespace {

std::vector<std::string> SortedNames(int fd) {
  std::vector<std::string> names;
  const int dup = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (dup < 0) return names;
  DIR* dir = ::fdopendir(dup);
  if (dir == nullptr) {
    ::close(dup);
    return names;
  }
  while (const dirent* entry = ::readdir(dir)) {
    const std::string_view name = entry->d_name;
    if (name != "." && name != "..") names.emplace_back(name);
  }
  ::closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

bool LoadTreeAt(int dir_fd, Node& root, uint64_t budget, uint64_t& used, int depth);

// One entry of a directory being loaded: what it is, its bytes if a small regular file.
Node LoadEntry(int dir_fd, const std::string& name, int depth, uint64_t budget, uint64_t& used,
               bool& fits) {
  Node node;
  struct stat st {};
  if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    node.kind = Node::Kind::kOnDisk;  // vanished or refused: the disk read says how
    return node;
  }
  if (S_ISDIR(st.st_mode)) {
    const int fd = depth >= kMaxTreeDepth
                       ? -1
                       : ::openat(dir_fd, name.c_str(),
                                  O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
      node.kind = Node::Kind::kOnDisk;
      return node;
    }
    fits = LoadTreeAt(fd, node, budget, used, depth + 1) && fits;
    return node;
  }
  if (!S_ISREG(st.st_mode)) {
    // A symbolic link is followed by the disk reader while it stays beneath the root: the
    // disk answers for it. A FIFO or a device is never read.
    node.kind = S_ISLNK(st.st_mode) ? Node::Kind::kOnDisk : Node::Kind::kOther;
    return node;
  }
  node.kind = Node::Kind::kOnDisk;
  if (static_cast<uint64_t>(st.st_size) > kMaxTreeFile) return node;
  const int fd = ::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return node;
  struct stat opened {};
  if (::fstat(fd, &opened) == 0 && S_ISREG(opened.st_mode)) {
    if (auto bytes = sysfs::ReadFdChecked(fd, kMaxTreeFile)) {
      node.kind = Node::Kind::kFile;
      node.bytes = std::move(*bytes);
    }
  }
  ::close(fd);
  return node;
}

bool LoadTreeAt(int dir_fd, Node& root, uint64_t budget, uint64_t& used, int depth) {
  root.kind = Node::Kind::kDirectory;
  bool fits = true;
  for (const std::string& name : SortedNames(dir_fd)) {
    if (!fits) break;
    Node child = LoadEntry(dir_fd, name, depth, budget, used, fits);
    used += kNodeOverhead + name.size() + child.bytes.size();
    if (used > budget) fits = false;
    root.children.emplace(name, std::move(child));
  }
  ::close(dir_fd);
  return fits;
}

}  // namespace

bool LoadTree(int dir_fd, Node& root, uint64_t budget, uint64_t& used) {
  return LoadTreeAt(dir_fd, root, budget, used, 0);
}

bool IsGzip(int fd) {
  unsigned char magic[2] = {};
  return ::pread(fd, magic, sizeof magic, 0) == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
}

namespace {

// libarchive, loaded the first time an archive is read or written (dlopen): it brings libxml2,
// ICU, nettle and four compressors with it, which `serve` of a live host (or of a directory
// capture) must not map (issue 17). Never unloaded.
// One function a line (clang-format staircases an X-macro list).
// clang-format off
#define RDMASCOPE_LIBARCHIVE(X) \
  X(archive_read_new) \
  X(archive_read_support_filter_gzip) \
  X(archive_read_support_format_tar) \
  X(archive_read_open_fd) \
  X(archive_error_string) \
  X(archive_read_next_header) \
  X(archive_entry_pathname) \
  X(archive_entry_filetype) \
  X(archive_entry_hardlink) \
  X(archive_entry_size_is_set) \
  X(archive_entry_size) \
  X(archive_read_data) \
  X(archive_read_free) \
  X(archive_write_new) \
  X(archive_write_add_filter_gzip) \
  X(archive_write_set_format_pax_restricted) \
  X(archive_write_open_fd) \
  X(archive_entry_new) \
  X(archive_entry_set_pathname) \
  X(archive_entry_set_filetype) \
  X(archive_entry_set_perm) \
  X(archive_entry_set_mtime) \
  X(archive_entry_set_size) \
  X(archive_write_header) \
  X(archive_write_data) \
  X(archive_write_close) \
  X(archive_write_free) \
  X(archive_entry_free)
// clang-format on

struct Libarchive {
#define RDMASCOPE_MEMBER(name) decltype(&::name) name = nullptr;
  RDMASCOPE_LIBARCHIVE(RDMASCOPE_MEMBER)
#undef RDMASCOPE_MEMBER
};

constexpr const char* kLibarchive = "libarchive.so.13";

std::expected<Libarchive, std::string> LoadLibarchive() {
  void* handle = ::dlopen(kLibarchive, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = ::dlerror();
    return std::unexpected(std::string("libarchive is not available (") +
                           (error != nullptr ? error : kLibarchive) +
                           "): install libarchive13 to read or write a .tar.gz capture");
  }
  Libarchive lib;
  std::string missing;
#define RDMASCOPE_BIND(name)                                               \
  lib.name = reinterpret_cast<decltype(lib.name)>(::dlsym(handle, #name)); \
  if (lib.name == nullptr) missing += std::string(missing.empty() ? "" : ", ") + #name;
  RDMASCOPE_LIBARCHIVE(RDMASCOPE_BIND)
#undef RDMASCOPE_BIND
  if (!missing.empty()) {
    ::dlclose(handle);
    return std::unexpected(std::string(kLibarchive) + " lacks " + missing);
  }
  return lib;
}

const std::expected<Libarchive, std::string>& TheLibarchive() {
  static const std::expected<Libarchive, std::string> lib = LoadLibarchive();
  return lib;
}

struct ArchiveCloser {
  const Libarchive* lib;
  void operator()(archive* a) const { lib->archive_read_free(a); }
};

std::string EntryType(mode_t type) {
  switch (type) {
    case AE_IFLNK:
      return "a symbolic link (a capture keeps a link as its NAME.link file)";
    case AE_IFCHR:
    case AE_IFBLK:
      return "a device";
    case AE_IFIFO:
      return "a FIFO";
    case AE_IFSOCK:
      return "a socket";
    default:
      return "not a regular file or a directory";
  }
}

// Where `rel` goes in the tree, its parent directories made; null with `why` set when a part
// of it is a file already.
Node* Place(Node& root, std::string_view rel, std::string& why) {
  Node* at = &root;
  size_t start = 0;
  for (;;) {
    const size_t slash = rel.find('/', start);
    const std::string_view part = rel.substr(start, slash - start);
    if (at->kind != Node::Kind::kDirectory) {
      why = "is beneath a file";
      return nullptr;
    }
    auto it = at->children.find(part);
    if (it == at->children.end()) it = at->children.emplace(std::string(part), Node{}).first;
    at = &it->second;
    if (slash == std::string_view::npos) return at;
    start = slash + 1;
  }
}

}  // namespace

std::expected<Node, std::string> LoadArchive(int fd, const Limits& limits) {
  const auto& loaded = TheLibarchive();
  if (!loaded) return std::unexpected(loaded.error());
  const Libarchive& lib = *loaded;
  std::unique_ptr<archive, ArchiveCloser> reader(lib.archive_read_new(), ArchiveCloser{&lib});
  if (!reader) return std::unexpected("out of memory");
  archive* a = reader.get();
  lib.archive_read_support_filter_gzip(a);
  lib.archive_read_support_format_tar(a);  // ustar, pax and GNU tar
  if (::lseek(fd, 0, SEEK_SET) != 0 || lib.archive_read_open_fd(a, fd, 64 << 10) != ARCHIVE_OK) {
    return std::unexpected(std::string("truncated or damaged archive (a gzip'd tar?): ") +
                           lib.archive_error_string(a));
  }
  Node root;
  uint64_t entries = 0;
  uint64_t total = 0;
  const std::string bomb = "more than " + std::to_string(limits.archive_bytes) +
                           " bytes uncompressed: refused (a capture is far smaller)";
  std::array<char, 64 << 10> buffer{};
  for (;;) {
    archive_entry* entry = nullptr;
    const int status = lib.archive_read_next_header(a, &entry);
    if (status == ARCHIVE_EOF) break;
    if (status != ARCHIVE_OK && status != ARCHIVE_WARN) {
      return std::unexpected(std::string("truncated or damaged archive: ") +
                             lib.archive_error_string(a));
    }
    if (++entries > limits.archive_entries) {
      return std::unexpected("more than " + std::to_string(limits.archive_entries) +
                             " entries: refused");
    }
    const char* raw = lib.archive_entry_pathname(entry);
    std::string name = raw != nullptr ? raw : "";
    const std::string shown = EscapeControls(name);
    while (name.starts_with("./")) name.erase(0, 2);
    while (!name.empty() && name.back() == '/') name.pop_back();
    const mode_t type = lib.archive_entry_filetype(entry);
    if (name.empty() || name == ".") {
      if (type == AE_IFDIR) continue;  // the archive's own "./"
      return std::unexpected("an entry without a name");
    }
    if (name.front() == '/') return std::unexpected("entry \"" + shown + "\": an absolute name");
    if (!ValidRelative(name)) {
      return std::unexpected("entry \"" + shown + "\": a name with \"..\" or an empty part");
    }
    if (lib.archive_entry_hardlink(entry) != nullptr) {
      return std::unexpected("entry \"" + shown +
                             "\": a hard link (a capture holds regular files and directories)");
    }
    if (type != AE_IFREG && type != AE_IFDIR) {
      return std::unexpected("entry \"" + shown + "\": " + EntryType(type) +
                             ": a capture holds regular files and directories only");
    }
    total += kNodeOverhead + name.size();
    const int64_t declared =
        lib.archive_entry_size_is_set(entry) ? lib.archive_entry_size(entry) : 0;
    if (type == AE_IFREG &&
        static_cast<uint64_t>(std::max<int64_t>(declared, 0)) > limits.archive_file_bytes) {
      return std::unexpected("entry \"" + shown + "\": " + std::to_string(declared) +
                             " bytes, more than a capture's file (" +
                             std::to_string(limits.archive_file_bytes) + ")");
    }
    if (total + static_cast<uint64_t>(std::max<int64_t>(declared, 0)) > limits.archive_bytes) {
      return std::unexpected(bomb);
    }
    std::string why;
    Node* node = Place(root, name, why);
    if (node == nullptr) return std::unexpected("entry \"" + shown + "\" " + why);
    if (type == AE_IFDIR) {
      if (node->kind != Node::Kind::kDirectory) {
        return std::unexpected("entry \"" + shown + "\": both a file and a directory");
      }
      continue;
    }
    // A name given twice is refused, not last-wins: two answers for one read of the host is
    // not a capture rdmascope wrote, and which one a replay gave would be the archiver's choice.
    if (node->kind != Node::Kind::kDirectory || !node->children.empty()) {
      return std::unexpected("entry \"" + shown + "\" appears twice");
    }
    node->kind = Node::Kind::kFile;
    // What the data stream gives is counted as it comes, whatever the header declared: a
    // gzip bomb stops at the bound, not after it is inflated.
    for (;;) {
      const la_ssize_t n = lib.archive_read_data(a, buffer.data(), buffer.size());
      if (n == 0) break;
      if (n < 0) {
        return std::unexpected(std::string("truncated or damaged archive: ") +
                               lib.archive_error_string(a));
      }
      total += static_cast<uint64_t>(n);
      if (total > limits.archive_bytes) return std::unexpected(bomb);
      if (node->bytes.size() + static_cast<uint64_t>(n) > limits.archive_file_bytes) {
        return std::unexpected("entry \"" + shown + "\": more than a capture's file (" +
                               std::to_string(limits.archive_file_bytes) + " bytes)");
      }
      node->bytes.append(buffer.data(), static_cast<size_t>(n));
    }
  }
  if (root.Child("index.json") == nullptr && root.children.size() == 1) {
    Node& only = root.children.begin()->second;
    if (only.kind == Node::Kind::kDirectory && only.Child("index.json") != nullptr) {
      Node inner = std::move(only);
      return inner;
    }
  }
  return root;
}

namespace {

struct WriterCloser {
  const Libarchive* lib;
  void operator()(archive* a) const { lib->archive_write_free(a); }
};
struct EntryCloser {
  const Libarchive* lib;
  void operator()(archive_entry* e) const { lib->archive_entry_free(e); }
};

std::expected<void, std::string> AddTree(const Libarchive& lib, archive* a, int dir_fd,
                                         const std::string& prefix) {
  for (const std::string& name : SortedNames(dir_fd)) {
    struct stat st {};
    if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    const std::string path = prefix + "/" + name;
    const bool dir = S_ISDIR(st.st_mode);
    if (!dir && !S_ISREG(st.st_mode)) continue;  // the writer makes neither links nor devices
    const int fd = ::openat(dir_fd, name.c_str(),
                            O_RDONLY | O_NOFOLLOW | O_CLOEXEC | (dir ? O_DIRECTORY : O_NONBLOCK));
    if (fd < 0) return std::unexpected("cannot open " + path + ": " + std::strerror(errno));
    std::unique_ptr<archive_entry, EntryCloser> entry(lib.archive_entry_new(), EntryCloser{&lib});
    lib.archive_entry_set_pathname(entry.get(), path.c_str());
    lib.archive_entry_set_filetype(entry.get(), dir ? AE_IFDIR : AE_IFREG);
    lib.archive_entry_set_perm(entry.get(), dir ? 0700 : 0600);
    lib.archive_entry_set_mtime(entry.get(), st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
    std::expected<std::string, int> bytes;
    if (!dir) {
      bytes = sysfs::ReadFdChecked(fd, kMaxTreeFile * 4);
      if (!bytes) {
        ::close(fd);
        return std::unexpected("cannot read " + path + ": " + std::strerror(bytes.error()));
      }
      lib.archive_entry_set_size(entry.get(), static_cast<la_int64_t>(bytes->size()));
    }
    if (lib.archive_write_header(a, entry.get()) != ARCHIVE_OK ||
        (!dir && lib.archive_write_data(a, bytes->data(), bytes->size()) !=
                     static_cast<la_ssize_t>(bytes->size()))) {
      ::close(fd);
      return std::unexpected("cannot archive " + path + ": " + lib.archive_error_string(a));
    }
    if (dir) {
      auto added = AddTree(lib, a, fd, path);
      if (!added) {
        ::close(fd);
        return added;
      }
    }
    ::close(fd);
  }
  return {};
}

}  // namespace

std::expected<void, std::string> WriteArchive(const std::filesystem::path& dir,
                                              const std::filesystem::path& out,
                                              const std::string& top) {
  const auto& loaded = TheLibarchive();
  if (!loaded) return std::unexpected(loaded.error());
  const Libarchive& lib = *loaded;
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir_fd < 0) return std::unexpected("cannot open " + dir.string() + ": " + strerror(errno));
  const int out_fd =
      ::open(out.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (out_fd < 0) {
    const int error = errno;
    ::close(dir_fd);
    return std::unexpected("cannot create " + out.string() + ": " + std::strerror(error));
  }
  std::unique_ptr<archive, WriterCloser> writer(lib.archive_write_new(), WriterCloser{&lib});
  archive* a = writer.get();
  // pax: names of any length (sysfs device paths pass ustar's 100 + 155), readable by any tar.
  std::expected<void, std::string> result;
  if (lib.archive_write_add_filter_gzip(a) != ARCHIVE_OK ||
      lib.archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
      lib.archive_write_open_fd(a, out_fd) != ARCHIVE_OK) {
    result =
        std::unexpected(std::string("cannot start the archive: ") + lib.archive_error_string(a));
  } else {
    std::unique_ptr<archive_entry, EntryCloser> entry(lib.archive_entry_new(), EntryCloser{&lib});
    lib.archive_entry_set_pathname(entry.get(), top.c_str());
    lib.archive_entry_set_filetype(entry.get(), AE_IFDIR);
    lib.archive_entry_set_perm(entry.get(), 0700);
    if (lib.archive_write_header(a, entry.get()) != ARCHIVE_OK) {
      result = std::unexpected(std::string("cannot archive: ") + lib.archive_error_string(a));
    } else {
      result = AddTree(lib, a, dir_fd, top);
    }
    if (lib.archive_write_close(a) != ARCHIVE_OK && result) {
      result =
          std::unexpected(std::string("cannot finish the archive: ") + lib.archive_error_string(a));
    }
  }
  ::close(dir_fd);
  if (::fsync(out_fd) != 0 && result) {
    result = std::unexpected("cannot write " + out.string() + ": " + std::strerror(errno));
  }
  ::close(out_fd);
  return result;
}

}  // namespace rdmascope::capture
