// sys/debug_files.h: the one list of a module's debug-file candidates (what the unwinder tries
// and all the worker's parent will open), and the first of them that opens.
#include "sys/debug_files.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

namespace rdmascope::sys {
namespace {

const std::vector<uint8_t> kId = {0xab, 0xcd, 0xef, 0x01};

TEST(DebugFileCandidates, BuildIdThenTheDebuglinkBesideTheFile) {
  EXPECT_EQ(DebugFileCandidates("/usr/lib/x86_64-linux-gnu/libfoo.so.1", kId, "libfoo.so.1.debug"),
            (std::vector<std::string>{
                "usr/lib/debug/.build-id/ab/cdef01.debug",
                "/usr/lib/debug/usr/lib/x86_64-linux-gnu/libfoo.so.1.debug",
                "/usr/lib/x86_64-linux-gnu/libfoo.so.1.debug",
                "/usr/lib/x86_64-linux-gnu/.debug/libfoo.so.1.debug",
            }));
  // No debuglink (an alternate file's question): the build id only.
  EXPECT_EQ(DebugFileCandidates("/bin/true", kId, ""),
            (std::vector<std::string>{"usr/lib/debug/.build-id/ab/cdef01.debug"}));
}

TEST(DebugFileCandidates, NoneWithoutABuildIdToCheck) {
  EXPECT_TRUE(DebugFileCandidates("/bin/true", {}, "true.debug").empty());
  EXPECT_TRUE(DebugFileCandidates("/bin/true", std::vector<uint8_t>{1, 2}, "true.debug").empty());
  EXPECT_TRUE(DebugFileCandidates("/bin/true", std::vector<uint8_t>(65, 1), "true.debug").empty());
  EXPECT_EQ(DebugFileCandidates("/bin/true", std::vector<uint8_t>(64, 1), "true.debug").size(),
            kMaxDebugFileCandidates);
}

// A process's bytes name the debuglink: only a plain file name is looked up, and only beside
// the mapped file; a path that is not absolute has no directory to look in.
TEST(DebugFileCandidates, NoTraversalByDebuglinkOrPath) {
  const std::vector<std::string> by_id = {"usr/lib/debug/.build-id/ab/cdef01.debug"};
  for (const std::string& link :
       std::vector<std::string>{"../../etc/shadow", "/etc/shadow", "a/b.debug", "..", ".",
                                "x\n.debug", std::string(256, 'a'), std::string("a\0b", 3)}) {
    EXPECT_EQ(DebugFileCandidates("/usr/lib/libfoo.so", kId, link), by_id) << link;
  }
  for (const std::string path : {"[heap]", "", "relative/libfoo.so", "libfoo.so"}) {
    EXPECT_EQ(DebugFileCandidates(path, kId, "libfoo.debug"), by_id) << path;
  }
  // Never more than the bound, whatever the input.
  EXPECT_LE(DebugFileCandidates(std::string(8192, '/'), std::vector<uint8_t>(64, 0xff),
                                std::string(255, 'z'))
                .size(),
            kMaxDebugFileCandidates);
}

TEST(IsDebugFileCandidate, ExactlyTheCandidatesOfAMappedFile) {
  const std::vector<MappedFile> mapped{{.path = "/opt/app/libapp.so"}};
  for (const std::string& candidate :
       DebugFileCandidates("/opt/app/libapp.so", kId, "libapp.debug")) {
    EXPECT_TRUE(IsDebugFileCandidate(candidate, mapped)) << candidate;
  }
  for (const char* other :
       {"/etc/passwd", "etc/passwd", "/opt/app/../../etc/passwd", "/opt/other/libapp.debug",
        "/usr/lib/debug/opt/other/x.debug", "usr/lib/debug/.build-id/ab/../../../etc/passwd",
        "usr/lib/debug/.build-id/ab/cdef01", "usr/lib/debug/.build-id/AB/CDEF01.debug",
        "usr/lib/debug/.build-id/ab/cd.debug", "/usr/lib/debug/.build-id/ab/cdef01.debug",
        "usr/lib/debug/.build-id/abcdef01.debug", "/opt/app/", "/opt/app/.debug/.."}) {
    EXPECT_FALSE(IsDebugFileCandidate(other, mapped)) << other;
  }
}

// Which paths were asked for; a file of `files` (ELF or not) for those it holds.
class FakeRoot final : public ProcessAccess {
 public:
  std::optional<uint64_t> StartTicks(uint32_t) override { return 1; }
  bool StillRunning(uint32_t, uint64_t) override { return true; }
  std::expected<std::string, int> Maps(const ImageKey&) override { return ""; }
  std::expected<OpenedFile, std::string> OpenMapping(uint32_t, const MappedFile&) override {
    return std::unexpected("none");
  }
  std::expected<OpenedFile, std::string> OpenInRoot(uint32_t, std::string_view path) override {
    asked.emplace_back(path);
    const auto it = files.find(std::string(path));
    if (it == files.end()) return std::unexpected("No such file or directory");
    OpenedFile file;
    file.fd = UniqueFd(memfd_create("debug", MFD_CLOEXEC));
    EXPECT_EQ(write(file.fd.get(), it->second.data(), it->second.size()),
              static_cast<ssize_t>(it->second.size()));
    fstat(file.fd.get(), &file.status);
    return file;
  }
  std::map<std::string, std::string> files;
  std::vector<std::string> asked;
};

TEST(OpenFirstDebugFile, TheFirstElfCandidateFromTheIndexGiven) {
  FakeRoot root;
  const DebugFileQuery query{
      .mapped_path = "/opt/app/libapp.so", .build_id = kId, .debuglink = "libapp.debug"};
  root.files["/opt/app/libapp.debug"] = "not elf";
  root.files["/opt/app/.debug/libapp.debug"] = std::string("\177ELF") + std::string(60, '\0');
  auto found = OpenFirstDebugFile(root, 7, query, 0);
  ASSERT_TRUE(found) << found.error();
  EXPECT_EQ(found->index, 3U);
  EXPECT_EQ(root.asked, DebugFileCandidates(query.mapped_path, kId, query.debuglink));
  // After the last: none left, nothing asked.
  root.asked.clear();
  auto none = OpenFirstDebugFile(root, 7, query, 4);
  EXPECT_FALSE(none);
  EXPECT_TRUE(root.asked.empty());
  EXPECT_FALSE(OpenFirstDebugFile(root, 7, query, 1u << 31));
  // Why none: each candidate with its reason, the one that is not ELF said so.
  root.files.erase("/opt/app/.debug/libapp.debug");
  auto missing = OpenFirstDebugFile(root, 7, query, 0);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().find("/opt/app/libapp.debug: not an ELF file"), std::string::npos)
      << missing.error();
  EXPECT_NE(missing.error().find("usr/lib/debug/.build-id/ab/cdef01.debug: No such file"),
            std::string::npos)
      << missing.error();
}

}  // namespace
}  // namespace rdmascope::sys
