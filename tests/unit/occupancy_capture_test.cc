// The occupancy collector under capture and replay (collectors/occupancy_capture.h): a stats
// directory of live, forged, stale and hostile files recorded over two samples, then replayed
// with the host's directory and /proc gone: the same expositions, refusal counters included;
// the capture took nothing from the host (no lock, no deletion), the replay touches neither the
// host nor the capture. A capture edited into hostile input refuses the file it spoils.
#include "collectors/occupancy_capture.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "collectors/occupancy.h"
#include "collectors/occupancy_facts.h"
#include "core/capture.h"
#include "core/metric_set.h"
#include "stats_file.h"
#include "unit/fixture_tree.h"
#include "unit/installed_session.h"
#include "unit/occupancy_fixture.h"

namespace rdmascope {
namespace {

namespace fs = std::filesystem;
using Installed = testing::InstalledSession;
using testing::Skipped;

std::string Collect(const OccupancyCollector& collector, CollectResult* result = nullptr) {
  MetricSet out;
  const CollectResult got = collector.Collect(out);
  if (result != nullptr) *result = got;
  return testing::Serialise(out.Take());
}

// Every file of a tree with its bytes and mode: a replay must leave a capture as it found it.
std::map<std::string, std::string> Snapshot(const fs::path& root) {
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    struct stat st {};
    ::lstat(entry.path().c_str(), &st);
    std::string value = std::to_string(st.st_mode) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
                        std::to_string(st.st_mtim.tv_nsec) + ":";
    if (S_ISREG(st.st_mode)) value += testing::ReadText(entry.path());
    files[fs::relative(entry.path(), root).string()] = value;
  }
  return files;
}

// Whether someone holds a read lock on the directory's .readers (what a library asks at exit).
bool ReaderLockHeld(const fs::path& dir) {
  const int fd = ::open((dir / OCC_READERS_FILE).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct flock probe {};
  probe.l_type = F_WRLCK;
  probe.l_whence = SEEK_SET;
  const bool held = fcntl(fd, F_OFD_GETLK, &probe) == 0 && probe.l_type == F_RDLCK;
  ::close(fd);
  return held;
}

// A host's stats directory and /proc, recorded over samples; `between` changes the host after
// each sample but the last.
struct Recorded {
  testing::SharedDir host;
  testing::TempDir out;
  std::vector<std::string> live;
  std::vector<std::string> details;

  fs::path dir() const { return out.path() / "cap"; }
  fs::path sample(int n) const { return dir() / ("samples/000" + std::to_string(n)); }
  fs::path in_sample(int n) const { return sample(n) / host.dir.relative_path(); }
  OccupancyOptions options() const { return {.dir = host.dir, .pid_walk_interval = {}}; }

  void Record(int samples, const std::function<void(int)>& between) {
    auto writer = capture::Writer::Create(dir(), false).value();
    {
      Installed session(
          capture::Session::Recording(capture::Layout("/sys", host.proc), writer.get()));
      ASSERT_TRUE(writer->BeginSample(1));
      OccupancyCollector collector(options(), host.proc);
      for (int n = 1; n <= samples; ++n) {
        if (n > 1) {
          ASSERT_TRUE(writer->BeginSample(static_cast<size_t>(n)));
        }
        CollectResult result;
        live.push_back(Collect(collector, &result));
        details.push_back(result.detail);
        ASSERT_TRUE(writer->CommitSample());
        if (n < samples) between(n);
      }
      ASSERT_TRUE(writer->WriteIndex("test", {"occupancy"}));
    }
  }

  // The replay's collections, one per sample (and `extra` more, the last sample repeating).
  std::vector<std::string> Replay(const fs::path& capture, size_t collections) const {
    auto reader = capture::Reader::Open(capture);
    EXPECT_TRUE(reader) << reader.error();
    Installed session(
        capture::Session::Replaying(capture::Layout("/sys", host.proc), std::move(*reader)));
    OccupancyCollector collector(options(), host.proc);
    std::vector<std::string> texts;
    for (size_t n = 0; n < collections; ++n) {
      session->NextSample();
      texts.push_back(Collect(collector));
    }
    return texts;
  }
};

// Two samples of a directory holding a process's live file, a forged claim on pid 1, a file of
// another owner, a FIFO, a file too large and one of a process that exits between the samples:
// the replay gives each sample's exposition exactly, series and refusal counters alike, and the
// third collection (the last sample again) does not serve the exited process's file twice.
TEST(OccupancyCapture, ReplayEqualsTheLiveCollections) {
  Recorded cap;
  testing::FakeProc proc(cap.host.proc);
  const auto real = testing::WriteStats(cap.host.dir, "a.occ", *testing::StatsFile(4242));
  auto exiting_file = testing::StatsFile(4250);
  exiting_file->cqs[0].expected = 9;
  const auto exiting = testing::WriteStats(cap.host.dir, "e.occ", *exiting_file);
  const auto forged = testing::WriteStats(cap.host.dir, "b.occ", *testing::StatsFile(1));
  const auto other = testing::WriteStats(cap.host.dir, "c.occ", *testing::StatsFile(4243));
  ASSERT_EQ(::mkfifo((cap.host.dir / "fifo.occ").c_str(), 0666), 0);
  testing::WriteStats(cap.host.dir, "big.occ", *testing::StatsFile(4242));
  ::truncate((cap.host.dir / "big.occ").c_str(), sizeof(occ_file) + 1);
  proc.AddProcess(4242, ::geteuid(), {real});
  proc.AddProcess(4250, ::geteuid(), {exiting});
  proc.AddProcess(1, ::geteuid(), {});
  proc.AddProcess(4243, ::geteuid() + 1, {other});
  int fds[] = {testing::LockStats(real), testing::LockStats(exiting), testing::LockStats(forged),
               testing::LockStats(other)};
  cap.Record(2, [&](int) {
    ::close(fds[1]);  // 4250 exits: its file is stale, its final figures served once
    fds[1] = -1;
  });
  ASSERT_EQ(cap.live.size(), 2U);
  // What was recorded is worth comparing: the live process, the exited one's final figures,
  // each refusal.
  for (const std::string& text : cap.live) {
    EXPECT_NE(text.find("rdma_cq_capacity_entries{device=\"mlx5_0\",pid=\"4242\""),
              std::string::npos)
        << text;
    EXPECT_EQ(text.find("pid=\"1\""), std::string::npos) << text;
  }
  EXPECT_NE(cap.live[1].find("pid=\"4250\""), std::string::npos) << cap.live[1];
  EXPECT_GE(Skipped(cap.live[1], "not_mapped"), 2);
  EXPECT_GE(Skipped(cap.live[1], "owner_mismatch"), 2);
  EXPECT_GE(Skipped(cap.live[1], "not_regular"), 2);
  EXPECT_GE(Skipped(cap.live[1], "too_large"), 2);
  // The capture took nothing from the host: every file left, no reader lock, no .readers.
  EXPECT_TRUE(fs::exists(exiting)) << "a capture deletes no stale file";
  EXPECT_FALSE(fs::exists(cap.host.dir / OCC_READERS_FILE));
  // The anchor's answer, not the process's layout: only the stats file's line of its maps.
  const std::string maps = testing::ReadText(cap.sample(1) / "proc/4242/maps");
  EXPECT_NE(maps.find(real.string()), std::string::npos) << maps;
  EXPECT_EQ(maps.find("/usr/bin/trainer"), std::string::npos) << maps;
  EXPECT_TRUE(fs::exists(cap.in_sample(1) / ("a.occ" + std::string(occupancy_facts::kSuffix))));

  // The host gone: its stats files and /proc moved away, an empty directory in their place.
  for (const int fd : fds) {
    if (fd >= 0) ::close(fd);
  }
  fs::rename(cap.host.dir, cap.host.tmp.path() / "stats-gone");
  fs::rename(cap.host.proc, cap.host.tmp.path() / "proc-gone");
  fs::create_directories(cap.host.dir);
  ::chmod(cap.host.dir.c_str(), 01777);
  const auto before = Snapshot(cap.dir());
  const auto replayed = cap.Replay(cap.dir(), 3);
  ASSERT_EQ(replayed.size(), 3U);
  EXPECT_EQ(replayed[0], cap.live[0]);
  EXPECT_EQ(replayed[1], cap.live[1]);
  EXPECT_EQ(replayed[2].find("pid=\"4250\""), std::string::npos) << "served once: " << replayed[2];
  EXPECT_EQ(Skipped(replayed[2], "stale_unanchored"), Skipped(replayed[1], "stale_unanchored"))
      << "passed over as the file a live exporter deleted, not refused as a stranger's";
  EXPECT_NE(replayed[2].find("pid=\"4242\""), std::string::npos) << replayed[2];
  // Nothing written or taken: the capture as it was, the host's directory still empty.
  EXPECT_EQ(Snapshot(cap.dir()), before);
  EXPECT_TRUE(fs::is_empty(cap.host.dir)) << "no .readers made on the replaying host";
  EXPECT_FALSE(ReaderLockHeld(cap.host.dir));
}

// A capture taken without the collector, or before it was recorded: the replay says the source
// is absent, as live does with no directory: no series of a process, no made-up figure.
TEST(OccupancyCapture, ACaptureWithoutTheDirectoryIsNoData) {
  testing::TempDir out;
  testing::TempDir host;
  const fs::path dir = host.path() / "absent";
  {
    auto writer = capture::Writer::Create(out.path() / "cap", false).value();
    ASSERT_TRUE(writer->BeginSample(1));
    ASSERT_TRUE(writer->CommitSample());
    ASSERT_TRUE(writer->WriteIndex("test", {}));
  }
  OccupancyCollector live({.dir = dir}, host.path());
  CollectResult live_result;
  const std::string live_text = Collect(live, &live_result);
  Installed session(capture::Session::Replaying(capture::Layout("/sys", host.path()),
                                                capture::Reader::Open(out.path() / "cap").value()));
  OccupancyCollector replay({.dir = dir}, host.path());
  session->NextSample();
  CollectResult result;
  const std::string text = Collect(replay, &result);
  EXPECT_TRUE(result.no_data);
  EXPECT_EQ(result.detail, live_result.detail);
  EXPECT_EQ(text, live_text);
  EXPECT_EQ(text.find("rdma_cq_"), std::string::npos) << text;
  EXPECT_FALSE(fs::exists(dir)) << "nothing made on the host";
}

// One live, anchored file recorded; then the capture edited into each kind of hostile input.
// Each spoils that file alone: its series are missing, the reason counted, within a bound of
// time; never a crash, a wait on a FIFO, a read past the bound or a link followed out.
class HostileCapture : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::FakeProc proc(cap_.host.proc);
    real_ = testing::WriteStats(cap_.host.dir, "a.occ", *testing::StatsFile(4242));
    proc.AddProcess(4242, ::geteuid(), {real_});
    const int fd = testing::LockStats(real_);
    cap_.Record(1, [](int) {});
    ::close(fd);
    ASSERT_NE(cap_.live[0].find("pid=\"4242\""), std::string::npos) << cap_.live[0];
  }
  fs::path Bytes() const { return cap_.in_sample(1) / "a.occ"; }
  fs::path Facts() const {
    return cap_.in_sample(1) / ("a.occ" + std::string(occupancy_facts::kSuffix));
  }
  // The replay of the edited capture: its exposition, which must not serve the process.
  std::string Replayed() {
    const auto start = std::chrono::steady_clock::now();
    const auto texts = cap_.Replay(cap_.dir(), 1);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
    EXPECT_EQ(texts[0].find("pid=\"4242\""), std::string::npos) << texts[0];
    return texts[0];
  }
  void EditFacts(const std::string& from, const std::string& to) {
    std::string text = testing::ReadText(Facts());
    const size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << text;
    text.replace(at, from.size(), to);
    fs::remove(Facts());
    std::ofstream(Facts()) << text;
  }
  Recorded cap_;
  fs::path real_;
};

TEST_F(HostileCapture, TruncatedStatsFile) {
  ASSERT_EQ(::truncate(Bytes().c_str(), 100), 0);
  EXPECT_EQ(Skipped(Replayed(), "short_read"), 1);
}

TEST_F(HostileCapture, StatsFileAFifo) {
  fs::remove(Bytes());
  ASSERT_EQ(::mkfifo(Bytes().c_str(), 0600), 0);
  EXPECT_EQ(Skipped(Replayed(), "not_regular"), 1);
}

TEST_F(HostileCapture, StatsFileALinkOut) {
  fs::remove(Bytes());
  fs::create_symlink(real_, Bytes());  // the host's very file, outside the capture
  EXPECT_EQ(Skipped(Replayed(), "open_failed"), 1);
}

TEST_F(HostileCapture, StatsFileOf10MiB) {
  ASSERT_EQ(::truncate(Bytes().c_str(), 10 << 20), 0);
  EXPECT_EQ(Skipped(Replayed(), "too_large"), 1);
}

TEST_F(HostileCapture, FactsClaimingASizeOf10MiB) {
  const std::string size = "\"size\": " + std::to_string(sizeof(occ_file));
  EditFacts(size, "\"size\": 10485760");  // lstat's
  EditFacts(size, "\"size\": 10485760");  // fstat's
  EXPECT_EQ(Skipped(Replayed(), "too_large"), 1);
}

TEST_F(HostileCapture, FactsMalformed) {
  fs::remove(Facts());
  std::ofstream(Facts()) << "{\"lstat\": {\"mode\": \"0100644\", \"uid\": -1";
  EXPECT_EQ(Skipped(Replayed(), "invalid"), 1);
}

TEST_F(HostileCapture, FactsOfAnotherShape) {
  EditFacts("\"mode\": \"0100", "\"mode\": \"0900");  // not octal
  EXPECT_EQ(Skipped(Replayed(), "invalid"), 1);
}

TEST_F(HostileCapture, FactsAFifo) {
  fs::remove(Facts());
  ASSERT_EQ(::mkfifo(Facts().c_str(), 0600), 0);
  EXPECT_EQ(Skipped(Replayed(), "invalid"), 1);
}

TEST_F(HostileCapture, FactsOf10MiB) {
  ASSERT_EQ(::truncate(Facts().c_str(), 10 << 20), 0);
  EXPECT_EQ(Skipped(Replayed(), "invalid"), 1);
}

TEST_F(HostileCapture, FactsAbsentBesideTheBytes) {
  fs::remove(Facts());
  EXPECT_EQ(Skipped(Replayed(), "invalid"), 1);
}

// Facts that lie are held to what the rest of the capture says, as live to what the kernel
// says: another owner than the process's uid, an inode its maps do not name, a FIFO opened as
// a file, a file said locked by nobody but never seen live.
TEST_F(HostileCapture, FactsLyingAboutTheOwner) {
  const std::string uid = "\"uid\": " + std::to_string(::geteuid());
  const std::string other = "\"uid\": " + std::to_string(::geteuid() + 7);
  EditFacts(uid, other);
  EditFacts(uid, other);
  EXPECT_EQ(Skipped(Replayed(), "owner_mismatch"), 1);
}

TEST_F(HostileCapture, FactsLyingAboutTheInode) {
  struct stat st {};
  ::stat(real_.c_str(), &st);
  const std::string ino = "\"ino\": " + std::to_string(st.st_ino);
  const std::string other = "\"ino\": " + std::to_string(st.st_ino + 1);
  EditFacts(ino, other);
  EditFacts(ino, other);
  EXPECT_EQ(Skipped(Replayed(), "not_mapped"), 1);
}

TEST_F(HostileCapture, FactsOpenedAFileTheirLstatSaysIsAFifo) {
  EditFacts("\"mode\": \"0100", "\"mode\": \"0010");  // lstat's: a FIFO
  EXPECT_EQ(Skipped(Replayed(), "not_regular"), 1);
}

TEST_F(HostileCapture, FactsSayingItsProcessExited) {
  EditFacts("\"held\": true", "\"held\": false");
  EXPECT_EQ(Skipped(Replayed(), "stale_unanchored"), 1);
}

TEST_F(HostileCapture, MapsMissingFromTheCapture) {
  fs::remove(cap_.sample(1) / "proc/4242/maps");
  EXPECT_EQ(Skipped(Replayed(), "process_not_found"), 1);
}

}  // namespace
}  // namespace rdmascope
