// Test helpers: materialise a fixture sysfs tree (tests/fixtures/sysfs/*.tree) in a temporary
// directory, parse `ethtool -S` text, serialise metrics, compare with golden files.
#pragma once

#include <gtest/gtest.h>
#include <prometheus/metric_family.h>

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "sys/ethtool_ioctl.h"

namespace rdmascope::testing {

std::filesystem::path FixturePath(const std::string& relative);

// A temporary directory removed with the object.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Creates the files and directories a .tree fixture describes under root.
void MaterialiseTree(const std::filesystem::path& tree_file, const std::filesystem::path& root);

// Parses `ethtool -S` output ("     name: value" lines).
sys::EthtoolStats ParseEthtoolS(const std::string& text);
std::string ReadText(const std::filesystem::path& path);
// Writes `text` (bytes as they are) to `path`, its parent directories made.
void WriteText(const std::filesystem::path& path, std::string_view text);

std::string Serialise(const std::vector<prometheus::MetricFamily>& families);

// Compares with tests/fixtures/golden/<name>; RDMASCOPE_UPDATE_GOLDEN=1 rewrites the file.
::testing::AssertionResult MatchesGolden(const std::string& actual, const std::string& name);

}  // namespace rdmascope::testing
