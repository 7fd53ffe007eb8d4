#include "core/sysfs.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <clocale>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/capture.h"

namespace rdmascope::sysfs {
namespace {

// sysfs attributes are at most one page; a larger file is not an attribute.
constexpr size_t kMaxAttributeBytes = 4096;

template <typename Int>
std::optional<Int> ParseInteger(std::string_view text) {
  text = Trim(text);
  if (text.empty()) return std::nullopt;
  int base = 10;
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
    base = 16;
    text.remove_prefix(2);
  }
  Int value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, base);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::atomic<bool> fault_hook_set{false};

FaultHook& InstalledHook() {
  static FaultHook hook;
  return hook;
}

std::optional<InjectedFault> Injected(const std::filesystem::path& path) {
  if (!fault_hook_set.load(std::memory_order_acquire)) return std::nullopt;
  return InstalledHook()(path);
}

}  // namespace

void SetFaultHookForTesting(FaultHook hook) {
  fault_hook_set.store(false, std::memory_order_release);
  InstalledHook() = std::move(hook);
  fault_hook_set.store(static_cast<bool>(InstalledHook()), std::memory_order_release);
}

std::optional<double> ParseDouble(std::string_view text) {
  double value = 0;
#if defined(_LIBCPP_VERSION) && _LIBCPP_VERSION < 200000
  // libc++ before 20 has no floating-point from_chars (the fuzzing build uses libc++ 16):
  // strtod_l in the C locale on a bounded copy, refusing what from_chars refuses (leading
  // blanks or '+', hexadecimal).
  if (text.empty() || text.size() > 64 || text.front() == '+' || Trim(text) != text ||
      text.find_first_of("xX") != std::string_view::npos) {
    return std::nullopt;
  }
  static const locale_t c_locale = newlocale(LC_ALL_MASK, "C", nullptr);
  const std::string copy(text);
  char* end = nullptr;
  value = strtod_l(copy.c_str(), &end, c_locale);
  if (end != copy.c_str() + copy.size()) return std::nullopt;
#else
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
#endif
  if (!std::isfinite(value)) return std::nullopt;
  return value;
}

std::string_view Trim(std::string_view text) {
  const auto blank = [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; };
  while (!text.empty() && blank(text.front())) text.remove_prefix(1);
  while (!text.empty() && blank(text.back())) text.remove_suffix(1);
  return text;
}

std::optional<std::string> ReadFile(const std::filesystem::path& path, size_t max_bytes) {
  auto contents = ReadFileChecked(path, max_bytes);
  if (!contents) return std::nullopt;
  return std::move(*contents);
}

std::expected<std::string, int> ReadFdChecked(int fd, size_t max_bytes) {
  std::string buf(std::min<size_t>(max_bytes, kMaxAttributeBytes) + 1, '\0');
  size_t used = 0;
  for (;;) {
    if (used == buf.size()) {
      if (buf.size() > max_bytes) return std::unexpected(EFBIG);  // larger than accepted
      buf.resize(std::min(buf.size() * 2, max_bytes + 1));
    }
    const ssize_t n = ::read(fd, buf.data() + used, buf.size() - used);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::unexpected(errno);
    if (n == 0) break;
    used += static_cast<size_t>(n);
  }
  if (used > max_bytes) return std::unexpected(EFBIG);
  buf.resize(used);
  return buf;
}

namespace {

std::expected<std::string, int> ReadFileLive(const std::filesystem::path& path, size_t max_bytes) {
  const auto fault = Injected(path);
  if (fault && fault->error != 0) return std::unexpected(fault->error);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return std::unexpected(errno);
  auto contents = ReadFdChecked(fd, max_bytes);
  ::close(fd);
  if (contents && fault && fault->short_read) {
    contents->resize(std::min(contents->size(), *fault->short_read));
  }
  return contents;
}

std::expected<std::vector<std::string>, int> ListDirectoryLive(const std::filesystem::path& path) {
  std::vector<std::string> names;
  if (const auto fault = Injected(path); fault && fault->error != 0) {
    if (fault->error == ENOENT || fault->error == ENOTDIR) return names;
    return std::unexpected(fault->error);
  }
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) {
    if (errno == ENOENT || errno == ENOTDIR) return names;
    return std::unexpected(errno);
  }
  return TakeSortedNames(dir);
}

// The link's whole target text (readlink(2)), or the errno.
std::expected<std::string, int> ReadLinkLive(const std::filesystem::path& path) {
  if (const auto fault = Injected(path); fault && fault->error != 0) {
    return std::unexpected(fault->error);
  }
  char buf[4096];
  const ssize_t n = ::readlink(path.c_str(), buf, sizeof buf - 1);
  if (n < 0) return std::unexpected(errno);
  if (n == 0) return std::unexpected(ENOENT);
  return std::string(buf, static_cast<size_t>(n));
}

}  // namespace

std::expected<std::string, int> ReadOwnFile(const std::filesystem::path& path, size_t max_bytes) {
  return ReadFileLive(path, max_bytes);
}

// Each read below asks the host boundary (core/capture.h) once: live unless a capture is
// being recorded or replayed.
std::expected<std::string, int> ReadFileChecked(const std::filesystem::path& path,
                                                size_t max_bytes) {
  if (capture::Session* session = capture::Active(); session != nullptr) [[unlikely]] {
    if (session->replaying()) return session->ReplayFile(path, max_bytes);
    auto contents = ReadFileLive(path, max_bytes);
    session->RecordFile(path, contents);
    return contents;
  }
  return ReadFileLive(path, max_bytes);
}

std::optional<std::string> ReadAttribute(const std::filesystem::path& path) {
  auto buf = ReadFile(path, kMaxAttributeBytes);
  if (!buf) return std::nullopt;
  while (!buf->empty() && (buf->back() == '\n' || buf->back() == '\0')) buf->pop_back();
  if (buf->starts_with("N/A")) return std::nullopt;
  return buf;
}

std::optional<uint64_t> ParseUnsigned(std::string_view text) {
  return ParseInteger<uint64_t>(text);
}

std::optional<int64_t> ParseSigned(std::string_view text) { return ParseInteger<int64_t>(text); }

std::optional<uint64_t> ReadUnsigned(const std::filesystem::path& path) {
  const auto text = ReadAttribute(path);
  if (!text) return std::nullopt;
  return ParseUnsigned(*text);
}

std::optional<int64_t> ReadSigned(const std::filesystem::path& path) {
  const auto text = ReadAttribute(path);
  if (!text) return std::nullopt;
  return ParseSigned(*text);
}

std::vector<std::string> ListDirectory(const std::filesystem::path& path) {
  return ListDirectoryChecked(path).value_or(std::vector<std::string>{});
}

std::expected<std::vector<std::string>, int> ListDirectoryChecked(
    const std::filesystem::path& path) {
  if (capture::Session* session = capture::Active(); session != nullptr) [[unlikely]] {
    if (session->replaying()) {
      auto names = session->ReplayList(path);
      if (!names && (names.error() == ENOENT || names.error() == ENOTDIR)) {
        return std::vector<std::string>{};
      }
      return names;
    }
    auto names = ListDirectoryLive(path);
    session->RecordList(path, names);
    return names;
  }
  return ListDirectoryLive(path);
}

std::expected<std::vector<std::string>, int> TakeSortedNames(DIR* dir) {
  std::vector<std::string> names;
  for (;;) {
    errno = 0;  // readdir's end and its failure both return null: errno tells them apart
    const dirent* entry = ::readdir(dir);
    if (entry == nullptr) break;
    const std::string_view name = entry->d_name;
    if (name == "." || name == "..") continue;
    names.emplace_back(name);
  }
  const int error = errno;
  ::closedir(dir);
  if (error != 0) return std::unexpected(error);
  std::sort(names.begin(), names.end());
  return names;
}

std::optional<std::string> ReadLinkBasename(const std::filesystem::path& path) {
  const auto basename = [](std::string_view target) {
    const auto slash = target.rfind('/');
    return std::string(slash == std::string_view::npos ? target : target.substr(slash + 1));
  };
  if (capture::Session* session = capture::Active(); session != nullptr) [[unlikely]] {
    std::expected<std::string, int> link;
    if (session->replaying()) {
      link = session->ReplayLink(path);
    } else {
      link = ReadLinkLive(path);
      session->RecordLink(path, link ? std::optional(*link) : std::nullopt, link ? 0 : link.error(),
                          /*replace=*/false);
    }
    if (!link || link->empty()) return std::nullopt;
    return basename(*link);
  }
  if (const auto fault = Injected(path); fault && fault->error != 0) return std::nullopt;
  char buf[4096];
  const ssize_t n = ::readlink(path.c_str(), buf, sizeof buf - 1);
  if (n <= 0) return std::nullopt;
  return basename(std::string_view(buf, static_cast<size_t>(n)));
}

namespace {

// stat(2) (`follow`) or lstat(2) of `path`, through the host boundary: replayed from the
// capture's record of it, or recorded when it exists.
bool Exists(const std::filesystem::path& path, bool follow) {
  capture::Session* session = capture::Active();
  if (session != nullptr && session->replaying()) [[unlikely]] {
    return session->ReplayExists(path);
  }
  struct stat st {};
  const bool exists = (follow ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st)) == 0;
  if (session != nullptr && exists) [[unlikely]] {
    session->RecordExists(path);
  }
  return exists;
}

}  // namespace

bool PathExists(const std::filesystem::path& path) { return Exists(path, true); }

bool EntryExists(const std::filesystem::path& path) { return Exists(path, false); }

bool IsSymlink(const std::filesystem::path& path) {
  if (capture::Session* session = capture::Active(); session != nullptr) [[unlikely]] {
    if (session->replaying()) return session->ReplayLink(path).has_value();
    struct stat st {};
    const bool link = ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
    if (link) session->RecordLink(path, std::string(), 0, /*replace=*/false);
    return link;
  }
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
}

std::optional<std::filesystem::path> Canonical(const std::filesystem::path& path) {
  if (capture::Session* session = capture::Active(); session != nullptr) [[unlikely]] {
    if (session->replaying()) {
      // Stored as the link's target when resolved: an absolute host path.
      const auto target = session->ReplayLink(path);
      if (!target || target->empty() || target->front() != '/') return std::nullopt;
      return std::filesystem::path(*target);
    }
  }
  std::error_code error;
  auto resolved = std::filesystem::canonical(path, error);
  if (error) return std::nullopt;
  if (capture::Session* session = capture::Active(); session != nullptr) [[unlikely]] {
    session->RecordLink(path, resolved.string(), 0, /*replace=*/true);
  }
  return resolved;
}

std::string FixedString(const char* chars, size_t size) {
  return std::string(chars, strnlen(chars, size));
}

}  // namespace rdmascope::sysfs
