#include "core/sysfs.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <fstream>

#include "core/name_filter.h"
#include "unit/fixture_tree.h"

namespace rdmascope {
namespace {

TEST(Sysfs, ParsesIntegers) {
  EXPECT_EQ(sysfs::ParseUnsigned("42\n"), 42U);
  EXPECT_EQ(sysfs::ParseUnsigned("0x1f"), 31U);
  EXPECT_EQ(sysfs::ParseUnsigned("18446744073709551615"), UINT64_MAX);
  EXPECT_FALSE(sysfs::ParseUnsigned("18446744073709551616"));
  EXPECT_FALSE(sysfs::ParseUnsigned("-1"));
  EXPECT_FALSE(sysfs::ParseUnsigned("12abc"));
  EXPECT_FALSE(sysfs::ParseUnsigned(""));
  EXPECT_EQ(sysfs::ParseSigned("-1"), -1);
}

TEST(Sysfs, ReadsDefensively) {
  testing::TempDir dir;
  std::ofstream(dir.path() / "value") << "7\n";
  std::ofstream(dir.path() / "na") << "N/A (no PMA)\n";
  std::ofstream(dir.path() / "big") << std::string(8192, 'x');
  std::filesystem::create_directory(dir.path() / "subdir");
  EXPECT_EQ(sysfs::ReadUnsigned(dir.path() / "value"), 7U);
  EXPECT_FALSE(sysfs::ReadAttribute(dir.path() / "na"));
  EXPECT_FALSE(sysfs::ReadAttribute(dir.path() / "big"));
  EXPECT_FALSE(sysfs::ReadAttribute(dir.path() / "subdir"));
  EXPECT_FALSE(sysfs::ReadAttribute(dir.path() / "missing"));
  EXPECT_EQ(sysfs::ReadFile(dir.path() / "big", 1 << 20)->size(), 8192U);
  EXPECT_EQ(sysfs::ListDirectory(dir.path()).size(), 4U);
  EXPECT_TRUE(sysfs::ListDirectory(dir.path() / "missing").empty());
}

// Absent is empty; present but unlistable is its errno (ListDirectory alone cannot tell).
TEST(Sysfs, ListDirectoryCheckedTellsAbsentFromUnreadable) {
  testing::TempDir dir;
  std::ofstream(dir.path() / "file") << "x";
  std::filesystem::create_directory_symlink("loop", dir.path() / "loop");
  EXPECT_EQ(sysfs::ListDirectoryChecked(dir.path())->size(), 2U);
  EXPECT_TRUE(sysfs::ListDirectoryChecked(dir.path() / "missing")->empty());
  EXPECT_TRUE(sysfs::ListDirectoryChecked(dir.path() / "file")->empty());  // ENOTDIR
  const auto loop = sysfs::ListDirectoryChecked(dir.path() / "loop");
  ASSERT_FALSE(loop);
  EXPECT_EQ(loop.error(), ELOOP);
  EXPECT_TRUE(sysfs::ListDirectory(dir.path() / "loop").empty());
}

TEST(NameFilter, AnchoredIncludeExclude) {
  NameFilter all;
  EXPECT_TRUE(all.Allows("anything"));
  NameFilter filter("mlx5_.*|ens.*", "mlx5_1");
  EXPECT_TRUE(filter.Allows("mlx5_0"));
  EXPECT_FALSE(filter.Allows("mlx5_1"));
  EXPECT_FALSE(filter.Allows("xmlx5_0")) << "patterns match whole names";
  EXPECT_TRUE(filter.Allows("ens1f0"));
  EXPECT_TRUE(filter.Allows("ens1f0")) << "cached answer is the same";
  EXPECT_THROW(NameFilter("(", ""), std::regex_error);
}

}  // namespace
}  // namespace rdmascope
