// The occupancy collector against files other users control (issue 37): the stats directory
// is world-writable, so a name ending in .occ may be a FIFO, a symlink, a directory, a file
// of any size, or a well-formed stats file naming someone else's process. Each is refused
// and counted (rdmascope_occupancy_files_skipped_total), never waited on, never believed.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>

#include "collectors/occupancy.h"
#include "collectors/occupancy_anchor.h"
#include "stats_file.h"
#include "sys/untrusted_file.h"
#include "unit/fixture_tree.h"
#include "unit/occupancy_fixture.h"

namespace rdmascope {
namespace {

namespace fs = std::filesystem;

using testing::FakeProc;
using testing::kOwnNs;
using testing::SharedDir;
using testing::Skipped;
using testing::StatsFile;

fs::path Write(const fs::path& dir, const std::string& name, const occ_file& file,
               size_t size = sizeof(occ_file)) {
  return testing::WriteStats(dir, name, file, size);
}

int Lock(const fs::path& path) {
  const int fd = testing::LockStats(path);
  EXPECT_GE(fd, 0);
  return fd;
}

std::string Collect(const OccupancyCollector& collector) {
  MetricSet out;
  collector.Collect(out);
  return testing::Serialise(out.Take());
}

TEST(OccupancyFiles, MapsNameTheFileByDeviceAndInode) {
  const std::string maps =
      "7f1c2a000000-7f1c2a06c000 rw-s 00000000 00:1a 8812 /run/rdmascope/1-2-3-0.occ\n"
      "7f1c2b000000-7f1c2b001000 r--p 00000000 103:02 8812 /usr/lib/libc.so.6\n";
  EXPECT_TRUE(MapsNameFile(maps, makedev(0, 0x1a), 8812));
  EXPECT_TRUE(MapsNameFile(maps, makedev(0x103, 2), 8812)) << "device numbers are hex";
  EXPECT_FALSE(MapsNameFile(maps, makedev(0, 0x1a), 8813));
  EXPECT_FALSE(MapsNameFile(maps, makedev(0, 0x1b), 8812));
  EXPECT_FALSE(MapsNameFile("garbage\n\n00:1a 8812\n", makedev(0, 0x1a), 8812));
}

TEST(OccupancyFiles, EffectiveAndFsUidFromStatus) {
  const auto uids = EffectiveAndFsUid("Name:\tx\nUid:\t1000\t0\t0\t2000\nGid:\t0\t0\t0\t0\n");
  ASSERT_TRUE(uids);
  EXPECT_EQ(uids->first, 0U);
  EXPECT_EQ(uids->second, 2000U);
  EXPECT_FALSE(EffectiveAndFsUid("Name:\tx\nUid:\t1000\t0\n"));
}

// Only a claim the kernel confirms is served: the named process lives, has the file's owner as
// its uid, and maps the file. A forged file naming root's process (pid 1 here) gives no series,
// so the workload collector never describes that pid.
TEST(OccupancyFiles, ClaimsAreAnchoredInProc) {
  SharedDir shared;
  FakeProc proc(shared.proc);
  const auto real = Write(shared.dir, "a.occ", *StatsFile(4242));
  const auto forged = Write(shared.dir, "b.occ", *StatsFile(1));
  const auto other_owner = Write(shared.dir, "c.occ", *StatsFile(4243));
  const auto nobody = Write(shared.dir, "d.occ", *StatsFile(99999));
  proc.AddProcess(4242, ::geteuid(), {real});
  proc.AddProcess(1, ::geteuid(), {});  // lives, same uid, does not map b.occ
  proc.AddProcess(4243, ::geteuid() + 1, {other_owner});
  const int fds[] = {Lock(real), Lock(forged), Lock(other_owner), Lock(nobody)};
  OccupancyCollector collector({.dir = shared.dir}, shared.proc);
  const std::string text = Collect(collector);
  EXPECT_NE(text.find("pid=\"4242\""), std::string::npos) << text;
  EXPECT_EQ(text.find("pid=\"1\""), std::string::npos) << text;
  EXPECT_EQ(text.find("pid=\"4243\""), std::string::npos) << text;
  EXPECT_EQ(text.find("pid=\"99999\""), std::string::npos) << text;
  EXPECT_EQ(Skipped(text, "not_mapped"), 1);
  EXPECT_EQ(Skipped(text, "owner_mismatch"), 1);
  EXPECT_EQ(Skipped(text, "process_not_found"), 1);
  EXPECT_TRUE(fs::exists(forged)) << "live (locked) files are not deleted";
  for (const int fd : fds) ::close(fd);
}

// A stale file (nobody holds its lock) names a process that is gone: nothing can confirm it
// then. Its final figures are served only when a collection confirmed it while it lived.
TEST(OccupancyFiles, StaleFilesServedOnlyIfAnchoredWhileLive) {
  SharedDir shared;
  FakeProc proc(shared.proc);
  const auto real = Write(shared.dir, "a.occ", *StatsFile(4242));
  proc.AddProcess(4242, ::geteuid(), {real});
  const int fd = Lock(real);
  OccupancyCollector collector({.dir = shared.dir}, shared.proc);
  EXPECT_NE(Collect(collector).find("pid=\"4242\""), std::string::npos);
  ::close(fd);                                                       // the process exits
  const auto forged = Write(shared.dir, "b.occ", *StatsFile(4244));  // never locked
  const std::string text = Collect(collector);
  EXPECT_NE(text.find("pid=\"4242\""), std::string::npos) << "final figures, served once";
  EXPECT_EQ(text.find("pid=\"4244\""), std::string::npos) << text;
  EXPECT_EQ(Skipped(text, "stale_unanchored"), 1);
  EXPECT_FALSE(fs::exists(real));
  EXPECT_FALSE(fs::exists(forged)) << "stale: deleted all the same";
}

// Names that are not regular files: never opened for reading (a FIFO's open would wait for a
// writer for good), counted. Returns at once.
TEST(OccupancyFiles, NonRegularFilesAreRefusedWithoutWaiting) {
  SharedDir shared;
  FakeProc proc(shared.proc);
  ASSERT_EQ(::mkfifo((shared.dir / "fifo.occ").c_str(), 0666), 0);
  fs::create_symlink("/etc/passwd", shared.dir / "link.occ");
  fs::create_directory(shared.dir / "dir.occ");
  auto big = StatsFile(4242);
  Write(shared.dir, "big.occ", *big);
  ::truncate((shared.dir / "big.occ").c_str(), sizeof(occ_file) + 1);
  int expected_not_regular = 3;
  if (::geteuid() == 0 &&
      ::mknod((shared.dir / "null.occ").c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0) {
    ++expected_not_regular;
  }
  const auto start = std::chrono::steady_clock::now();
  OccupancyCollector collector({.dir = shared.dir}, shared.proc);
  const std::string text = Collect(collector);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_EQ(Skipped(text, "not_regular"), expected_not_regular) << text;
  EXPECT_EQ(Skipped(text, "too_large"), 1) << text;
  EXPECT_TRUE(fs::is_symlink(shared.dir / "link.occ")) << "never followed, never deleted";
}

// One user's flood cannot push the others out: at most max_processes_per_uid of a uid's files
// are read, at most max_processes in all, the rest counted.
TEST(OccupancyFiles, CapsPerUidAndInAll) {
  SharedDir shared;
  FakeProc proc(shared.proc);
  for (int i = 0; i < 10; ++i) Write(shared.dir, "f" + std::to_string(i) + ".occ", *StatsFile(7));
  OccupancyCollector per_uid({.dir = shared.dir, .max_processes = 100, .max_processes_per_uid = 4},
                             shared.proc);
  std::string text = Collect(per_uid);
  EXPECT_EQ(Skipped(text, "over_uid_cap"), 6) << text;
  // The stale ones read were deleted: 6 are left.
  OccupancyCollector in_all({.dir = shared.dir, .max_processes = 2, .max_processes_per_uid = 32},
                            shared.proc);
  text = Collect(in_all);
  EXPECT_EQ(Skipped(text, "over_process_cap"), 4) << text;
}

// .readers is the exporter's: a FIFO there used to hang the constructor (open without
// O_NONBLOCK waits for a writer), a symlink would have been followed.
TEST(OccupancyFiles, ReadersFileReplacedWhenNotOwnRegularFile) {
  SharedDir shared;
  const auto readers = shared.dir / OCC_READERS_FILE;
  ASSERT_EQ(::mkfifo(readers.c_str(), 0666), 0);
  const auto start = std::chrono::steady_clock::now();
  {
    OccupancyCollector collector({.dir = shared.dir}, shared.proc);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
    EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(readers)));
  }
  fs::remove(readers);
  const auto target = shared.tmp.path() / "target";
  std::ofstream(target) << "keep";
  fs::create_symlink(target, readers);
  {
    OccupancyCollector collector({.dir = shared.dir}, shared.proc);
    EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(readers)));
  }
  EXPECT_EQ(testing::ReadText(target), "keep");
}

// A /proc walk for pids of other namespaces happens at most once per interval, however many
// files name pids that no process has.
TEST(OccupancyFiles, PidWalksAreRateLimited) {
  testing::TempDir tmp;
  FakeProc proc(tmp.path());
  PidTranslator pids(tmp.path(), std::chrono::hours(1));
  EXPECT_EQ(pids.ExporterPid(kOwnNs, 42), 42U) << "own namespace: no walk";
  EXPECT_EQ(pids.walks(), 0U);
  for (uint32_t pid = 1; pid < 1000; ++pid) EXPECT_FALSE(pids.ExporterPid(4026532000, pid));
  EXPECT_EQ(pids.walks(), 1U);
}

// The reader under the collector: a file cut short after it was opened (fstat said more) is a
// short read, an error for that file, never a fault (a shared mapping raised SIGBUS here).
TEST(UntrustedFile, RefusesWhatIsNotABoundedRegularFile) {
  testing::TempDir tmp;
  const int dir = ::open(tmp.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(dir, 0);
  std::ofstream(tmp.path() / "data") << std::string(8192, 'x');
  auto file = sys::OpenUntrusted(dir, "data", 1 << 20);
  ASSERT_TRUE(file);
  EXPECT_EQ(file->stat().st_size, 8192);
  EXPECT_NE(::fcntl(file->fd(), F_GETFL) & O_NONBLOCK, 0);
  ASSERT_EQ(::truncate((tmp.path() / "data").c_str(), 100), 0);
  std::vector<uint8_t> bytes;
  const auto read = file->ReadAll(bytes);
  ASSERT_FALSE(read);
  EXPECT_EQ(read.error(), sys::Refusal::kShortRead);
  EXPECT_EQ(bytes.size(), 100U);

  EXPECT_EQ(sys::OpenUntrusted(dir, "data", 99).error(), sys::Refusal::kTooLarge);
  fs::create_symlink(tmp.path() / "data", tmp.path() / "link");
  EXPECT_EQ(sys::OpenUntrusted(dir, "link", 1 << 20).error(), sys::Refusal::kNotRegular);
  ASSERT_EQ(::mkfifo((tmp.path() / "fifo").c_str(), 0600), 0);
  EXPECT_EQ(sys::OpenUntrusted(dir, "fifo", 1 << 20).error(), sys::Refusal::kNotRegular);
  EXPECT_EQ(sys::OpenUntrusted(dir, "../data", 1 << 20).error(), sys::Refusal::kOpenFailed);
  EXPECT_EQ(sys::OpenUntrusted(dir, "absent", 1 << 20).error(), sys::Refusal::kOpenFailed);
  ::close(dir);
}

}  // namespace
}  // namespace rdmascope
