#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <fstream>
#include <memory>
#include <vector>

#include "collectors/occupancy.h"
#include "stats_file.h"
#include "unit/fixture_tree.h"

namespace rdmascope {
namespace {

// A stats file as the preload library writes it.
std::unique_ptr<occ_file> File() {
  auto file = std::make_unique<occ_file>();
  std::memset(file.get(), 0, sizeof(occ_file));
  file->header.magic = OCC_MAGIC;
  file->header.version = OCC_VERSION;
  file->header.pid = 4242;
  file->header.start_ticks = 777;
  std::strcpy(file->header.comm, "trainer");
  file->header.max_cqs = OCC_MAX_CQS;
  file->header.max_srqs = OCC_MAX_SRQS;
  file->header.lost_cqs = 1;
  file->header.lost_qps = 2;
  occ_cq& cq = file->cqs[3];  // slots need not be contiguous
  cq.in_use = 1;
  cq.handle = 9;
  cq.entries = 255;
  std::strcpy(cq.device, "mlx5_0");
  // Each counter: the owner thread's word plus the other threads' word.
  cq.expected = 70;
  cq.expected_shared = 30;
  cq.polled = {.completed = 50,
               .empty_polls = 3,
               .nonempty_polls = 3,
               .polled_entries = 50,
               .requested_entries = 100};
  cq.polled_shared = {.completed = 10,
                      .empty_polls = 1,
                      .nonempty_polls = 3,
                      .polled_entries = 10,
                      .requested_entries = 60};
  cq.peak = 70;
  occ_cq& stale = file->cqs[5];  // completed read ahead of a stale expected
  stale.in_use = 1;
  stale.handle = 10;
  stale.expected = 5;
  stale.polled_shared.completed = 6;
  file->cqs[7].handle = 11;  // destroyed: not in use
  occ_srq& srq = file->srqs[0];
  srq.in_use = 1;
  srq.handle = 2;
  srq.max_wr = 4096;
  srq.limit = 512;
  std::strcpy(srq.device, "mlx5_0");
  srq.posted = 4000;
  srq.posted_shared = 1000;
  srq.consumed = 3000;
  srq.consumed_shared = 1000;
  // Message sizes and latency, in the shards of threads 1 and 40 and the shared one.
  file->header.sample_period = 64;
  file->shards[0].send.bytes = 3 * 2048;
  file->shards[0].send.buckets[11] = 3;  // (1024, 2048]
  file->shards[39].send.bytes = 2048 + 1;
  file->shards[39].send.buckets[11] = 1;
  file->shards[39].send.buckets[0] = 1;  // 0 or 1 byte
  file->shard_shared.send.bytes = 5ull << 32;
  file->shard_shared.send.buckets[32] = 1;  // above 2^31
  file->shards[0].recv.bytes = 50 * 512;
  file->shards[0].recv.buckets[9] = 50;
  file->shards[0].latency_sum_ns = 3000;
  file->shards[0].latency_buckets[5] = 1;  // (2^11, 2^12] ns
  file->shard_shared.latency_sum_ns = 2'000'000'000;
  file->shard_shared.latency_buckets[24] = 1;  // above 2^30 ns
  return file;
}

std::span<const uint8_t> Bytes(const occ_file& file) {
  return {reinterpret_cast<const uint8_t*>(&file), sizeof file};
}

TEST(OccupancyCollector, ParsesTheStatsFile) {
  const auto file = File();
  const auto process = ParseOccupancyFile(Bytes(*file));
  ASSERT_TRUE(process) << process.error();
  EXPECT_EQ(process->pid, 4242U);
  EXPECT_EQ(process->start_ticks, 777U);
  EXPECT_EQ(process->comm, "trainer");
  EXPECT_EQ(process->lost_qps, 2U);
  ASSERT_EQ(process->cqs.size(), 2U);
  EXPECT_EQ(process->cqs[0].outstanding, 40U);
  EXPECT_EQ(process->cqs[0].polls, 10U);
  EXPECT_EQ(process->cqs[0].empty_polls, 4U);
  EXPECT_EQ(process->cqs[0].polled_entries, 60U);
  EXPECT_EQ(process->cqs[0].requested_entries, 160U);
  EXPECT_EQ(process->cqs[1].outstanding, 0U) << "never negative";
  ASSERT_EQ(process->srqs.size(), 1U);
  EXPECT_EQ(process->srqs[0].posted, 1000U);
  EXPECT_EQ(process->send.count(), 6U) << "summed over the shards";
  EXPECT_EQ(process->send.buckets[11], 4U);
  EXPECT_EQ(process->send.bytes, 4 * 2048 + 1 + (5ull << 32));
  EXPECT_EQ(process->recv.count(), 50U);
  EXPECT_EQ(process->latency_buckets[5], 1U);
  EXPECT_EQ(process->latency_buckets[24], 1U);
  EXPECT_EQ(process->latency_sum_ns, 2'000'003'000U);
  EXPECT_EQ(process->sample_period, 64U);
}

TEST(OccupancyCollector, GoldenExposition) {
  const auto process = ParseOccupancyFile(Bytes(*File()));
  ASSERT_TRUE(process);
  MetricSet out;
  MapOccupancy({*process}, out);
  EXPECT_EQ(out.dropped_duplicates(), 0U);
  EXPECT_TRUE(testing::MatchesGolden(testing::Serialise(out.Take()), "occupancy.prom"));
}

// A library that did not count message sizes (RDMASCOPE_PRELOAD_MESSAGE_SIZES unset) says so in
// the header: no size series, rather than zeros that read as "nothing posted". A file of an
// earlier v3 library has 0 in that word (reserved then) and counted sizes always.
TEST(OccupancyCollector, MessageSizesAbsentWhenNotCounted) {
  auto file = File();
  file->header.sizes_off = 1;
  std::memset(file->shards, 0, sizeof file->shards);
  std::memset(&file->shard_shared, 0, sizeof file->shard_shared);
  const auto process = ParseOccupancyFile(Bytes(*file));
  ASSERT_TRUE(process) << process.error();
  EXPECT_FALSE(process->message_sizes);
  MetricSet out;
  MapOccupancy({*process}, out);
  const std::string text = testing::Serialise(out.Take());
  EXPECT_EQ(text.find("rdma_process_message_size_bytes"), std::string::npos) << text;
  EXPECT_EQ(text.find("rdma_process_posted_bytes_total"), std::string::npos);
  EXPECT_EQ(text.find("rdma_process_posted_work_requests_total"), std::string::npos);
  EXPECT_NE(text.find("rdma_cq_outstanding_entries"), std::string::npos) << text;

  const auto earlier = ParseOccupancyFile(Bytes(*File()));
  ASSERT_TRUE(earlier);
  EXPECT_TRUE(earlier->message_sizes);
}

TEST(OccupancyCollector, RejectsForeignFiles) {
  auto file = File();
  EXPECT_FALSE(ParseOccupancyFile(Bytes(*file).first(100))) << "short";
  file->header.version = OCC_VERSION + 1;
  const auto newer = ParseOccupancyFile(Bytes(*file));
  ASSERT_FALSE(newer);
  EXPECT_NE(newer.error().find("version"), std::string::npos);
  file->header.magic = 0;
  EXPECT_FALSE(ParseOccupancyFile(Bytes(*file))) << "half-written: magic comes last";
}

// A stats file in a directory, as the preload library leaves it.
std::filesystem::path WriteFile(const std::filesystem::path& dir, const std::string& name,
                                const occ_file& file, size_t size = sizeof(occ_file)) {
  const auto path = dir / name;
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(&file), static_cast<std::streamsize>(size));
  return path;
}

// The application's side of the liveness lock (preload/tables.c): an OFD write lock on the
// whole file, held for its life through its own open file description.
int HoldLock(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  struct flock lock {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  EXPECT_EQ(fcntl(fd, F_OFD_SETLK, &lock), 0);
  return fd;
}

// Liveness is the lock, not /proc: the pid in the file is one of another pid namespace (here
// none of the exporter's), which the old /proc/<pid>/stat check took for a dead process.
TEST(OccupancyCollector, LockedFilesAreLiveUnlockedOnesStale) {
  testing::TempDir dir;
  const auto live = WriteFile(dir.path(), "4026532999-1-777-0.occ", *File());
  auto other = File();
  other->header.pid = 4243;
  const auto stale = WriteFile(dir.path(), "4026532999-1-777-1.occ", *other);
  const auto creating = WriteFile(dir.path(), "4026532999-2-5-0.occ", *File(), 0);
  const int fd = HoldLock(live);
  OccupancyCollector collector({.dir = dir.path()}, dir.path() / "no-procfs");
  MetricSet out;
  const auto result = collector.Collect(out);
  EXPECT_FALSE(result.no_data) << result.detail;
  const auto text = testing::Serialise(out.Take());
  EXPECT_NE(text.find("pid=\"4242\""), std::string::npos) << text;
  EXPECT_NE(text.find("pid=\"4243\""), std::string::npos) << "final figures, served once";
  EXPECT_TRUE(std::filesystem::exists(live)) << "held: its process lives";
  EXPECT_FALSE(std::filesystem::exists(stale)) << "nobody holds it: stale, deleted";
  EXPECT_TRUE(std::filesystem::exists(creating)) << "not yet sized: being created, kept";
  ::close(fd);
  MetricSet after;
  EXPECT_FALSE(collector.Collect(after).no_data) << "its final figures";
  EXPECT_FALSE(std::filesystem::exists(live)) << "its process closed the lock: stale";
  MetricSet gone;
  EXPECT_TRUE(collector.Collect(gone).no_data) << "served once, then forgotten";
}

// A library of another version (here 2, before the profile shards: a shorter file) left its
// files: a stale one is deleted like any other, a live one is skipped and kept (the exporter
// used to skip both for good: files of the wrong size were never tested for liveness).
TEST(OccupancyCollector, OtherVersionFilesDeletedWhenStale) {
  testing::TempDir dir;
  auto old = File();
  old->header.version = 2;
  const size_t v2_size = offsetof(occ_file, shards);
  const auto stale = WriteFile(dir.path(), "4026532999-7-1-0.occ", *old, v2_size);
  const auto live = WriteFile(dir.path(), "4026532999-8-1-0.occ", *old, v2_size);
  const int fd = HoldLock(live);
  OccupancyCollector collector({.dir = dir.path()}, dir.path() / "no-procfs");
  MetricSet out;
  const auto result = collector.Collect(out);
  EXPECT_TRUE(result.no_data);
  EXPECT_NE(result.detail.find("1 unreadable"), std::string::npos) << result.detail;
  EXPECT_FALSE(std::filesystem::exists(stale)) << "nobody holds it: stale, deleted";
  EXPECT_TRUE(std::filesystem::exists(live)) << "held: its process lives";
  ::close(fd);
}

// A process's last interval counts: the library leaves its file at exit (stale: the exit
// dropped the lock), the next collection serves its final figures once, hands them to the
// finished-process observer (`rdmascope profile`), and deletes the file. Before, the library
// deleted the file at exit and serve never saw what was posted after its last scrape.
TEST(OccupancyCollector, StaleFileServedOnceAndHandedOver) {
  testing::TempDir dir;
  auto file = File();
  file->shards[0].send.bytes += 4096;  // posted after the last scrape the process lived for
  file->shards[0].send.buckets[12] += 1;
  const auto stale = WriteFile(dir.path(), "4026532999-7-1-0.occ", *file);
  OccupancyCollector collector({.dir = dir.path()}, dir.path() / "no-procfs");
  std::vector<OccupancyProcess> handed;
  collector.SetFinishedObserver([&handed](const OccupancyProcess& p) { handed.push_back(p); });
  MetricSet out;
  EXPECT_FALSE(collector.Collect(out).no_data);
  const std::string text = testing::Serialise(out.Take());
  EXPECT_NE(text.find("rdma_process_posted_bytes_total{pid=\"4242\",comm=\"trainer\","
                      "direction=\"send\"} 21474848769"),
            std::string::npos)
      << text;
  ASSERT_EQ(handed.size(), 1U);
  EXPECT_EQ(handed[0].pid, 4242U);
  EXPECT_EQ(handed[0].send.buckets[12], 1U);
  EXPECT_FALSE(std::filesystem::exists(stale)) << "read, then deleted";
  MetricSet again;
  EXPECT_TRUE(collector.Collect(again).no_data);
  EXPECT_EQ(handed.size(), 1U) << "handed over once";
}

// A process of a pid namespace the exporter cannot see (no process of its procfs is in it):
// its pid is that namespace's, and the same number in the exporter's procfs is another
// process. Its series say so (pid_ns), so that no collector after it looks the pid up as the
// exporter's (collectors/workload.cc), nor does `rdmascope profile`.
TEST(OccupancyCollector, APidOfAnUnseenNamespaceKeepsItsNamespace) {
  testing::TempDir dir;
  testing::TempDir procfs;
  std::filesystem::create_directories(procfs.path() / "self" / "ns");
  std::filesystem::create_symlink("pid:[4026531836]", procfs.path() / "self" / "ns" / "pid");
  auto file = File();
  file->header.pid_ns = 4026532999;
  WriteFile(dir.path(), "4026532999-4242-777-0.occ", *file);
  OccupancyCollector collector({.dir = dir.path()}, procfs.path());
  std::vector<OccupancyProcess> handed;
  collector.SetFinishedObserver([&handed](const OccupancyProcess& p) { handed.push_back(p); });
  MetricSet out;
  EXPECT_FALSE(collector.Collect(out).no_data);
  const std::string text = testing::Serialise(out.Take());
  EXPECT_NE(text.find("rdma_cq_outstanding_entries{device=\"mlx5_0\",pid=\"4242\",comm=\"trainer\","
                      "pid_ns=\"4026532999\",cq=\"9\"} 40"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("pid=\"4242\",comm=\"trainer\",direction"), std::string::npos)
      << "every series of the process carries its namespace: " << text;
  ASSERT_EQ(handed.size(), 1U);
  EXPECT_EQ(handed[0].pid_ns, 4026532999U);

  // The exporter's own namespace (or one it translated): the pid is the exporter's, no label.
  auto own = File();
  own->header.pid_ns = 4026531836;
  WriteFile(dir.path(), "4026531836-4242-777-0.occ", *own);
  MetricSet again;
  EXPECT_FALSE(collector.Collect(again).no_data);
  EXPECT_EQ(testing::Serialise(again.Take()).find("pid_ns"), std::string::npos);
}

// What the library's exit asks (preload/tables.c): does anyone hold a read lock on .readers?
bool ReaderLockHeld(const std::filesystem::path& readers) {
  const int fd = ::open(readers.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct flock probe {};
  probe.l_type = F_WRLCK;
  probe.l_whence = SEEK_SET;
  const bool held = fcntl(fd, F_OFD_GETLK, &probe) == 0 && probe.l_type == F_RDLCK;
  ::close(fd);
  return held;
}

// While a collector lives it holds .readers, so exiting libraries leave their final figures
// for it; the directory may appear after the collector (the first preloaded process makes it):
// the next collection takes the lock then. Gone with the collector: libraries delete their
// own files again.
TEST(OccupancyCollector, HoldsTheReaderLockWhileItLives) {
  testing::TempDir dir;
  const auto later = dir.path() / "later";
  {
    OccupancyCollector collector({.dir = dir.path()}, dir.path() / "no-procfs");
    EXPECT_TRUE(ReaderLockHeld(dir.path() / OCC_READERS_FILE));
    OccupancyCollector second({.dir = dir.path()}, dir.path() / "no-procfs");
    EXPECT_TRUE(ReaderLockHeld(dir.path() / OCC_READERS_FILE)) << "read locks share";

    OccupancyCollector waiting({.dir = later}, dir.path() / "no-procfs");
    EXPECT_FALSE(std::filesystem::exists(later / OCC_READERS_FILE));
    std::filesystem::create_directory(later);
    MetricSet out;
    waiting.Collect(out);
    EXPECT_TRUE(ReaderLockHeld(later / OCC_READERS_FILE));
  }
  EXPECT_FALSE(ReaderLockHeld(dir.path() / OCC_READERS_FILE));
  EXPECT_FALSE(ReaderLockHeld(later / OCC_READERS_FILE));
}

}  // namespace
}  // namespace rdmascope
