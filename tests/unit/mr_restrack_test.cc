// Regions registered before the MR probes attached, seeded from restrack MR dumps and
// followed by key (collectors/mr_restrack.*). The dumps are tests/fixtures/restrack/
// mr_dumps.json, built into netlink messages as drivers/infiniband/core/nldev.c builds them
// and parsed by the exporter's own parser.
#include "collectors/mr_restrack.h"

#include <gtest/gtest.h>
#include <libmnl/libmnl.h>
#include <rdma/rdma_netlink.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "collectors/mr.h"
#include "unit/fixture_tree.h"

namespace rdmascope {
namespace {

using sys::RdmaDeviceResources;
using sys::RdmaResourceKind;

constexpr uint32_t kSeq = 9;

nlohmann::json Fixture() {
  std::ifstream in(testing::FixturePath("restrack/mr_dumps.json"));
  return nlohmann::json::parse(in);
}

// One moment's dump: per device, the RES_MR_GET message nldev.c's res_get_common_dumpit
// sends (fill_nldev_handle, then a RES_MR table of fill_res_mr_entry nests), parsed.
std::vector<RdmaDeviceResources> Dump(const std::string& moment) {
  const nlohmann::json fixture = Fixture();
  std::vector<RdmaDeviceResources> devices;
  for (const auto& [name, index] : fixture.at("devices").items()) {
    alignas(8) static char buf[16384];
    nlmsghdr* m = mnl_nlmsg_put_header(buf);
    m->nlmsg_type = RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_RES_MR_GET);
    m->nlmsg_flags = NLM_F_MULTI;
    m->nlmsg_seq = kSeq;
    mnl_attr_put_u32(m, RDMA_NLDEV_ATTR_DEV_INDEX, index.get<uint32_t>());
    mnl_attr_put_strz(m, RDMA_NLDEV_ATTR_DEV_NAME, name.c_str());
    nlattr* table = mnl_attr_nest_start(m, RDMA_NLDEV_ATTR_RES_MR);
    for (const auto& mr : fixture.at(moment)) {
      if (mr.at("ifname") != name) continue;
      nlattr* entry = mnl_attr_nest_start(m, RDMA_NLDEV_ATTR_RES_MR_ENTRY);
      if (mr.contains("rkey")) mnl_attr_put_u32(m, RDMA_NLDEV_ATTR_RES_RKEY, mr.at("rkey"));
      if (mr.contains("lkey")) mnl_attr_put_u32(m, RDMA_NLDEV_ATTR_RES_LKEY, mr.at("lkey"));
      mnl_attr_put_u64(m, RDMA_NLDEV_ATTR_RES_MRLEN, mr.at("mrlen").get<uint64_t>());
      mnl_attr_put_u32(m, RDMA_NLDEV_ATTR_RES_MRN, mr.at("mrn"));
      if (mr.contains("pdn")) mnl_attr_put_u32(m, RDMA_NLDEV_ATTR_RES_PDN, mr.at("pdn"));
      if (mr.contains("pid")) {
        mnl_attr_put_u32(m, RDMA_NLDEV_ATTR_RES_PID, mr.at("pid"));
      } else if (mr.value("comm", "").starts_with("[")) {
        const std::string comm = mr.at("comm");  // rdma prints a kernel owner as [name]
        mnl_attr_put_strz(m, RDMA_NLDEV_ATTR_RES_KERN_NAME,
                          comm.substr(1, comm.size() - 2).c_str());
      }
      mnl_attr_nest_end(m, entry);
    }
    mnl_attr_nest_end(m, table);
    RdmaDeviceResources device{.index = index.get<uint32_t>(), .name = name};
    EXPECT_EQ(
        sys::ParseResourceReply(buf, m->nlmsg_len, kSeq, RdmaResourceKind::kMr, device.entries), 1);
    devices.push_back(std::move(device));
  }
  return devices;
}

std::map<uint32_t, SeededProcess> ByPid(const RestrackMrSeed& seed) {
  std::map<uint32_t, SeededProcess> out;
  for (const SeededProcess& proc : seed.ByProcess()) out[proc.pid] = proc;
  return out;
}

constexpr int64_t kTrainerBytes = 65536 + 65536 + 2097152;

TEST(MrRestrack, SeedsTheUserRegionsOfEachProcess) {
  const RestrackMrSeed seed(Dump("before_attach"));
  const auto by_pid = ByPid(seed);
  // The kernel's MR (ib_core) and the one of an exiting process (no pid) are not seeded.
  EXPECT_EQ(seed.size(), 5U);
  ASSERT_EQ(by_pid.size(), 2U);
  const SeededProcess& trainer = by_pid.at(4242);
  EXPECT_EQ(trainer.regions, 4);
  EXPECT_EQ(trainer.bytes, kTrainerBytes) << "the implicit ODP region is in no byte sum";
  EXPECT_EQ(trainer.implicit_odp, 1);
  EXPECT_EQ(by_pid.at(5151).regions, 1);
  EXPECT_EQ(by_pid.at(5151).bytes, 4096);
}

TEST(MrRestrack, FollowsDeregistrationsByKeyAndNeverAddsLaterRegions) {
  RestrackMrSeed seed(Dump("before_attach"));
  const RestrackMrSeed::Follow follow = seed.FollowDump(Dump("after_dereg"));
  EXPECT_FALSE(follow.unknown);
  EXPECT_EQ(follow.dropped, 1U) << "mrn 1 was deregistered";
  const auto by_pid = ByPid(seed);
  const SeededProcess& trainer = by_pid.at(4242);
  // mrn 11 was registered after the probes attached: theirs to count, not the seed's.
  EXPECT_EQ(trainer.regions, 3);
  EXPECT_EQ(trainer.bytes, 131072 + 2097152) << "mrn 2 re-registered in place at 128 KiB";
  EXPECT_EQ(by_pid.at(5151).regions, 1);
}

TEST(MrRestrack, ExitingOwnersAndReusedKeysLoseTheirRegions) {
  RestrackMrSeed seed(Dump("before_attach"));
  seed.FollowDump(Dump("after_dereg"));
  // trainer exits: mrn 3 and 4 gone, mrn 2 listed without a pid while the kernel tears it
  // down; mrn 7 listed under another pid: not server's region any more.
  const RestrackMrSeed::Follow follow = seed.FollowDump(Dump("trainer_exiting_mrn_wrapped"));
  EXPECT_EQ(follow.dropped, 4U);
  EXPECT_TRUE(seed.empty());
  EXPECT_TRUE(seed.ByProcess().empty());
}

TEST(MrRestrack, ADeviceThatCannotListItsRegionsDropsNothing) {
  RestrackMrSeed seed(Dump("before_attach"));
  std::vector<RdmaDeviceResources> later = Dump("after_dereg");
  later[0].entries.clear();
  later[0].unlisted.push_back(RdmaResourceKind::kMr);
  later[0].errors.push_back("mr: Resource temporarily unavailable");
  const RestrackMrSeed::Follow follow = seed.FollowDump(later);
  EXPECT_TRUE(follow.unknown);
  EXPECT_EQ(follow.dropped, 0U);
  EXPECT_EQ(seed.size(), 5U);
}

TEST(MrRestrack, AnUnregisteredDeviceTakesItsRegionsAlong) {
  RestrackMrSeed seed(Dump("before_attach"));
  std::vector<RdmaDeviceResources> later = Dump("before_attach");
  std::erase_if(later, [](const RdmaDeviceResources& d) { return d.name == "mlx5_0"; });
  EXPECT_EQ(seed.FollowDump(later).dropped, 1U);
  EXPECT_FALSE(ByPid(seed).contains(5151));
  EXPECT_EQ(ByPid(seed).at(4242).regions, 4);
}

// The probes' snapshot: trainer registered mrn 11 (8 KiB) after they attached; pid 7000 is a
// process only they know.
MrSnapshot ProbeSnapshot() {
  MrSnapshot snapshot;
  snapshot.processes.push_back({.pid = 4242,
                                .comm = "trainer",
                                .registrations = 1,
                                .outstanding_regions = 1,
                                .outstanding_bytes = 8192});
  snapshot.processes.push_back({.pid = 7000,
                                .comm = "job",
                                .registrations = 2,
                                .outstanding_regions = 2,
                                .outstanding_bytes = 2 * 4096});
  return snapshot;
}

std::string CommOf(uint32_t pid) { return pid == 5151 ? "server" : ""; }

TEST(MrRestrack, SeededRegionsAddToTheProbesOutstandingFigures) {
  RestrackMrSeed seed(Dump("before_attach"));
  seed.FollowDump(Dump("after_dereg"));
  MrSnapshot snapshot = ProbeSnapshot();
  AddSeeded(seed.ByProcess(), false, CommOf, snapshot);
  ASSERT_EQ(snapshot.processes.size(), 3U);
  const MrProcess& trainer = snapshot.processes[0];
  EXPECT_EQ(trainer.pid, 4242U);
  EXPECT_EQ(trainer.outstanding_regions, 1 + 3);
  EXPECT_EQ(trainer.outstanding_bytes, 8192 + 131072 + 2097152);
  EXPECT_EQ(trainer.outstanding_implicit_odp, 1);
  EXPECT_EQ(trainer.registrations, 1U) << "registrations count from the exporter's start";
  EXPECT_EQ(trainer.leak_suspect_regions, 0U);
  const MrProcess& server = snapshot.processes[1];
  EXPECT_EQ(server.pid, 5151U) << "added in pid order";
  EXPECT_EQ(server.comm, "server");
  EXPECT_EQ(server.outstanding_regions, 1);
  EXPECT_EQ(server.outstanding_bytes, 4096);
  EXPECT_EQ(server.registrations, 0U);
  EXPECT_EQ(server.deregistrations, 0U);
  EXPECT_EQ(snapshot.processes[2].outstanding_regions, 2) << "a probe-only process unchanged";

  // As series: the seeded-only process has its own.
  MetricSet out;
  MapMrSnapshot(snapshot, out);
  std::optional<double> server_bytes;
  for (const auto& family : out.Take()) {
    if (family.name != "rdma_mr_outstanding_bytes") continue;
    for (const auto& metric : family.metric) {
      for (const auto& label : metric.label) {
        if (label.name == "pid" && label.value == "5151") server_bytes = metric.gauge.value;
      }
    }
  }
  EXPECT_EQ(server_bytes, 4096.0);
}

TEST(MrRestrack, SeededRegionsAreLeakSuspectsOnceTheSeedIsOlderThanTheLeakAge) {
  RestrackMrSeed seed(Dump("before_attach"));
  MrSnapshot snapshot = ProbeSnapshot();
  AddSeeded(seed.ByProcess(), true, CommOf, snapshot);
  EXPECT_EQ(snapshot.processes[0].leak_suspect_regions, 4U);
  EXPECT_EQ(snapshot.processes[0].leak_suspect_bytes, static_cast<uint64_t>(kTrainerBytes));
}

TEST(MrRestrack, AProcessWhoseCommIsGoneIsLeftOut) {
  RestrackMrSeed seed(Dump("before_attach"));
  MrSnapshot snapshot;
  AddSeeded(
      seed.ByProcess(), false, [](uint32_t) { return std::string(); }, snapshot);
  EXPECT_TRUE(snapshot.processes.empty());
}

// A scripted restrack: one dump per Read(), or an errno.
class ScriptedSource : public ResourceSource {
 public:
  using Answer = std::expected<std::vector<RdmaDeviceResources>, int>;
  explicit ScriptedSource(std::vector<Answer> answers) : answers_(std::move(answers)) {}
  Answer Read() const override {
    ++reads;
    if (next_ >= answers_.size()) return std::unexpected(EIO);
    return answers_[next_++];
  }
  mutable size_t reads = 0;

 private:
  std::vector<Answer> answers_;
  mutable size_t next_ = 0;
};

// The probes' regions while the window is checked: none of the window's.
std::optional<MrTrackedKeys> NothingTracked() { return MrTrackedKeys{.kernel_path = true}; }

TEST(MrRestrack, TrackerFollowsEachScrapeAndStopsDumpingOnceEmpty) {
  std::vector<RdmaDeviceResources> gone = Dump("trainer_exiting_mrn_wrapped");
  auto source = std::make_unique<ScriptedSource>(
      std::vector<ScriptedSource::Answer>{Dump("before_attach"), Dump("before_attach"),
                                          Dump("after_dereg"), std::unexpected(EAGAIN), gone});
  const ScriptedSource& script = *source;
  MrSeedTracker tracker(std::move(source), 600ULL * 1000000000ULL);
  const auto start = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  tracker.BeforeAttach();
  tracker.AfterAttach(start);
  size_t walks = 0;
  const auto tracked = [&] {
    ++walks;
    return NothingTracked();
  };

  MrSnapshot first = ProbeSnapshot();
  EXPECT_EQ(tracker.Apply(start + std::chrono::seconds(10), CommOf, tracked, first), 4U);
  EXPECT_EQ(first.processes[0].outstanding_regions, 4);
  EXPECT_EQ(first.processes[0].leak_suspect_regions, 0U);

  // A failed dump: the scrape fails rather than report figures nobody can vouch for.
  MrSnapshot second = ProbeSnapshot();
  EXPECT_THROW(tracker.Apply(start + std::chrono::minutes(11), CommOf, tracked, second),
               std::runtime_error);

  MrSnapshot third = ProbeSnapshot();
  EXPECT_EQ(tracker.Apply(start + std::chrono::minutes(12), CommOf, tracked, third), 0U);
  EXPECT_EQ(third.processes.size(), 2U) << "nothing seeded is left";
  EXPECT_EQ(third.processes[0].outstanding_regions, 1);
  EXPECT_EQ(script.reads, 5U);

  MrSnapshot fourth = ProbeSnapshot();
  EXPECT_EQ(tracker.Apply(start + std::chrono::minutes(13), CommOf, tracked, fourth), 0U);
  EXPECT_EQ(script.reads, 5U) << "no dump once every seeded region is gone";
  EXPECT_EQ(walks, 0U) << "both dumps list the same regions: no window, no walk of the probes";
}

TEST(MrRestrack, TrackerCountsLeakSuspectsAfterTheLeakAge) {
  auto source = std::make_unique<ScriptedSource>(std::vector<ScriptedSource::Answer>{
      Dump("before_attach"), Dump("before_attach"), Dump("before_attach")});
  MrSeedTracker tracker(std::move(source), 600ULL * 1000000000ULL);
  const auto start = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  tracker.BeforeAttach();
  tracker.AfterAttach(start);
  MrSnapshot snapshot = ProbeSnapshot();
  tracker.Apply(start + std::chrono::minutes(10), CommOf, NothingTracked, snapshot);
  EXPECT_EQ(snapshot.processes[0].leak_suspect_regions, 4U);
}

TEST(MrRestrack, NoRestrackNoSeed) {
  auto source = std::make_unique<ScriptedSource>(std::vector<ScriptedSource::Answer>{
      std::unexpected(EPROTONOSUPPORT), std::unexpected(EPROTONOSUPPORT)});
  MrSeedTracker tracker(std::move(source), 0);
  tracker.BeforeAttach();
  tracker.AfterAttach(std::chrono::steady_clock::now());
  MrSnapshot snapshot = ProbeSnapshot();
  EXPECT_EQ(tracker.Apply(std::chrono::steady_clock::now(), CommOf, NothingTracked, snapshot), 0U);
  EXPECT_EQ(snapshot.processes[0].outstanding_regions, 1);

  MrSeedTracker without(nullptr, 0);
  without.BeforeAttach();
  without.AfterAttach(std::chrono::steady_clock::now());
  EXPECT_EQ(without.Apply(std::chrono::steady_clock::now(), CommOf, NothingTracked, snapshot), 0U);
}

// --- registrations while the probes attach (issue 27): the window between the two dumps ---

// Thread 4243 of the trainer registered mrn 9.
std::optional<uint32_t> TgidOf(uint32_t pid) { return pid == 4243 ? 4242 : pid; }

// A dump with its owners resolved, as MrSeedTracker reads it.
std::vector<RdmaDeviceResources> Resolved(const std::string& moment) {
  std::vector<RdmaDeviceResources> devices = Dump(moment);
  sys::ResolveOwners(devices, TgidOf);
  return devices;
}

TEST(MrRestrackWindow, RegionsOnlyTheSecondDumpListsAreTheWindowsAndBelongToTheirProcess) {
  const RestrackMrSeed seed(Resolved("before_attach"), Resolved("after_attach"));
  EXPECT_EQ(seed.size(), 7U);
  EXPECT_EQ(seed.window_size(), 2U);
  const auto by_pid = ByPid(seed);
  EXPECT_FALSE(by_pid.contains(4243)) << "a thread's registration counts for its process";
  EXPECT_EQ(by_pid.at(4242).regions, 6);
  EXPECT_EQ(by_pid.at(4242).bytes, kTrainerBytes + 8192 + 16384);
}

TEST(MrRestrackWindow, TheKernelPathTellsItsOwnRegionsByMrn) {
  RestrackMrSeed seed(Resolved("before_attach"), Resolved("after_attach"));
  // The probes recorded mrn 8 (its handler's entry came after the attach), and carry mrn 1
  // on another device index: not rxe0's mrn 1, which is the seed's.
  const MrTrackedKeys tracked{.kernel_path = true, .restrack_ids = {{1, 8}, {2, 1}}};
  EXPECT_EQ(seed.DropTracked(tracked), 1U);
  EXPECT_EQ(ByPid(seed).at(4242).regions, 5);
  EXPECT_EQ(seed.window_size(), 1U);
  seed.SettleWindow();
  EXPECT_EQ(seed.window_size(), 0U);
  // Settled: a later match (an MRN the allocator handed out again after wrapping) changes
  // nothing.
  EXPECT_EQ(seed.DropTracked({.kernel_path = true, .restrack_ids = {{1, 9}}}), 0U);
  EXPECT_EQ(seed.size(), 6U);
}

TEST(MrRestrackWindow, UprobesTellTheirsByProcessAndLkey) {
  RestrackMrSeed seed(Resolved("before_attach"), Resolved("after_attach"));
  // mrn 9's lkey under its process (restrack lists the thread): the probes counted it.
  EXPECT_EQ(seed.DropTracked({.lkeys = {{4242, 2306}, {5151, 2049}}}), 1U);
  const auto by_pid = ByPid(seed);
  EXPECT_EQ(by_pid.at(4242).regions, 5);
  EXPECT_EQ(by_pid.at(4242).bytes, kTrainerBytes + 8192) << "mrn 8 is not theirs: seeded";
}

TEST(MrRestrackWindow, UprobesDropWindowRegionsWithoutAnLkey) {
  std::vector<RdmaDeviceResources> after = Resolved("after_attach");
  for (RdmaDeviceResources& device : after) {
    for (sys::RdmaResourceEntry& entry : device.entries) entry.mr_lkey.reset();
  }
  RestrackMrSeed seed(Resolved("before_attach"), after);
  // Without CAP_NET_ADMIN no lkey: counted by the probes or not cannot be told, so the
  // window's regions are left out rather than perhaps counted twice.
  EXPECT_EQ(seed.DropTracked({}), 2U);
  EXPECT_EQ(ByPid(seed).at(4242).regions, 4);
}

TEST(MrRestrackWindow, TrackerChecksTheWindowAtEachScrapeUntilTheGraceEnds) {
  auto source = std::make_unique<ScriptedSource>(std::vector<ScriptedSource::Answer>{
      Dump("before_attach"), Dump("after_attach"), Dump("after_attach"), Dump("after_attach"),
      Dump("after_attach"), Dump("after_attach"), Dump("after_attach")});
  MrSeedTracker tracker(std::move(source), 0, TgidOf);
  const auto start = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  tracker.BeforeAttach();
  tracker.AfterAttach(start);
  MrTrackedKeys keys{.kernel_path = true};
  size_t walks = 0;
  const auto tracked = [&]() -> std::optional<MrTrackedKeys> {
    ++walks;
    return keys;
  };
  MrSnapshot first;
  EXPECT_EQ(tracker.Apply(start + std::chrono::seconds(1), CommOf, tracked, first), 7U);
  // mrn 8's registration returned after the first scrape: from now on the probes count it.
  keys.restrack_ids.insert({1, 8});
  MrSnapshot second;
  EXPECT_EQ(tracker.Apply(start + std::chrono::seconds(2), CommOf, tracked, second), 6U);
  // A walk that fails while the window is open: the scrape fails.
  MrSnapshot third;
  EXPECT_THROW(tracker.Apply(
                   start + std::chrono::seconds(3), CommOf,
                   [] { return std::optional<MrTrackedKeys>(); }, third),
               std::runtime_error);
  MrSnapshot fourth;
  EXPECT_EQ(tracker.Apply(start + MrSeedTracker::kWindowGrace, CommOf, tracked, fourth), 6U);
  EXPECT_EQ(walks, 3U);
  MrSnapshot fifth;
  EXPECT_EQ(tracker.Apply(start + std::chrono::minutes(5), CommOf, tracked, fifth), 6U);
  EXPECT_EQ(walks, 3U) << "the window is settled: no more walks";
}

TEST(MrRestrackWindow, ARegionWhoseThreadExitedStaysWithItsProcessThroughItsPd) {
  // Thread 4243 registered mrn 9 during the attach, then exited: restrack lists mrn 9 with
  // no pid from then on (nldev.c fill_res_name_pid), but the trainer still holds it. Its PD
  // (pdn 1, created by the main thread) names the process; NetlinkMrSource dumps the PDs.
  const auto with_pd = [](std::vector<RdmaDeviceResources> devices, bool thread_gone) {
    for (RdmaDeviceResources& device : devices) {
      if (device.name != "rxe0") continue;
      for (sys::RdmaResourceEntry& entry : device.entries) {
        if (thread_gone && entry.kind == RdmaResourceKind::kMr && entry.id == 9U) entry.pid.reset();
      }
      device.entries.push_back({.kind = RdmaResourceKind::kPd, .pid = 4242, .id = 1});
    }
    return devices;
  };
  auto source = std::make_unique<ScriptedSource>(std::vector<ScriptedSource::Answer>{
      with_pd(Dump("before_attach"), false), with_pd(Dump("after_attach"), false),
      with_pd(Dump("after_attach"), true)});
  MrSeedTracker tracker(std::move(source), 0, TgidOf);
  const auto start = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  tracker.BeforeAttach();
  tracker.AfterAttach(start);
  MrSnapshot snapshot;
  // The probes tracked mrn 8 (it is theirs); mrn 9 is the seed's, and stays after its
  // thread's exit.
  EXPECT_EQ(
      tracker.Apply(
          start + std::chrono::seconds(1), [](uint32_t) { return std::string("trainer"); },
          [] {
            return std::optional<MrTrackedKeys>({.kernel_path = true, .restrack_ids = {{1, 8}}});
          },
          snapshot),
      6U);
  ASSERT_FALSE(snapshot.processes.empty());
  EXPECT_EQ(snapshot.processes[0].pid, 4242U);
  EXPECT_EQ(snapshot.processes[0].outstanding_regions, 5);
  EXPECT_EQ(snapshot.processes[0].outstanding_bytes, kTrainerBytes + 16384);
}

TEST(MrRestrackWindow, ThreadGroupFromProcStatus) {
  const testing::TempDir dir;
  const std::filesystem::path proc = dir.path();
  std::filesystem::create_directories(proc / "4243");
  std::filesystem::create_directories(proc / "77");
  std::filesystem::create_directories(proc / "78");
  std::ofstream(proc / "4243/status") << "Name:\ttrainer\nUmask:\t0022\nState:\tS (sleeping)\n"
                                         "Tgid:\t4242\nNgid:\t0\nPid:\t4243\n";
  std::ofstream(proc / "77/status") << "Name:\tx\nTgid:\tnot a number\n";
  std::ofstream(proc / "78/status") << "Name:\tTgid:\t5\n";  // a comm that looks like the field
  EXPECT_EQ(sys::ThreadGroupOf(proc, 4243), 4242U);
  EXPECT_EQ(sys::ThreadGroupOf(proc, 77), std::nullopt);
  EXPECT_EQ(sys::ThreadGroupOf(proc, 78), std::nullopt);
  EXPECT_EQ(sys::ThreadGroupOf(proc, 99), std::nullopt) << "gone";
}

}  // namespace
}  // namespace rdmascope
