#include "core/capture.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <nlohmann/json.hpp>

#include "core/capture_index.h"
#include "core/sysfs.h"

namespace rdmascope::capture {

namespace internal {
Session* g_active = nullptr;
}

void Install(Session* session) { internal::g_active = session; }

thread_local int internal::t_unrecorded = 0;
UnrecordedScope::UnrecordedScope() { ++internal::t_unrecorded; }
UnrecordedScope::~UnrecordedScope() { --internal::t_unrecorded; }

namespace {

// A sample's directory name: samples are counted from 1, "0001".."9999".
constexpr size_t kMaxSamples = 9999;
// An .errno or .link file holds a name or a link target, never more than a path.
constexpr size_t kMaxSmallFile = 4096;

std::string SampleName(size_t n) {
  char name[24];
  std::snprintf(name, sizeof name, "%04zu", n);
  return name;
}

std::string NowUtc() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char text[96];
  std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(millis));
  return text;
}

// Removes `name` under dir_fd and everything beneath it, never following a link (a link is
// removed, not its target).
int RemoveTree(int dir_fd, const char* name) {
  if (::unlinkat(dir_fd, name, 0) == 0 || errno == ENOENT) return 0;
  if (errno != EISDIR && errno != EPERM) return errno;
  const int fd = ::openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno;
  DIR* dir = ::fdopendir(fd);
  if (dir == nullptr) {
    ::close(fd);
    return errno;
  }
  int error = 0;
  std::vector<std::string> names;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string_view child = entry->d_name;
    if (child != "." && child != "..") names.emplace_back(child);
  }
  for (const std::string& child : names) {
    if (const int err = RemoveTree(::dirfd(dir), child.c_str()); err != 0) error = err;
  }
  ::closedir(dir);
  if (error == 0 && ::unlinkat(dir_fd, name, AT_REMOVEDIR) != 0) error = errno;
  return error;
}

int WriteWhole(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return 0;
}

}  // namespace

std::string ErrnoName(int error) {
  if (const char* name = strerrorname_np(error); name != nullptr) {
    // glibc names EOPNOTSUPP (== ENOTSUP on Linux) "ENOTSUP"; ethtool's users know the other.
    if (error == EOPNOTSUPP) return "EOPNOTSUPP";
    return name;
  }
  return "E" + std::to_string(error);
}

std::optional<int> ErrnoFromName(std::string_view name) {
  name = sysfs::Trim(name);
  if (name.empty()) return std::nullopt;
  if (name == "EOPNOTSUPP" || name == "ENOTSUP") return EOPNOTSUPP;
  const std::string_view digits = name.starts_with('E') ? name.substr(1) : name;
  int value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec == std::errc() && end == digits.data() + digits.size()) {
    if (value > 0 && value < 4096) return value;
    return std::nullopt;
  }
  for (int error = 1; error < 4096; ++error) {
    const char* known = strerrorname_np(error);
    if (known != nullptr && name == known) return error;
  }
  return std::nullopt;
}

// ---- Layout

Layout::Layout(std::filesystem::path sysfs, std::filesystem::path procfs)
    : sysfs_(sysfs.lexically_normal().string()), procfs_(procfs.lexically_normal().string()) {
  while (sysfs_.size() > 1 && sysfs_.back() == '/') sysfs_.pop_back();
  while (procfs_.size() > 1 && procfs_.back() == '/') procfs_.pop_back();
}

std::optional<std::string> Layout::Relative(const std::filesystem::path& host) const {
  const std::string path = host.string();
  const auto under = [&](const std::string& root, const char* name) -> std::optional<std::string> {
    if (root.empty() || !path.starts_with(root)) return std::nullopt;
    if (path.size() == root.size()) return std::string(name);
    if (path[root.size()] != '/' && root != "/") return std::nullopt;
    return std::string(name) + "/" + path.substr(root.size() + (root == "/" ? 0 : 1));
  };
  std::optional<std::string> rel = under(sysfs_, "sys");
  if (!rel) rel = under(procfs_, "proc");
  if (!rel && host.is_absolute()) rel = path.substr(1);
  if (!rel) return std::nullopt;
  while (rel->size() > 1 && rel->back() == '/') rel->pop_back();
  if (!ValidRelative(*rel)) return std::nullopt;
  return rel;
}

// ---- Reader

namespace {

// The suffixes the format adds to a host's name; a listing shows the name without them, and
// without the marker of a directory listed but not read beneath.
std::vector<std::string> HostNames(std::vector<std::string> stored) {
  std::erase(stored, kListedMarker);
  for (std::string& name : stored) {
    for (bool stripped = true; stripped;) {
      stripped = false;
      for (const std::string_view suffix : {".errno", ".link"}) {
        if (name.size() > suffix.size() && name.ends_with(suffix)) {
          name.resize(name.size() - suffix.size());
          stripped = true;
        }
      }
    }
  }
  std::sort(stored.begin(), stored.end());
  stored.erase(std::unique(stored.begin(), stored.end()), stored.end());
  return stored;
}

std::expected<std::vector<std::string>, int> ListFd(int fd) {
  DIR* dir = ::fdopendir(fd);
  if (dir == nullptr) {
    const int error = errno;
    ::close(fd);
    return std::unexpected(error);
  }
  auto names = sysfs::TakeSortedNames(dir);
  if (!names) return names;
  return HostNames(std::move(*names));
}

// A name looked up in a tree as openat2 beneath the root would resolve it: the node; ENOENT
// for a missing part, ENOTDIR for a part that is a file; or on_disk where the tree leaves
// the answer to the files.
struct Found {
  const Node* node = nullptr;
  int error = 0;
  bool on_disk = false;
};

Found Walk(const Node& base, std::string_view rel) {
  const Node* at = &base;
  size_t start = 0;
  for (;;) {
    if (at->kind == Node::Kind::kOnDisk) return {.on_disk = true};
    if (at->kind != Node::Kind::kDirectory) return {.error = ENOTDIR};
    const size_t slash = rel.find('/', start);
    at = at->Child(rel.substr(start, slash - start));
    if (at == nullptr) return {.error = ENOENT};
    if (slash == std::string_view::npos) {
      if (at->kind == Node::Kind::kOnDisk) return {.on_disk = true};
      return {.node = at};
    }
    start = slash + 1;
  }
}

// What ReadRegular answers for a found name: only a regular file is read, whole or EFBIG.
std::expected<std::string, int> FileOf(const Found& found, size_t max_bytes) {
  if (found.node == nullptr) return std::unexpected(found.error);
  if (found.node->kind != Node::Kind::kFile) return std::unexpected(EINVAL);
  if (found.node->bytes.size() > max_bytes) return std::unexpected(EFBIG);
  return found.node->bytes;
}

// <rel>.errno in the tree: the errno it names; nullopt when absent or unreadable (ENOENT
// then), or when the files must say.
std::optional<int> StoredErrno(const Node& base, std::string_view rel, bool& on_disk) {
  const Found found = Walk(base, std::string(rel) + ".errno");
  on_disk = found.on_disk;
  const auto stored = FileOf(found, kMaxSmallFile);
  if (!stored) return std::nullopt;
  return ErrnoFromName(*stored).value_or(EINVAL);
}

const Node& EmptyTree() {
  static const Node empty;
  return empty;
}

}  // namespace

struct Reader::State {
  State(size_t samples, const Limits& bounds)
      : limits(bounds), slots(std::make_unique<Slot[]>(samples)) {}
  struct Slot {
    std::once_flag once;
    std::unique_ptr<Node> loaded;  // a directory capture's sample, read into memory
    const Node* tree = nullptr;    // null: read from the files
  };
  Limits limits;
  std::unique_ptr<Slot[]> slots;
  std::atomic<uint64_t> cached{0};
  Node archive;  // an archive capture's whole tree
};

std::expected<Reader, std::string> Reader::Open(const std::filesystem::path& root,
                                                const Limits& limits) {
  // O_NONBLOCK: a FIFO named as the capture answers at once (and is refused below).
  const int fd = ::open(root.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    return std::unexpected("cannot open the capture " + root.string() + ": " +
                           std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))) {
    ::close(fd);
    return std::unexpected(root.string() + ": neither a capture directory nor a .tar.gz");
  }
  if (S_ISDIR(st.st_mode)) {
    auto reader = FromFd(fd, limits);
    if (!reader) return std::unexpected(root.string() + ": " + reader.error());
    return reader;
  }
  // A file: an archive by its content, whatever its name says.
  if (!IsGzip(fd)) {
    ::close(fd);
    return std::unexpected(root.string() +
                           ": not a capture: a directory or a gzip'd tar (.tar.gz) is");
  }
  auto tree = LoadArchive(fd, limits);
  ::close(fd);
  if (!tree) return std::unexpected(root.string() + ": " + tree.error());
  Reader reader(-1, limits);
  reader.state_->archive = std::move(*tree);
  const Found index = Walk(reader.state_->archive, "index.json");
  auto text = FileOf(index, kMaxIndexBytes);
  if (!text) {
    return std::unexpected(
        root.string() + ": no readable index.json in the archive: " + std::strerror(text.error()));
  }
  auto opened = WithIndex(std::move(reader), std::move(*text));
  if (!opened) return std::unexpected(root.string() + ": " + opened.error());
  return opened;
}

std::expected<Reader, std::string> Reader::FromFd(int root_fd, const Limits& limits) {
  Reader reader(root_fd, limits);
  auto index = reader.ReadRegular("index.json", kMaxIndexBytes);
  if (!index) {
    if (index.error() == ENOSYS) {
      return std::unexpected(
          "this kernel has no openat2 (Linux 5.6 or later): a capture is not read without it");
    }
    return std::unexpected(std::string("no readable index.json: ") + std::strerror(index.error()));
  }
  return WithIndex(std::move(reader), std::move(*index));
}

std::expected<Reader, std::string> Reader::WithIndex(Reader reader, std::string index) {
  const nlohmann::json json = nlohmann::json::parse(index, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) {
    return std::unexpected("index.json is not a JSON object");
  }
  const auto version = json.find("format_version");
  if (version == json.end() || !version->is_number_integer()) {
    return std::unexpected("index.json has no integer format_version");
  }
  const int64_t format = version->get<int64_t>();
  if (format > kFormatVersion) {
    return std::unexpected("capture format version " + std::to_string(format) +
                           " is newer than this rdmascope reads (" +
                           std::to_string(kFormatVersion) + "): use a newer rdmascope");
  }
  if (format < 1) return std::unexpected("index.json: format_version must be 1 or more");
  const auto samples = json.find("samples");
  if (samples == json.end() || !samples->is_array() || samples->empty() ||
      samples->size() > kMaxSamples) {
    return std::unexpected("index.json: samples must list 1 to 9999 samples");
  }
  reader.samples_ = samples->size();
  reader.index_text_ = std::move(index);
  auto state = std::make_unique<State>(reader.samples_, reader.state_->limits);
  state->archive = std::move(reader.state_->archive);
  if (reader.archive()) {
    // Each sample's directory in the archive, found once (a sample it lacks answers ENOENT).
    for (size_t i = 0; i < reader.samples_; ++i) {
      const Found found = Walk(state->archive, "samples/" + SampleName(i + 1));
      const bool dir = found.node != nullptr && found.node->kind == Node::Kind::kDirectory;
      state->slots[i].tree = dir ? found.node : &EmptyTree();
    }
  }
  reader.state_ = std::move(state);
  return reader;
}

Reader::Reader(int root_fd, const Limits& limits)
    : root_fd_(root_fd), state_(std::make_unique<State>(0, limits)) {}

Reader::Reader(Reader&& other) noexcept
    : root_fd_(std::exchange(other.root_fd_, -1)),
      samples_(other.samples_),
      index_text_(std::move(other.index_text_)),
      state_(std::move(other.state_)) {}

Reader::~Reader() {
  if (root_fd_ >= 0) ::close(root_fd_);
}

uint64_t Reader::cached_bytes() const {
  return state_ ? state_->cached.load(std::memory_order_relaxed) : 0;
}

const Node* Reader::Tree(size_t sample) const {
  State::Slot& slot = state_->slots[sample - 1];
  if (archive()) return slot.tree;
  // Built once by whichever read comes first; every later read (any thread) sees it whole.
  std::call_once(slot.once, [&] {
    const int fd = OpenBeneath("samples/" + SampleName(sample), O_RDONLY | O_DIRECTORY);
    if (fd < 0) return;  // the files give the answer (ENOENT...) every time
    uint64_t left = state_->limits.cache_bytes;
    const uint64_t taken = state_->cached.load(std::memory_order_relaxed);
    left = taken >= left ? 0 : left - taken;
    auto tree = std::make_unique<Node>();
    uint64_t used = 0;
    if (!LoadTree(fd, *tree, left, used)) return;  // over the budget: read from the files
    // Samples of one capture may load at once: the budget holds for their sum.
    uint64_t before = state_->cached.load(std::memory_order_relaxed);
    do {
      if (before + used > state_->limits.cache_bytes) return;
    } while (!state_->cached.compare_exchange_weak(before, before + used));
    slot.loaded = std::move(tree);
    slot.tree = slot.loaded.get();
  });
  return slot.tree;
}

// ---- Reader: the files of a directory capture

std::expected<std::string, int> Reader::DiskReadFile(const std::string& path,
                                                     size_t max_bytes) const {
  auto bytes = ReadRegular(path, max_bytes);
  if (bytes || bytes.error() != ENOENT) return bytes;
  // The host's answer was an error: the recorded errno, so replay fails as the host did.
  const auto stored = ReadRegular(path + ".errno", kMaxSmallFile);
  if (!stored) return std::unexpected(ENOENT);
  return std::unexpected(ErrnoFromName(*stored).value_or(EINVAL));
}

std::expected<std::vector<std::string>, int> Reader::DiskList(const std::string& path) const {
  const int fd = OpenBeneath(path, O_RDONLY | O_DIRECTORY | O_NONBLOCK);
  if (fd < 0) {
    if (-fd != ENOENT) return std::unexpected(-fd);
    // A listing the host refused is stored as the directory's .errno.
    const auto stored = ReadRegular(path + ".errno", kMaxSmallFile);
    if (!stored) return std::unexpected(ENOENT);
    return std::unexpected(ErrnoFromName(*stored).value_or(EINVAL));
  }
  return ListFd(fd);
}

bool Reader::DiskExists(const std::string& path) const {
  const int fd = OpenBeneath(path, O_PATH);
  if (fd >= 0) {
    ::close(fd);
    return true;
  }
  return ReadRegular(path + ".link", kMaxSmallFile).has_value();
}

int Reader::DiskCheckDirectory(const std::string& path) const {
  const int fd = OpenBeneath(path, O_RDONLY | O_DIRECTORY | O_NONBLOCK);
  if (fd < 0) {
    if (-fd != ENOENT) return -fd;
    const auto stored = ReadRegular(path + ".errno", kMaxSmallFile);
    return stored ? ErrnoFromName(*stored).value_or(EINVAL) : ENOENT;
  }
  ::close(fd);
  return 0;
}

int Reader::OpenBeneathAt(int dir_fd, const std::string& rel, uint64_t flags) {
  open_how how{};
  // openat2 refuses O_PATH with any flag but O_CLOEXEC, O_DIRECTORY and O_NOFOLLOW.
  how.flags = flags | O_CLOEXEC | ((flags & O_PATH) != 0 ? 0 : O_NOCTTY);
  // Beneath the root: an absolute link or ".." leaving it is EXDEV; /proc magic links ELOOP.
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
  const long fd = ::syscall(SYS_openat2, dir_fd, rel.c_str(), &how, sizeof how);
  if (fd < 0) return -errno;
  return static_cast<int>(fd);
}

std::expected<std::string, int> Reader::ReadRegularAt(int dir_fd, const std::string& rel,
                                                      size_t max_bytes) {
  if (dir_fd < 0) return std::unexpected(ENOENT);  // an archive has no files
  // O_NONBLOCK: a FIFO planted in the capture must not hang the open.
  const int fd = OpenBeneathAt(dir_fd, rel, O_RDONLY | O_NONBLOCK);
  if (fd < 0) return std::unexpected(-fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return std::unexpected(EINVAL);
  }
  // A regular file's size is true (unlike sysfs'): a larger one is refused before a read.
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    return std::unexpected(EFBIG);
  }
  auto bytes = sysfs::ReadFdChecked(fd, max_bytes);
  ::close(fd);
  return bytes;
}

// ---- Reader: the tree where it answers, else the files

std::expected<std::string, int> Reader::ReadFile(size_t sample, std::string_view rel,
                                                 size_t max_bytes) const {
  if (sample < 1 || sample > samples_ || !ValidRelative(rel)) return std::unexpected(ENOENT);
  if (const Node* tree = Tree(sample)) {
    const Found found = Walk(*tree, rel);
    if (!found.on_disk) {
      if (found.node != nullptr || found.error != ENOENT) return FileOf(found, max_bytes);
      bool on_disk = false;
      const auto error = StoredErrno(*tree, rel, on_disk);
      if (!on_disk) return std::unexpected(error.value_or(ENOENT));
    }
  }
  return DiskReadFile("samples/" + SampleName(sample) + "/" + std::string(rel), max_bytes);
}

std::expected<std::vector<std::string>, int> Reader::List(size_t sample,
                                                          std::string_view rel) const {
  if (sample < 1 || sample > samples_ || !ValidRelative(rel)) return std::unexpected(ENOENT);
  if (const Node* tree = Tree(sample)) {
    Directory dir;
    dir.node_ = tree;
    const Found found = Walk(*tree, rel);
    if (!found.on_disk) {
      if (found.node != nullptr && found.node->kind == Node::Kind::kDirectory) {
        dir.node_ = found.node;
        return ListAt(dir);
      }
      if (found.node != nullptr || found.error != ENOENT) return std::unexpected(ENOTDIR);
      bool on_disk = false;
      const auto error = StoredErrno(*tree, rel, on_disk);
      if (!on_disk) return std::unexpected(error.value_or(ENOENT));
    }
  }
  return DiskList("samples/" + SampleName(sample) + "/" + std::string(rel));
}

std::expected<std::string, int> Reader::ReadLink(size_t sample, std::string_view rel) const {
  return ReadFile(sample, std::string(rel) + ".link", kMaxSmallFile);
}

bool Reader::Exists(size_t sample, std::string_view rel) const {
  if (sample < 1 || sample > samples_ || !ValidRelative(rel)) return false;
  if (const Node* tree = Tree(sample)) {
    const Found found = Walk(*tree, rel);
    if (!found.on_disk) {
      if (found.node != nullptr) return true;
      const Found link = Walk(*tree, std::string(rel) + ".link");
      if (!link.on_disk) return FileOf(link, kMaxSmallFile).has_value();
    }
  }
  return DiskExists("samples/" + SampleName(sample) + "/" + std::string(rel));
}

int Reader::CheckDirectory(size_t sample, std::string_view rel) const {
  if (sample < 1 || sample > samples_ || !ValidRelative(rel)) return ENOENT;
  if (const Node* tree = Tree(sample)) {
    const Found found = Walk(*tree, rel);
    if (!found.on_disk) {
      if (found.node != nullptr) return found.node->kind == Node::Kind::kDirectory ? 0 : ENOTDIR;
      if (found.error != ENOENT) return found.error;
      bool on_disk = false;
      const auto error = StoredErrno(*tree, rel, on_disk);
      if (!on_disk) return error.value_or(ENOENT);
    }
  }
  return DiskCheckDirectory("samples/" + SampleName(sample) + "/" + std::string(rel));
}

std::expected<Directory, int> Reader::OpenDirectory(size_t sample, std::string_view rel) const {
  if (const int error = CheckDirectory(sample, rel); error != 0) return std::unexpected(error);
  Directory dir;
  dir.path_ = "samples/" + SampleName(sample) + "/" + std::string(rel);
  if (const Node* tree = Tree(sample)) {
    const Found found = Walk(*tree, rel);
    if (found.node != nullptr && found.node->kind == Node::Kind::kDirectory) {
      dir.node_ = found.node;
      return dir;
    }
  }
  dir.fd_ = OpenBeneath(dir.path_, O_RDONLY | O_DIRECTORY | O_NONBLOCK);
  if (dir.fd_ < 0) return std::unexpected(-std::exchange(dir.fd_, -1));
  return dir;
}

std::expected<std::string, int> Reader::ReadFileAt(const Directory& dir, std::string_view name,
                                                   size_t max_bytes) const {
  // One name of the directory: beneath it, so nothing but its own entries is reached.
  if (!ValidRelative(name) || name.find('/') != std::string_view::npos) {
    return std::unexpected(ENOENT);
  }
  if (dir.node_ != nullptr) {
    const Found found = Walk(*dir.node_, name);
    if (!found.on_disk) {
      if (found.node != nullptr || found.error != ENOENT) return FileOf(found, max_bytes);
      bool on_disk = false;
      const auto error = StoredErrno(*dir.node_, name, on_disk);
      if (!on_disk) return std::unexpected(error.value_or(ENOENT));
    }
    return DiskReadFile(dir.path_ + "/" + std::string(name), max_bytes);
  }
  if (dir.fd_ < 0) return std::unexpected(EBADF);
  const std::string file(name);
  auto bytes = ReadRegularAt(dir.fd_, file, max_bytes);
  if (bytes || bytes.error() != ENOENT) return bytes;
  const auto stored = ReadRegularAt(dir.fd_, file + ".errno", kMaxSmallFile);
  if (!stored) return std::unexpected(ENOENT);
  return std::unexpected(ErrnoFromName(*stored).value_or(EINVAL));
}

std::expected<std::vector<std::string>, int> Reader::ListAt(const Directory& dir) const {
  if (dir.node_ != nullptr) {
    std::vector<std::string> names;
    names.reserve(dir.node_->children.size());
    for (const auto& [name, node] : dir.node_->children) names.push_back(name);
    return HostNames(std::move(names));
  }
  if (dir.fd_ < 0) return std::unexpected(EBADF);
  // fdopendir takes the descriptor: a duplicate, so the caller's stays open for reads.
  const int dup = ::fcntl(dir.fd_, F_DUPFD_CLOEXEC, 0);
  if (dup < 0) return std::unexpected(errno);
  ::lseek(dup, 0, SEEK_SET);
  return ListFd(dup);
}

Directory::Directory(Directory&& other) noexcept
    : node_(std::exchange(other.node_, nullptr)),
      fd_(std::exchange(other.fd_, -1)),
      path_(std::move(other.path_)) {}

Directory& Directory::operator=(Directory&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    node_ = std::exchange(other.node_, nullptr);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
  }
  return *this;
}

Directory::~Directory() {
  if (fd_ >= 0) ::close(fd_);
}

// ---- Writer

std::expected<std::unique_ptr<Writer>, std::string> Writer::Create(const std::filesystem::path& dir,
                                                                   bool force) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) == 0) {
    if (S_ISLNK(st.st_mode)) {
      return std::unexpected(dir.string() + " is a symbolic link: give the directory itself");
    }
    if (!S_ISDIR(st.st_mode)) return std::unexpected(dir.string() + " is not a directory");
  } else if (errno != ENOENT || ::mkdir(dir.c_str(), 0700) != 0) {
    return std::unexpected("cannot create " + dir.string() + ": " + std::strerror(errno));
  }
  std::unique_ptr<Writer> writer(new Writer());
  writer->dir_ = dir;
  writer->dir_fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (writer->dir_fd_ < 0) {
    return std::unexpected("cannot open " + dir.string() + ": " + std::strerror(errno));
  }
  if (const auto names = sysfs::ListDirectoryChecked(dir); !names || !names->empty()) {
    if (!force) {
      return std::unexpected(dir.string() +
                             " is not empty: choose another --output, or --force to replace "
                             "the capture in it");
    }
    // --force replaces a capture, never anything else the directory holds.
    for (const char* name : {"samples", "index.json"}) {
      if (const int err = RemoveTree(writer->dir_fd_, name); err != 0) {
        return std::unexpected("cannot remove " + (dir / name).string() + ": " +
                               std::strerror(err));
      }
    }
  }
  if (::mkdirat(writer->dir_fd_, "samples", 0700) != 0 && errno != EEXIST) {
    return std::unexpected("cannot create samples/: " + std::string(std::strerror(errno)));
  }
  writer->samples_fd_ =
      ::openat(writer->dir_fd_, "samples", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (writer->samples_fd_ < 0) {
    return std::unexpected("cannot open samples/: " + std::string(std::strerror(errno)));
  }
  return writer;
}

Writer::~Writer() {
  if (sample_fd_ >= 0) ::close(sample_fd_);
  if (samples_fd_ >= 0) ::close(samples_fd_);
  if (dir_fd_ >= 0) ::close(dir_fd_);
}

std::expected<void, std::string> Writer::BeginSample(size_t n) {
  std::lock_guard lock(mutex_);
  if (n < 1 || n > kMaxSamples) return std::unexpected("sample number out of range");
  const std::string temp = "." + SampleName(n) + ".tmp";
  RemoveTree(samples_fd_, temp.c_str());
  if (::mkdirat(samples_fd_, temp.c_str(), 0700) != 0) {
    return std::unexpected("cannot create samples/" + temp + ": " + std::strerror(errno));
  }
  sample_fd_ = ::openat(samples_fd_, temp.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (sample_fd_ < 0) return std::unexpected("cannot open samples/" + temp);
  sample_ = n;
  listings_.clear();
  sample_times_.push_back(NowUtc());
  return {};
}

std::expected<void, std::string> Writer::CommitSample() {
  std::lock_guard lock(mutex_);
  if (sample_fd_ < 0) return std::unexpected("no sample open");
  for (const auto& [dir, names] : listings_) {
    for (const std::string& name : names) {
      const std::string base = dir + "/" + name;
      const auto present = [&](const std::string& rel) {
        struct stat st {};
        return ::fstatat(sample_fd_, rel.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
      };
      if (present(base) || present(base + ".errno") || present(base + ".link")) continue;
      // Listed but nothing under it read: a directory keeps the name in the listing, with the
      // marker in it so that git and other tools that drop empty directories keep it too.
      Put(base + "/" + std::string(kListedMarker), "");
    }
  }
  listings_.clear();
  ::close(sample_fd_);
  sample_fd_ = -1;
  const std::string temp = "." + SampleName(sample_) + ".tmp";
  if (::renameat(samples_fd_, temp.c_str(), samples_fd_, SampleName(sample_).c_str()) != 0) {
    return std::unexpected("cannot commit sample " + SampleName(sample_) + ": " +
                           std::strerror(errno));
  }
  return {};
}

int Writer::ParentFd(std::string_view rel, std::string& leaf) {
  if (sample_fd_ < 0) return -EBADF;
  int fd = ::fcntl(sample_fd_, F_DUPFD_CLOEXEC, 0);
  size_t start = 0;
  for (;;) {
    const size_t slash = rel.find('/', start);
    if (slash == std::string_view::npos) {
      leaf = std::string(rel.substr(start));
      return fd;
    }
    const std::string part(rel.substr(start, slash - start));
    if (::mkdirat(fd, part.c_str(), 0700) != 0 && errno != EEXIST) {
      const int error = errno;
      ::close(fd);
      return -error;
    }
    const int next = ::openat(fd, part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    const int error = errno;
    ::close(fd);
    if (next < 0) return -error;
    fd = next;
    start = slash + 1;
  }
}

void Writer::Put(std::string_view rel, std::string_view bytes) {
  if (!ValidRelative(rel)) return;
  std::string leaf;
  const int dir = ParentFd(rel, leaf);
  if (dir < 0) {
    missed_.insert({std::string(rel), "cannot store: " + std::string(std::strerror(-dir))});
    return;
  }
  // A later read of the same file in one sample replaces the earlier answer, value or errno.
  for (const std::string& other : {leaf, leaf + ".errno"}) ::unlinkat(dir, other.c_str(), 0);
  const int fd =
      ::openat(dir, leaf.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  const int error = fd < 0 ? errno : WriteWhole(fd, bytes);
  if (fd >= 0) ::close(fd);
  ::close(dir);
  if (error != 0) {
    missed_.insert({std::string(rel), "cannot store: " + std::string(std::strerror(error))});
  }
}

void Writer::File(std::string_view rel, std::string_view bytes) {
  std::lock_guard lock(mutex_);
  // Netlink replies are binary: their recorder redacts them (sys/rdma_netlink_redact.h).
  if (redactor_ && !rel.starts_with("netlink/")) {
    Put(rel, redact::RedactFile(*redactor_, rel, bytes));
    return;
  }
  Put(rel, bytes);
}

void Writer::Errno(std::string_view rel, int error) {
  std::lock_guard lock(mutex_);
  Put(std::string(rel) + ".errno", ErrnoName(error) + "\n");
  std::string leaf;
  if (const int dir = ParentFd(rel, leaf); dir >= 0) {
    ::unlinkat(dir, leaf.c_str(), 0);
    ::close(dir);
  }
  // A file the host refused to this process is what a capture as root would have had.
  if (error == EACCES || error == EPERM) missed_.insert({std::string(rel), ErrnoName(error)});
}

void Writer::Link(std::string_view rel, std::string_view target, bool replace) {
  std::lock_guard lock(mutex_);
  if (!replace) {
    struct stat st {};
    const std::string link = std::string(rel) + ".link";
    if (sample_fd_ >= 0 && ::fstatat(sample_fd_, link.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
      return;
    }
  }
  Put(std::string(rel) + ".link", target);
}

void Writer::Listing(std::string_view rel, const std::vector<std::string>& names) {
  std::lock_guard lock(mutex_);
  if (sample_fd_ < 0 || !ValidRelative(rel)) return;
  std::string leaf;
  const int fd = ParentFd(std::string(rel) + "/.", leaf);  // the directory itself, even empty
  if (fd >= 0) ::close(fd);
  std::vector<std::string>& kept = listings_[std::string(rel)];
  for (const std::string& name : names) {
    if (ValidRelative(name) && name.find('/') == std::string::npos) kept.push_back(name);
  }
}

void Writer::Driver(std::string_view netdev, std::string_view driver, std::string_view version,
                    std::string_view firmware) {
  std::lock_guard lock(mutex_);
  drivers_[std::string(netdev)] = {{"driver", std::string(driver)},
                                   {"version", std::string(version)},
                                   {"firmware_version", std::string(firmware)}};
}

void Writer::Missed(std::string source, std::string reason) {
  std::lock_guard lock(mutex_);
  missed_.insert({std::move(source), std::move(reason)});
}

std::vector<NotRecorded> Writer::missed() {
  std::lock_guard lock(mutex_);
  return {missed_.begin(), missed_.end()};
}

std::vector<std::string> Writer::sample_times() {
  std::lock_guard lock(mutex_);
  return sample_times_;
}

void Writer::StampSample() {
  std::lock_guard lock(mutex_);
  if (!sample_times_.empty()) sample_times_.back() = NowUtc();
}

std::expected<void, std::string> Writer::WriteIndex(
    const std::string& rdmascope_version, const std::vector<std::string>& collectors_replayed) {
  std::lock_guard lock(mutex_);
  nlohmann::ordered_json index;
  index["format_version"] = kFormatVersion;
  index["rdmascope_version"] = rdmascope_version;
  index["created"] = sample_times_.empty() ? NowUtc() : sample_times_.front();
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  index["hostname"] = redactor_ ? redactor_->Name("host", host) : std::string(host);
  // --redact: every rule of docs/capture.md "Redaction" applied to what was written.
  index["redacted"] = redactor_ != nullptr;
  if (redactor_) {
    index["redaction"] = {{"key", redact_key_file_ ? "file" : "drawn"},
                          {"key_id", redactor_->Token(kRedactionKeyIdKind, "", 16)}};
  }
  utsname uts{};
  ::uname(&uts);
  index["kernel"] = {{"release", uts.release}, {"version", uts.version}, {"machine", uts.machine}};
  nlohmann::ordered_json samples = nlohmann::ordered_json::array();
  for (size_t i = 0; i < sample_times_.size(); ++i) {
    samples.push_back({{"name", SampleName(i + 1)}, {"time", sample_times_[i]}});
  }
  index["samples"] = samples;
  index["collectors_replayed"] = collectors_replayed;
  nlohmann::ordered_json netdevs = nlohmann::ordered_json::object();
  for (const auto& [name, fields] : drivers_) netdevs[name] = fields;
  index["netdevs"] = netdevs;
  nlohmann::ordered_json missed = nlohmann::ordered_json::array();
  for (const NotRecorded& entry : missed_) {
    missed.push_back({{"source", entry.source}, {"reason", entry.reason}});
  }
  index["not_recorded"] = missed;
  const std::string text = index.dump(2) + "\n";
  ::unlinkat(dir_fd_, "index.json.tmp", 0);
  const int fd = ::openat(dir_fd_, "index.json.tmp",
                          O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return std::unexpected("cannot write index.json: " + std::string(strerror(errno)));
  const int error = WriteWhole(fd, text);
  ::close(fd);
  if (error != 0 || ::renameat(dir_fd_, "index.json.tmp", dir_fd_, "index.json") != 0) {
    return std::unexpected("cannot write index.json: " +
                           std::string(std::strerror(error != 0 ? error : errno)));
  }
  return {};
}

// ---- Session

std::unique_ptr<Session> Session::Recording(Layout layout, Writer* writer) {
  std::unique_ptr<Session> session(new Session(std::move(layout)));
  session->writer_ = writer;
  return session;
}

std::unique_ptr<Session> Session::Replaying(Layout layout, Reader reader) {
  std::unique_ptr<Session> session(new Session(std::move(layout)));
  session->reader_.emplace(std::move(reader));
  // The samples' times, read once: an index that does not read leaves them unknown (doctor
  // --replay refuses such a capture; serve replays it on its own clock).
  if (const auto facts = ReadIndexFacts(session->reader_->index_text())) {
    for (const std::string& time : facts->sample_times) {
      const auto millis = ParseUtcMillis(time);
      session->sample_seconds_.push_back(
          millis ? std::optional<double>(static_cast<double>(*millis) / 1000) : std::nullopt);
    }
  }
  return session;
}

std::optional<double> Session::sample_seconds() const {
  const size_t n = sample();
  if (n < 1 || n > sample_seconds_.size()) return std::nullopt;
  return sample_seconds_[n - 1];
}

void Session::NextSample() {
  if (!reader_) return;
  const size_t n = collections_.fetch_add(1, std::memory_order_acq_rel) + 1;
  sample_.store(std::min(n, reader_->sample_count()), std::memory_order_release);
}

std::expected<std::string, int> Session::ReplayFile(const std::filesystem::path& host,
                                                    size_t max_bytes) const {
  const auto rel = layout_.Relative(host);
  if (!rel) return std::unexpected(ENOENT);
  return reader_->ReadFile(sample(), *rel, max_bytes);
}

std::expected<std::vector<std::string>, int> Session::ReplayList(
    const std::filesystem::path& host) const {
  const auto rel = layout_.Relative(host);
  if (!rel) return std::unexpected(ENOENT);
  return reader_->List(sample(), *rel);
}

std::expected<std::string, int> Session::ReplayLink(const std::filesystem::path& host) const {
  const auto rel = layout_.Relative(host);
  if (!rel) return std::unexpected(ENOENT);
  return reader_->ReadLink(sample(), *rel);
}

std::expected<Directory, int> Session::ReplayOpenDirectory(
    const std::filesystem::path& host) const {
  const auto rel = layout_.Relative(host);
  if (!rel) return std::unexpected(ENOENT);
  return reader_->OpenDirectory(sample(), *rel);
}

int Session::ReplayDirectory(const std::filesystem::path& host) const {
  const auto rel = layout_.Relative(host);
  if (!rel) return ENOENT;
  return reader_->CheckDirectory(sample(), *rel);
}

void Session::RecordFile(const std::filesystem::path& host,
                         const std::expected<std::string, int>& read) {
  if (internal::t_unrecorded > 0) return;
  const auto rel = layout_.Relative(host);
  if (!rel || writer_ == nullptr) return;
  if (read) {
    writer_->File(*rel, *read);
  } else {
    writer_->Errno(*rel, read.error());
  }
}

void Session::RecordList(const std::filesystem::path& host,
                         const std::expected<std::vector<std::string>, int>& names) {
  if (internal::t_unrecorded > 0) return;
  const auto rel = layout_.Relative(host);
  if (!rel || writer_ == nullptr) return;
  if (names) {
    writer_->Listing(*rel, *names);
  } else if (names.error() != ENOENT && names.error() != ENOTDIR) {
    writer_->Errno(*rel, names.error());
  }
}

bool Session::ReplayExists(const std::filesystem::path& host) const {
  const auto rel = layout_.Relative(host);
  return rel && reader_->Exists(sample(), *rel);
}

void Session::RecordExists(const std::filesystem::path& host) {
  if (internal::t_unrecorded > 0) return;
  const auto rel = layout_.Relative(host);
  if (!rel || writer_ == nullptr || rel->find('/') == std::string::npos) return;
  // Kept as a listing of one name: the name is in the sample when the sample is committed.
  const size_t slash = rel->rfind('/');
  writer_->Listing(rel->substr(0, slash), {rel->substr(slash + 1)});
}

void Session::RecordLink(const std::filesystem::path& host,
                         const std::optional<std::string>& target, int error, bool replace) {
  if (internal::t_unrecorded > 0) return;
  const auto rel = layout_.Relative(host);
  if (!rel || writer_ == nullptr) return;
  if (target) {
    writer_->Link(*rel, *target, replace);
  } else if (error != 0) {
    writer_->Errno(*rel + ".link", error);
  }
}

}  // namespace rdmascope::capture
