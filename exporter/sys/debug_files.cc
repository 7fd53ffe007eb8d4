#include "sys/debug_files.h"

#include <unistd.h>

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
