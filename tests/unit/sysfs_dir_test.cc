#include "core/sysfs_dir.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <string>

#include "collectors/rdma_sysfs.h"
#include "core/name_filter.h"
#include "unit/fixture_tree.h"

namespace rdmascope {
namespace {

using sysfs::FileError;
using sysfs::SysfsDir;

void Write(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

TEST(SysfsDir, ReadsNumbersRelativeToTheDirectory) {
  testing::TempDir dir;
  Write(dir.path() / "port_rcv_data", "123456789\n");
  Write(dir.path() / "hex", "0x1f\n");
  Write(dir.path() / "max", "18446744073709551615\n");
  auto opened = SysfsDir::Open(dir.path());
  ASSERT_TRUE(opened);
  EXPECT_EQ(*opened->List(), (std::vector<std::string>{"hex", "max", "port_rcv_data"}));
  EXPECT_EQ(opened->ReadUnsigned("port_rcv_data"), 123456789U);
  EXPECT_EQ(opened->ReadUnsigned("hex"), 31U);
  EXPECT_EQ(opened->ReadUnsigned("max"), UINT64_MAX);
  // The buffer is reused: a second read of another file is not polluted by the first.
  EXPECT_EQ(*opened->Read("hex"), "0x1f");
  // Listing twice (the directory offset is shared with the duplicate) gives the same names.
  EXPECT_EQ(opened->List()->size(), 3U);
}

TEST(SysfsDir, MissingDirectoryIsItsErrno) {
  testing::TempDir dir;
  Write(dir.path() / "file", "1\n");
  const auto missing = SysfsDir::Open(dir.path() / "missing");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error(), ENOENT);
  const auto not_dir = SysfsDir::Open(dir.path() / "file");
  ASSERT_FALSE(not_dir);
  EXPECT_EQ(not_dir.error(), ENOTDIR);
}

// A file listed, then removed before its read (a port or device going away mid-scrape).
TEST(SysfsDir, VanishedFileIsEnoent) {
  testing::TempDir dir;
  Write(dir.path() / "gone", "5\n");
  auto opened = SysfsDir::Open(dir.path());
  ASSERT_TRUE(opened);
  ASSERT_EQ(opened->List()->size(), 1U);
  std::filesystem::remove(dir.path() / "gone");
  const auto value = opened->ReadUnsigned("gone");
  ASSERT_FALSE(value);
  EXPECT_EQ(value.error().kind, FileError::Kind::kErrno);
  EXPECT_EQ(value.error().error, ENOENT);
  EXPECT_EQ(value.error().Reason(), "No such file or directory");
}

// Short reads: an empty file, a FIFO with no writer (read answers 0 at once, no hang), a
// number cut short without its newline (still a number), a bare newline.
TEST(SysfsDir, ShortReads) {
  testing::TempDir dir;
  Write(dir.path() / "empty", "");
  Write(dir.path() / "newline", "\n");
  Write(dir.path() / "cut", "12");
  ASSERT_EQ(::mkfifo((dir.path() / "fifo").c_str(), 0600), 0);
  auto opened = SysfsDir::Open(dir.path());
  ASSERT_TRUE(opened);
  for (const char* name : {"empty", "newline", "fifo"}) {
    const auto value = opened->ReadUnsigned(name);
    ASSERT_FALSE(value) << name;
    EXPECT_EQ(value.error().kind, FileError::Kind::kEmpty) << name;
  }
  EXPECT_EQ(opened->ReadUnsigned("cut"), 12U);
}

TEST(SysfsDir, NonNumericPlaceholderAndDirectory) {
  testing::TempDir dir;
  Write(dir.path() / "word", "abc\n");
  Write(dir.path() / "negative", "-1\n");
  Write(dir.path() / "overflow", "18446744073709551616\n");
  Write(dir.path() / "na", "N/A (no PMA)\n");
  std::filesystem::create_directory(dir.path() / "subdir");
  auto opened = SysfsDir::Open(dir.path());
  ASSERT_TRUE(opened);
  for (const char* name : {"word", "negative", "overflow"}) {
    const auto value = opened->ReadUnsigned(name);
    ASSERT_FALSE(value) << name;
    EXPECT_EQ(value.error().kind, FileError::Kind::kNotNumeric) << name;
    EXPECT_EQ(value.error().Reason(), "not a number");
  }
  const auto na = opened->ReadUnsigned("na");
  ASSERT_FALSE(na);
  EXPECT_EQ(na.error().kind, FileError::Kind::kPlaceholder);
  const auto subdir = opened->ReadUnsigned("subdir");
  ASSERT_FALSE(subdir);
  EXPECT_EQ(subdir.error().kind, FileError::Kind::kErrno);
  EXPECT_EQ(subdir.error().error, EISDIR);
}

// One page is an attribute; a byte more is not, whatever it holds (a stray large file).
TEST(SysfsDir, HugeFileIsRefused) {
  testing::TempDir dir;
  Write(dir.path() / "page", std::string(4095, ' ') + "7");
  Write(dir.path() / "huge", std::string(4096, ' ') + "7");
  Write(dir.path() / "megabyte", std::string(1 << 20, '9'));
  auto opened = SysfsDir::Open(dir.path());
  ASSERT_TRUE(opened);
  EXPECT_EQ(opened->ReadUnsigned("page"), 7U);
  for (const char* name : {"huge", "megabyte"}) {
    const auto value = opened->ReadUnsigned(name);
    ASSERT_FALSE(value) << name;
    EXPECT_EQ(value.error().kind, FileError::Kind::kTooLarge) << name;
  }
}

// The collector's reader: unreadable files are missing series, the others all there.
TEST(SysfsDir, RdmaCounterDirsKeepReadableFilesOnly) {
  testing::TempDir dir;
  const auto port = dir.path() / "class/infiniband/mlx5_0/ports/1";
  std::filesystem::create_directories(port / "counters");
  std::filesystem::create_directories(port / "hw_counters");
  Write(port / "counters/port_rcv_data", "10\n");
  Write(port / "counters/port_xmit_data", "N/A (no PMA)\n");
  Write(port / "hw_counters/out_of_buffer", "3\n");
  Write(port / "hw_counters/lifespan", "10\n");
  Write(port / "hw_counters/bogus", "x\n");
  Write(port / "hw_counters/huge", std::string(5000, '1'));
  const auto devices = ReadRdmaDevices(dir.path(), NameFilter());
  ASSERT_EQ(devices.size(), 1U);
  ASSERT_EQ(devices[0].ports.size(), 1U);
  using Counters = std::vector<std::pair<std::string, uint64_t>>;
  EXPECT_EQ(devices[0].ports[0].counters, (Counters{{"port_rcv_data", 10}}));
  EXPECT_EQ(devices[0].ports[0].hw_counters, (Counters{{"out_of_buffer", 3}}));
  EXPECT_TRUE(devices[0].hw_counters.empty());  // no device-level hw_counters/ directory
}

}  // namespace
}  // namespace rdmascope
