#include "sys/debug_files.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace rdmascope::sys {
namespace {

bool IsElf(int fd) {
  char magic[4] = {};
  return pread(fd, magic, sizeof magic, 0) == 4 && std::memcmp(magic, "\177ELF", 4) == 0;
}

}  // namespace

std::vector<std::string> DebugFileCandidates(std::string_view mapped_path,
                                             std::span<const uint8_t> build_id,
                                             std::string_view debuglink) {
  std::vector<std::string> candidates;
  auto by_id = BuildIdDebugPath(build_id);
  if (!by_id) return candidates;
  candidates.push_back(std::move(*by_id));
  if (debuglink.empty() || !IsPlainDebuglinkName(debuglink)) return candidates;
  // The directory of an absolute path only (a maps line's "[heap]" or "" has none).
  const size_t slash = mapped_path.rfind('/');
  if (slash == std::string_view::npos || !mapped_path.starts_with("/")) return candidates;
  const std::string directory(mapped_path.substr(0, slash + 1));
  const std::string name(debuglink);
  candidates.push_back("/usr/lib/debug" + directory + name);
  candidates.push_back(directory + name);
  candidates.push_back(directory + ".debug/" + name);
  return candidates;
}

bool IsDebugFileCandidate(std::string_view path, const std::vector<MappedFile>& mapped) {
  // By build id: the path BuildIdDebugPath gives for the build id its name spells.
  constexpr std::string_view kBuildIds = "usr/lib/debug/.build-id/";
  if (path.starts_with(kBuildIds) && path.ends_with(".debug")) {
    std::string hex(path.substr(kBuildIds.size(), path.size() - kBuildIds.size() - 6));
    if (hex.size() < 3 || hex[2] != '/') return false;
    hex.erase(2, 1);
    if (hex.size() % 2 != 0) return false;
    std::vector<uint8_t> build_id;
    for (size_t i = 0; i < hex.size(); i += 2) {
      const auto digit = [](char c) -> int {
        return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      };
      const int high = digit(hex[i]);
      const int low = digit(hex[i + 1]);
      if (high < 0 || low < 0) return false;
      build_id.push_back(static_cast<uint8_t>(high * 16 + low));
    }
    return BuildIdDebugPath(build_id) == path;
  }
  // By debuglink name: one of a mapped file's candidates for the name the path ends with.
  const size_t slash = path.rfind('/');
  if (slash == std::string_view::npos) return false;
  const std::string_view name = path.substr(slash + 1);
  constexpr uint8_t kAnyId[3] = {0, 0, 0};  // any valid build id: only the others are compared
  for (const MappedFile& file : mapped) {
    const auto candidates = DebugFileCandidates(file.path, kAnyId, name);
    if (std::find(candidates.begin() + 1, candidates.end(), path) != candidates.end()) {
      return true;
    }
  }
  return false;
}

std::expected<FoundDebugFile, std::string> OpenFirstDebugFile(ProcessAccess& access, uint32_t pid,
                                                              const DebugFileQuery& query,
                                                              size_t first) {
  const std::vector<std::string> candidates =
      DebugFileCandidates(query.mapped_path, query.build_id, query.debuglink);
  // Why each one failed, for the log of a missing debug file (most simply do not exist).
  std::string why;
  for (size_t i = first; i < candidates.size(); ++i) {
    auto opened = access.OpenInRoot(pid, candidates[i]);
    std::string error;
    if (!opened) {
      error = opened.error();
    } else if (!IsElf(opened->fd.get())) {
      error = "not an ELF file";
    } else {
      return FoundDebugFile{.index = i, .file = std::move(*opened)};
    }
    why += (why.empty() ? "" : "; ") + candidates[i] + ": " + error;
  }
  if (why.empty()) return std::unexpected("no debug file candidate");
  return std::unexpected(why);
}

}  // namespace rdmascope::sys
