#include "sys/privileged_procfs.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <climits>

#include "core/sysfs.h"

namespace rdmascope::sys {
namespace {

bool ValidPid(uint32_t pid) { return pid != 0 && pid <= INT_MAX; }

const char* NamespaceName(NamespaceKind kind) {
  return kind == NamespaceKind::kPid ? "pid" : "user";
}

}  // namespace

std::expected<std::string, int> DirectProcfs::Maps(uint32_t pid, size_t max_bytes) {
  if (!ValidPid(pid)) return std::unexpected(ENOENT);
  return sysfs::ReadFileChecked(procfs_ / std::to_string(pid) / "maps", max_bytes);
}

std::expected<UniqueFd, int> DirectProcfs::OpenMaps(uint32_t pid) {
  if (!ValidPid(pid)) return std::unexpected(ENOENT);
  const std::string path = (procfs_ / std::to_string(pid) / "maps").string();
  // O_NONBLOCK: a fixture tree's "maps" could be anything; the real one never blocks.
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return std::unexpected(errno);
  return UniqueFd(fd);
}

std::expected<OpenedFile, std::string> DirectProcfs::OpenMapping(uint32_t pid,
                                                                 const MappedFile& mapping) {
  return OpenMappedFile(procfs_, pid, mapping);
}

std::expected<OpenedFile, std::string> DirectProcfs::OpenInRoot(uint32_t pid,
                                                                std::string_view path) {
  auto root = OpenProcessRoot(procfs_, pid);
  if (!root) return std::unexpected(root.error());
  return sys::OpenInRoot(root->get(), path);
}

std::vector<std::optional<std::string>> DirectProcfs::Namespaces(NamespaceKind kind,
                                                                 std::span<const uint32_t> pids) {
  std::vector<std::optional<std::string>> links;
  links.reserve(pids.size());
  for (const uint32_t pid : pids) {
    links.push_back(ValidPid(pid) ? sysfs::ReadLinkBasename(procfs_ / std::to_string(pid) / "ns" /
                                                            NamespaceName(kind))
                                  : std::nullopt);
  }
  return links;
}

std::expected<UverbsHolderMap, std::string> DirectProcfs::UverbsHolders() {
  UverbsHolderMap holders;
  size_t pairs = 0;
  constexpr std::string_view kPrefix = "/dev/infiniband/";
  const auto entries = sysfs::ListDirectoryChecked(procfs_);
  if (!entries) return std::unexpected("cannot list " + procfs_.string());
  for (const std::string& entry : *entries) {
    const auto pid = sysfs::ParseUnsigned(entry);
    if (!pid || *pid == 0 || *pid > INT_MAX) continue;
    const auto fd_dir = procfs_ / entry / "fd";
    for (const std::string& fd : sysfs::ListDirectory(fd_dir)) {
      char target[256];
      const ssize_t n = ::readlink((fd_dir / fd).c_str(), target, sizeof target - 1);
      if (n <= 0) continue;
      const std::string_view path(target, static_cast<size_t>(n));
      if (!path.starts_with("/dev/infiniband/uverbs")) continue;
      if (holders[static_cast<uint32_t>(*pid)]
              .insert(std::string(path.substr(kPrefix.size())))
              .second &&
          ++pairs >= kMaxUverbsHolders) {
        return holders;  // bounded: a host with more is beyond what one scrape lists
      }
    }
  }
  return holders;
}

}  // namespace rdmascope::sys
