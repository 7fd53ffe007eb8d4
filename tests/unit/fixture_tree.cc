#include "unit/fixture_tree.h"

#include <prometheus/text_serializer.h>
#include <stdlib.h>

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace rdmascope::testing {
namespace fs = std::filesystem;

fs::path FixturePath(const std::string& relative) {
  return fs::path(RDMASCOPE_FIXTURES) / relative;
}

TempDir::TempDir() {
  std::string pattern = (fs::temp_directory_path() / "rdmascope-test-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

void WriteText(const fs::path& path, std::string_view text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

std::string ReadText(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void MaterialiseTree(const fs::path& tree_file, const fs::path& root) {
  std::istringstream lines(ReadText(tree_file));
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line.front() == '#') continue;
    // `path -> target`: a symbolic link (a device's driver, as sysfs shows it).
    if (const auto arrow = line.find(" -> "); arrow != std::string::npos) {
      const fs::path link = root / line.substr(0, arrow);
      fs::create_directories(link.parent_path());
      fs::create_symlink(line.substr(arrow + 4), link);
      continue;
    }
    const auto eq = line.find(" = ");
    if (eq == std::string::npos && line.back() == '/') {
      fs::create_directories(root / line);
      continue;
    }
    std::string content;
    std::string relative;
    if (eq == std::string::npos) {
      if (line.size() < 2 || line.substr(line.size() - 2) != " =") {
        throw std::runtime_error("bad fixture line: " + line);
      }
      relative = line.substr(0, line.size() - 2);
    } else {
      relative = line.substr(0, eq);
      content = line.substr(eq + 3);
    }
    const fs::path file = root / relative;
    fs::create_directories(file.parent_path());
    std::ofstream(file) << content << '\n';
  }
}

sys::EthtoolStats ParseEthtoolS(const std::string& text) {
  sys::EthtoolStats stats;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    const auto sep = line.rfind(": ");
    if (sep == std::string::npos || line.starts_with("NIC statistics")) continue;
    const auto start = line.find_first_not_of(' ');
    stats.emplace_back(line.substr(start, sep - start), std::stoull(line.substr(sep + 2)));
  }
  return stats;
}

std::string Serialise(const std::vector<prometheus::MetricFamily>& families) {
  return prometheus::TextSerializer().Serialize(families);
}

::testing::AssertionResult MatchesGolden(const std::string& actual, const std::string& name) {
  const fs::path golden = FixturePath("golden/" + name);
  if (const char* update = getenv("RDMASCOPE_UPDATE_GOLDEN");
      update && std::string(update) == "1") {
    std::ofstream(golden) << actual;
    return ::testing::AssertionSuccess();
  }
  std::string expected;
  try {
    expected = ReadText(golden);
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << e.what() << " (run with RDMASCOPE_UPDATE_GOLDEN=1)";
  }
  if (expected == actual) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "output differs from " << golden << " (RDMASCOPE_UPDATE_GOLDEN=1 rewrites it)\n"
         << "--- actual ---\n"
         << actual;
}

}  // namespace rdmascope::testing
