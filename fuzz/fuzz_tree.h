// A fixture sysfs tree (tests/fixtures/sysfs/*.tree: `path = content` lines) materialised once
// per fuzzing process in a temporary directory, for parsers that resolve against a tree.
#pragma once
#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

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

}  // namespace rdmascope::fuzz
