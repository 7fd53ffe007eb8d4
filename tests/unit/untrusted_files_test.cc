// sys/untrusted_files.h and sys/elf_checks.h: the path checks that keep a process's names (maps
// paths, debuglinks, build ids) from steering the exporter's opens, on fixture trees.
#include "sys/untrusted_files.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "sys/elf_checks.h"
#include "unit/fixture_tree.h"

namespace rdmascope::sys {
namespace {

void Write(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

std::string Read(const OpenedFile& file) {
  std::string text(static_cast<size_t>(file.status.st_size), '\0');
  EXPECT_EQ(pread(file.fd.get(), text.data(), text.size(), 0), static_cast<ssize_t>(text.size()));
  return text;
}

TEST(ParseMappedFiles, FileLinesOnly) {
  const std::string maps =
      "55d0c0a00000-55d0c0a02000 r--p 00000000 fd:01 1234 /usr/bin/prog\n"
      "55d0c0a02000-55d0c0a05000 r-xp 00002000 fd:01 1234 /usr/bin/prog\n"
      "7f0000000000-7f0000021000 rw-p 00000000 00:00 0 \n"
      "7ffd1000-7ffd2000 rw-p 00000000 00:00 0                          [stack]\n"
      "7f1000000000-7f1000001000 r-xp 00001000 103:02 99 /opt/my dir/lib x.so (deleted)\n"
      "garbage line\n"
      "zz-7f r-xp 0 08:01 1 /bad/range\n";
  const std::vector<MappedFile> files = ParseMappedFiles(maps);
  ASSERT_EQ(files.size(), 3U);
  EXPECT_EQ(files[0].start, 0x55d0c0a00000U);
  EXPECT_EQ(files[1].offset, 0x2000U);
  EXPECT_EQ(files[1].device, makedev(0xfd, 0x01));
  EXPECT_EQ(files[1].inode, 1234U);
  EXPECT_EQ(files[1].path, "/usr/bin/prog");
  EXPECT_EQ(files[2].device, makedev(0x103, 0x02));
  EXPECT_EQ(files[2].path, "/opt/my dir/lib x.so (deleted)");
}

TEST(IsPlainDebuglinkName, OnlyAFileName) {
  EXPECT_TRUE(IsPlainDebuglinkName("libfoo.so.1.debug"));
  EXPECT_TRUE(IsPlainDebuglinkName("...debug"));
  for (const char* name : {"", ".", "..", "../fifo", "../../dev/watchdog", "/etc/shadow",
                           "a/b.debug", "x\ny", "tab\there", "del\x7f"}) {
    EXPECT_FALSE(IsPlainDebuglinkName(name)) << name;
  }
  EXPECT_FALSE(IsPlainDebuglinkName(std::string(256, 'a')));
  EXPECT_TRUE(IsPlainDebuglinkName(std::string(255, 'a')));
}

TEST(BuildIdDebugPath, TheBuildIdDirectory) {
  const std::vector<uint8_t> id = {0xab, 0xcd, 0xef, 0x01};
  EXPECT_EQ(BuildIdDebugPath(id), "usr/lib/debug/.build-id/ab/cdef01.debug");
  EXPECT_EQ(BuildIdDebugPath(std::vector<uint8_t>{1, 2}), std::nullopt);
  EXPECT_EQ(BuildIdDebugPath(std::vector<uint8_t>(65, 1)), std::nullopt);
  EXPECT_TRUE(BuildIdDebugPath(std::vector<uint8_t>(64, 1)).has_value());
}

class RootTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_path_ = dir_.path() / "root";
    Write(root_path_ / "etc" / "target", "inside");
    // What a symlink in a container would reach in the exporter's namespace.
    Write(dir_.path() / "etc" / "target", "OUTSIDE");
    root_ = UniqueFd(open(root_path_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(root_.valid());
  }

  testing::TempDir dir_;
  std::filesystem::path root_path_;
  UniqueFd root_;
};

// Absolute and relative symlinks, and "..", resolve inside the root, never above it.
TEST_F(RootTest, SymlinksStayInsideTheRoot) {
  std::filesystem::create_symlink("/etc/target", root_path_ / "absolute");
  std::filesystem::create_symlink("../../../../etc/target", root_path_ / "climbing");
  for (const char* path :
       {"/etc/target", "etc/target", "absolute", "climbing", "/../../etc/target"}) {
    auto file = OpenInRoot(root_.get(), path);
    ASSERT_TRUE(file) << path << ": " << file.error();
    EXPECT_EQ(Read(*file), "inside") << path;
  }
}

// A FIFO, a device, a directory, an empty or oversized file: refused without opening them
// for reading (O_PATH first: a FIFO with no writer would block a plain open).
TEST_F(RootTest, OnlyBoundedRegularFiles) {
  ASSERT_EQ(mkfifo((root_path_ / "fifo").c_str(), 0600), 0);
  std::filesystem::create_symlink("../fifo", root_path_ / "etc" / "link_to_fifo");
  std::filesystem::create_directories(root_path_ / "dev");
  std::filesystem::create_symlink("/dev/null", root_path_ / "dev" / "null_link");
  Write(root_path_ / "empty", "");
  for (const char* path : {"fifo", "etc/link_to_fifo", "etc", "empty", "missing"}) {
    EXPECT_FALSE(OpenInRoot(root_.get(), path)) << path;
  }
  // /dev/null of the exporter is not reached: the link resolves to ROOT/dev/null (missing).
  EXPECT_FALSE(OpenInRoot(root_.get(), "dev/null_link"));
  EXPECT_FALSE(OpenInRoot(root_.get(), "etc/target", /*max_bytes=*/3));
  // Magic links (/proc/self/...) are not followed inside a root either.
  const UniqueFd host(open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  EXPECT_FALSE(OpenInRoot(host.get(), "/proc/self/exe"));
}

// A mapping opened through a fake procfs (no map_files there): PID/root and the maps path,
// device and inode checked.
TEST_F(RootTest, AMappingMustBeTheMappedInode) {
  const std::filesystem::path procfs = dir_.path() / "proc";
  std::filesystem::create_directories(procfs / "77");
  std::filesystem::create_directory_symlink(root_path_, procfs / "77" / "root");
  struct stat status {};
  ASSERT_EQ(stat((root_path_ / "etc" / "target").c_str(), &status), 0);
  MappedFile mapping{.start = 0x1000,
                     .end = 0x2000,
                     .offset = 0,
                     .device = status.st_dev,
                     .inode = status.st_ino,
                     .path = "/etc/target"};
  auto file = OpenMappedFile(procfs, 77, mapping);
  ASSERT_TRUE(file) << file.error();
  EXPECT_EQ(Read(*file), "inside");
  mapping.inode += 1;
  file = OpenMappedFile(procfs, 77, mapping);
  ASSERT_FALSE(file);
  EXPECT_NE(file.error().find("not the mapped file"), std::string::npos) << file.error();
  // A symlink at the end of the maps path is not followed (the kernel writes resolved paths).
  std::filesystem::create_symlink("/etc/target", root_path_ / "lib.so");
  mapping.inode -= 1;
  mapping.path = "/lib.so";
  EXPECT_FALSE(OpenMappedFile(procfs, 77, mapping));
  EXPECT_FALSE(OpenMappedFile(procfs, 78, mapping));  // no such process
}

TEST(AbbrevsNameDwo, FindsTheDwoAttributes) {
  // code 1, DW_TAG_compile_unit, children yes, DW_AT_producer/DW_FORM_strp, end; table end.
  const std::vector<uint8_t> plain = {1, 0x11, 1, 0x25, 0x0e, 0, 0, 0};
  EXPECT_FALSE(AbbrevsNameDwo(plain.data(), plain.size()));
  const std::vector<uint8_t> dwo = {1, 0x11, 1, 0x25, 0x0e, 0x76, 0x1f, 0, 0, 0};
  EXPECT_TRUE(AbbrevsNameDwo(dwo.data(), dwo.size()));
  // DW_AT_GNU_dwo_name (0x2130) as ULEB128: b0 42.
  const std::vector<uint8_t> gnu = {1, 0x11, 1, 0xb0, 0x42, 0x08, 0, 0, 0};
  EXPECT_TRUE(AbbrevsNameDwo(gnu.data(), gnu.size()));
  // DW_FORM_implicit_const carries a value: skipped as such, not read as an attribute.
  const std::vector<uint8_t> implicit = {1, 0x2e, 0, 0x3a, 0x21, 0x76, 0, 0, 0};
  EXPECT_FALSE(AbbrevsNameDwo(implicit.data(), implicit.size()));
  // Cut short: counted as naming one (refused rather than guessed).
  const std::vector<uint8_t> cut = {1, 0x11, 1, 0x25};
  EXPECT_TRUE(AbbrevsNameDwo(cut.data(), cut.size()));
  const std::vector<uint8_t> endless = {1,    0x11, 1,    0xff, 0xff, 0xff, 0xff,
                                        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  EXPECT_TRUE(AbbrevsNameDwo(endless.data(), endless.size()));
}

}  // namespace
}  // namespace rdmascope::sys
