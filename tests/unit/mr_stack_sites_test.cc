// The call sites of registrations from captured user stacks (bpf/mr_stack_sites.*): the code
// ranges the probes hash return addresses with, the memory bound, and the two-walk cleanup.
#include "bpf/mr_stack_sites.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "bpf/mr_image_key.h"
#include "bpf/mr_probe.h"
#include "core/process_metrics.h"
#include "mr.h"

namespace rdmascope {
namespace {

constexpr char kMaps[] =
    "5581d0a00000-5581d0a01000 r--p 00000000 fd:01 131 /usr/bin/trainer\n"
    "5581d0a01000-5581d0a05000 r-xp 00001000 fd:01 131 /usr/bin/trainer\n"
    "5581d2000000-5581d2021000 rw-p 00000000 00:00 0 [heap]\n"
    "7f3a10000000-7f3a10200000 rw-p 00000000 00:00 0\n"
    "7f3a12028000-7f3a1217d000 r-xp 00028000 fd:01 2010 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
    "7f3a1217d000-7f3a121d5000 r--p 0017d000 fd:01 2010 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
    "7f3a12300000-7f3a12310000 r-xp 00002000 fd:01 3001 /usr/lib/libibverbs.so.1.14\n"
    "7f3a12310000-7f3a12318000 r-xp 00000000 00:00 0\n"  // JIT code right after: joined
    "7ffd1c5f0000-7ffd1c612000 rw-p 00000000 00:00 0 [stack]\n"
    "7ffd1c7f3000-7ffd1c7f5000 r-xp 00000000 00:00 0 [vdso]\n"
    "not a maps line\n"
    "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0 [vsyscall]\n";

TEST(MrStackSites, ExecutableRangesAreTheCodeMappingsSortedAndJoined) {
  const auto ranges = ExecutableRanges(kMaps, 64);
  const std::vector<std::pair<uint64_t, uint64_t>> want = {
      {0x5581d0a01000, 0x5581d0a05000},
      {0x7f3a12028000, 0x7f3a1217d000},
      {0x7f3a12300000, 0x7f3a12318000},
      {0x7ffd1c7f3000, 0x7ffd1c7f5000},
      {0xffffffffff600000, 0xffffffffff601000}};
  EXPECT_EQ(ranges, want);
}

TEST(MrStackSites, TooManyRangesJoinTheClosestNeighboursIntoASuperset) {
  const auto ranges = ExecutableRanges(kMaps, 3);
  ASSERT_EQ(ranges.size(), 3U);
  // libc and libibverbs are the closest pair (1.5 MiB apart), then those two and the vDSO
  // (837 GiB apart, against 45 TiB from the program to libc).
  EXPECT_EQ(ranges[0], (std::pair<uint64_t, uint64_t>{0x5581d0a01000, 0x5581d0a05000}));
  EXPECT_EQ(ranges[1], (std::pair<uint64_t, uint64_t>{0x7f3a12028000, 0x7ffd1c7f5000}));
  EXPECT_EQ(ranges[2], (std::pair<uint64_t, uint64_t>{0xffffffffff600000, 0xffffffffff601000}));
  EXPECT_TRUE(ExecutableRanges("", 64).empty());
  EXPECT_TRUE(ExecutableRanges("garbage\n\n-\nffff-0 r-xp\n", 64).empty());
}

// The join as it was (one scan of the gaps per join, O(n^2)): the O(n log n) one must pick
// the same gaps, ties to the lower address, on any layout.
std::vector<std::pair<uint64_t, uint64_t>> JoinByScans(
    std::vector<std::pair<uint64_t, uint64_t>> merged, size_t max_ranges) {
  while (max_ranges > 0 && merged.size() > max_ranges) {
    size_t closest = 0;
    for (size_t i = 1; i + 1 < merged.size(); ++i) {
      if (merged[i + 1].first - merged[i].second <
          merged[closest + 1].first - merged[closest].second) {
        closest = i;
      }
    }
    merged[closest].second = merged[closest + 1].second;
    merged.erase(merged.begin() + static_cast<std::ptrdiff_t>(closest) + 1);
  }
  return merged;
}

TEST(MrStackSites, JoiningTheSmallestGapsAtOnceMatchesJoiningOneByOne) {
  std::mt19937_64 random(37);
  for (int round = 0; round < 200; ++round) {
    std::string maps;
    std::vector<std::pair<uint64_t, uint64_t>> disjoint;
    uint64_t at = 0x400000;
    const size_t count = 1 + random() % 200;
    for (size_t i = 0; i < count; ++i) {
      at += 0x1000 * (1 + random() % (round % 2 ? 4 : 4096));  // many equal gaps half the time
      const uint64_t end = at + 0x1000 * (1 + random() % 16);
      char line[128];
      std::snprintf(line, sizeof line, "%llx-%llx r-xp 00000000 fd:01 %zu /lib%zu.so\n",
                    static_cast<unsigned long long>(at), static_cast<unsigned long long>(end), i,
                    i);
      maps += line;
      disjoint.emplace_back(at, end);
      at = end;
    }
    const size_t max_ranges = 1 + random() % 64;
    EXPECT_EQ(ExecutableRanges(maps, max_ranges),
              JoinByScans(ExecutableRanges(maps, 0), max_ranges))
        << "round " << round;
  }
}

// A process with 100,000 code mappings (the probes keep MR_CODE_RANGES): no quadratic join.
TEST(MrStackSites, ExecutableRangesOfAHugeMapsAreFast) {
  std::string maps;
  for (uint64_t i = 0; i < 100000; ++i) {
    char line[128];
    const uint64_t start = 0x10000000 + i * 0x3000 + (i % 7) * 0x1000;
    std::snprintf(line, sizeof line, "%llx-%llx r-xp 00000000 fd:01 1 /x\n",
                  static_cast<unsigned long long>(start),
                  static_cast<unsigned long long>(start + 0x1000));
    maps += line;
  }
  const auto start = std::chrono::steady_clock::now();
  const auto ranges = ExecutableRanges(maps, MR_CODE_RANGES);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(ranges.size(), static_cast<size_t>(MR_CODE_RANGES));
  // The quadratic join took about 10 s here; the sort about 20 ms.
  EXPECT_LT(took, std::chrono::seconds(1));
}

// This test process as the probes would key it (exec generation `exec_id`): its start time
// is the one /proc/self/stat holds, as the unwinder checks it.
sys::ImageKey SelfImage(uint32_t exec_id = 1) {
  std::ifstream stat("/proc/self/stat");
  std::stringstream text;
  text << stat.rdbuf();
  const auto ticks = ParseStartTicks(text.str());
  EXPECT_TRUE(ticks.has_value());
  return sys::ImageOfStartTicks(static_cast<uint32_t>(getpid()), ticks.value_or(0), exec_id);
}

// A sample as the ring buffer hands it over: the header and `bytes` of stack.
std::vector<uint8_t> Sample(const sys::ImageKey& image, uint64_t site, size_t bytes) {
  std::vector<uint8_t> out(offsetof(mr_stack_sample, data) + bytes);
  mr_stack_sample header{};
  header.tgid = image.tgid;
  header.exec_id = image.exec_id;
  header.proc_start_ns = image.start_ns;
  header.site = site;
  header.size = static_cast<uint32_t>(bytes);
  header.regs[16] = 0x1000;  // an IP no module maps
  header.regs[7] = 0x7ffd00000000;
  std::memcpy(out.data(), &header, offsetof(mr_stack_sample, data));
  return out;
}

TEST(MrStackSites, CopiesPastTheMemoryBoundAreDroppedAndCounted) {
  MrStackSites sites({.max_bytes = 10000}, "/proc", -1, -1);
  const auto big = Sample({.tgid = 1}, 7, 8192);
  sites.Add(big.data(), big.size());
  sites.Add(big.data(), big.size());  // 16 KiB > 10000: dropped
  const auto truncated = Sample({.tgid = 1}, 8, 64);
  sites.Add(truncated.data(), 20);  // shorter than a header: ignored
  const MrStackSitesStats stats = sites.stats();
  EXPECT_EQ(stats.pending_bytes, 8192U);
  EXPECT_EQ(stats.dropped_memory, 1U);
}

TEST(MrStackSites, SitesGoWhenUnreferencedAtTwoCollectionsOrWithTheirImage) {
  MrStackSites sites({}, "/proc", -1, -1);
  const sys::ImageKey image = SelfImage();
  for (const uint64_t site : {7, 8, 9}) {
    const auto sample = Sample(image, site, 256);
    sites.Add(sample.data(), sample.size());
  }
  sites.Process();  // garbage registers: the IP alone, but a site all the same
  ASSERT_TRUE(sites.Find(image, 7).has_value());
  EXPECT_EQ(sites.Find(image, 7)->pcs.front(), 0x1000U);
  EXPECT_EQ(sites.stats().sites, 3U);
  EXPECT_EQ(sites.stats().pending_bytes, 0U);

  sites.Collect({{image, 7}});  // 8 and 9 unreferenced once: kept
  EXPECT_EQ(sites.stats().sites, 3U);
  sites.Collect({{image, 7}, {image, 9}});  // 8 unreferenced twice: dropped
  EXPECT_FALSE(sites.Find(image, 8).has_value());
  EXPECT_TRUE(sites.Find(image, 9).has_value());
  sites.DropImages({image});
  EXPECT_EQ(sites.stats().sites, 0U);
  EXPECT_EQ(sites.stats().unwound_bytes, 0U);
}

TEST(MrStackSites, AWaitingCallerFindsItsSamplesUnwoundByTheStackThread) {
  // /debug/mr/stacks drains the ring then waits (WaitProcessed) while the stack thread
  // unwinds and symbolizes: the sample is unwound, with its frames, when the request looks.
  MrStackSites sites({}, "/proc", -1, -1);
  const sys::ImageKey image = SelfImage();
  std::atomic<bool> stop{false};
  std::thread poller([&] {
    while (!stop.load()) sites.Process();
  });
  int missing = 0;
  for (uint64_t site = 1; site <= 300; ++site) {
    const auto sample = Sample(image, site, 4096);
    sites.Add(sample.data(), sample.size());
    EXPECT_TRUE(sites.WaitProcessed(std::chrono::steady_clock::now() + std::chrono::seconds(10)));
    const auto found = sites.Find(image, site);
    if (!found || found->symbols.frames.size() < found->pcs.size()) ++missing;
  }
  stop = true;
  poller.join();
  EXPECT_EQ(missing, 0);
}

TEST(MrStackSites, AProcessThatIsGoneDropsItsSamples) {
  MrStackSites sites({}, "/proc", -1, -1);
  // Pid 0 never names a user process: gone.
  const auto sample = Sample({.tgid = 0, .exec_id = 1, .start_ns = 42}, 7, 256);
  sites.Add(sample.data(), sample.size());
  sites.Process();
  EXPECT_EQ(sites.stats().sites, 0U);
  EXPECT_EQ(sites.stats().dropped_gone, 1U);
  // This process under another start time: another process that had the pid, gone too.
  const sys::ImageKey self = SelfImage();
  const auto reused = Sample(
      {.tgid = self.tgid, .exec_id = 1, .start_ns = self.start_ns + 1000000000000ULL}, 7, 256);
  sites.Add(reused.data(), reused.size());
  sites.Process();
  EXPECT_EQ(sites.stats().sites, 0U);
  EXPECT_EQ(sites.stats().dropped_gone, 2U);
}

// An image that exec'd (the probes marked it ended) is gone for the stack thread: its waiting
// samples are dropped and counted, never unwound with the modules of the image that runs now;
// the image that runs now is unwound, and its sites are its own (the same site key of the two
// images is two sites).
TEST(MrStackSites, AnImageEndedByAnExecIsGoneAndTheNextIsItsOwn) {
  const sys::ImageKey old_image = SelfImage(1);
  const sys::ImageKey new_image = SelfImage(2);
  MrStackSites sites(
      {.image_current = [&](const sys::ImageKey& image) { return image == new_image; }}, "/proc",
      -1, -1);
  for (const sys::ImageKey& image : {old_image, new_image}) {
    const auto sample = Sample(image, 7, 256);
    sites.Add(sample.data(), sample.size());
  }
  sites.Process();
  EXPECT_FALSE(sites.Find(old_image, 7).has_value());
  ASSERT_TRUE(sites.Find(new_image, 7).has_value());
  EXPECT_EQ(sites.stats().dropped_gone, 1U);
  EXPECT_EQ(sites.stats().sites, 1U);
}

// The probes' image key and sys::ImageKey: one conversion, both ways, from every struct of the
// probes that names an image.
TEST(ImageKey, ConvertsFromTheProbesKeys) {
  const mr_proc_key key{.tgid = 4242, .exec_id = 3, .start_ns = 123456789012ULL};
  const sys::ImageKey image = ImageKeyOf(key);
  EXPECT_EQ(image, (sys::ImageKey{.tgid = 4242, .exec_id = 3, .start_ns = 123456789012ULL}));
  const mr_proc_key back = ProcKeyOf(image);
  EXPECT_EQ(std::memcmp(&back, &key, sizeof key), 0);

  const mr_region_key region_key{.tgid = 4242, .exec_id = 3, .mr = 0xdead};
  mr_region region{};
  region.proc_start_ns = 123456789012ULL;
  EXPECT_EQ(ImageKeyOf(region_key, region), image);
  mr_stack_sample sample{};
  sample.tgid = 4242;
  sample.exec_id = 3;
  sample.proc_start_ns = 123456789012ULL;
  EXPECT_EQ(ImageKeyOf(sample), image);
  const mr_exit_event event{.tgid = 4242, .exec_id = 3, .start_ns = 123456789012ULL, .comm = {}};
  EXPECT_EQ(ImageKeyOf(event), image);
  const mr_site_key site = SiteKeyOf(image, 77);
  EXPECT_EQ(site.tgid, 4242U);
  EXPECT_EQ(site.exec_id, 3U);
  EXPECT_EQ(site.start_ns, 123456789012ULL);
  EXPECT_EQ(site.site, 77U);

  // An exec is another image, a reused pid another image: ordered and hashed apart.
  const sys::ImageKey exec{.tgid = 4242, .exec_id = 4, .start_ns = 123456789012ULL};
  const sys::ImageKey reused{.tgid = 4242, .exec_id = 3, .start_ns = 223456789012ULL};
  EXPECT_NE(image, exec);
  EXPECT_LT(image, exec);
  EXPECT_LT(image, reused);
  EXPECT_LT((sys::ImageKey{.tgid = 4241, .exec_id = 9, .start_ns = 999999999999ULL}), image);
  const std::unordered_set<sys::ImageKey, sys::ImageKeyHash> set{image, exec, reused, image};
  EXPECT_EQ(set.size(), 3U);
  // The start time /proc/PID/stat prints: nsec_to_clock_t's truncating division.
  EXPECT_EQ(sys::StartTicksOf(image), 123456789012ULL / sys::NsPerClockTick());
  EXPECT_EQ(sys::ImageOfStartTicks(4242, 12345, 3).start_ns, 12345 * sys::NsPerClockTick());
  EXPECT_EQ(sys::StartTicksOf(sys::ImageOfStartTicks(4242, 12345)), 12345U);
}

// How a stack was found is typed; /debug/mr/stacks shows the names it always has.
TEST(MrStackOrigin, NamesAreStable) {
  EXPECT_STREQ(StackOriginName(MrStackOrigin::kNone), "");
  EXPECT_STREQ(StackOriginName(OriginOf(sys::UnwindMethod::kNone)), "none");
  EXPECT_STREQ(StackOriginName(OriginOf(sys::UnwindMethod::kDwarf)), "dwarf");
  EXPECT_STREQ(StackOriginName(OriginOf(sys::UnwindMethod::kFramePointer)), "frame-pointer");
  EXPECT_STREQ(StackOriginName(MrStackOrigin::kProbeFramePointers), "frame_pointer");
}

}  // namespace
}  // namespace rdmascope
