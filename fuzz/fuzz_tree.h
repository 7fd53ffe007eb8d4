// A fixture sysfs tree (tests/fixtures/sysfs/*.tree: `path = content` lines) materialised once
// per fuzzing process in a temporary directory, for parsers that resolve against a tree, or
// held in memory (FixtureFiles) for parsers with a file seam.
#pragma once
#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace rdmascope::fuzz {

inline std::filesystem::path FixtureTree(const std::string& tree) {
  std::string root = (std::filesystem::temp_directory_path() / "rdmascope-fuzz-XXXXXX").string();
  if (mkdtemp(root.data()) == nullptr) std::abort();
  std::ifstream in(std::string(RDMASCOPE_FIXTURES) + "/" + tree);
  if (!in) std::abort();
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line.front() == '#') continue;
    const size_t eq = line.find(" = ");
    if (eq == std::string::npos) continue;  // links and empty files: not needed here
    const std::filesystem::path file = std::filesystem::path(root) / line.substr(0, eq);
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file) << line.substr(eq + 3) << '\n';
  }
  // Removed at exit: libFuzzer ends with exit() after -max_total_time or a crash report.
  static std::string to_remove;
  to_remove = root;
  std::atexit([] {
    std::error_code ec;
    std::filesystem::remove_all(to_remove, ec);
  });
  return root;
}

// Replaces the content of one file of such a tree.
inline void WriteFile(const std::filesystem::path& file, std::string_view content) {
  std::filesystem::create_directories(file.parent_path());
  std::ofstream(file, std::ios::binary | std::ios::trunc) << content;
}

// What sysfs::ReadAttribute returns for a file holding `content`: nullopt above a page (EFBIG),
// trailing newlines and NULs removed, nullopt for "N/A" (core/sysfs.cc).
inline std::optional<std::string> AttributeText(std::string_view content) {
  if (content.size() > 4096) return std::nullopt;
  while (!content.empty() && (content.back() == '\n' || content.back() == '\0')) {
    content.remove_suffix(1);
  }
  if (content.starts_with("N/A")) return std::nullopt;
  return std::string(content);
}

// The same fixture tree in memory, for parsers with a file seam: path under `root` -> content
// as written by FixtureTree (with its newline).
inline std::unordered_map<std::string, std::string> FixtureFiles(
    const std::string& tree, const std::filesystem::path& root) {
  std::unordered_map<std::string, std::string> files;
  std::ifstream in(std::string(RDMASCOPE_FIXTURES) + "/" + tree);
  if (!in) std::abort();
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line.front() == '#') continue;
    const size_t eq = line.find(" = ");
    if (eq == std::string::npos) continue;
    files[(root / line.substr(0, eq)).string()] = line.substr(eq + 3) + '\n';
  }
  return files;
}

}  // namespace rdmascope::fuzz
