// The mr and verbs collectors under capture and replay (collectors/probe_capture.h): each
// sample's reading of the probes and the pinned-memory reads recorded live, then a collector
// built under replay (no probe: nothing to attach) gives the same series as the live mapping
// of those inputs, sample by sample; a reading the capture lacks or that is malformed fails
// the collection with a message naming the file, never a made-up 0.
#include "collectors/probe_capture.h"

#include <gtest/gtest.h>

#include <fstream>
#include <stdexcept>

#include "collectors/capture_config.h"
#include "collectors/mr.h"
#include "collectors/verbs.h"
#include "core/capture.h"
#include "core/metric_set.h"
#include "core/sysfs.h"
#include "unit/fixture_tree.h"
#include "unit/installed_session.h"

namespace rdmascope {
namespace {

namespace fs = std::filesystem;
using Installed = testing::InstalledSession;

void Write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

MrProbeReading MrReading(uint64_t registrations) {
  MrProbeReading reading{.attached = true, .links = 12, .seeded_regions = 1};
  reading.snapshot.processes.push_back({.pid = 123,
                                        .comm = "app",
                                        .registrations = registrations,
                                        .outstanding_regions = 2,
                                        .outstanding_bytes = 8192,
                                        .access_seen = 1});
  reading.snapshot.released["old"] = {.regions = 1, .bytes = 4096};
  return reading;
}

// A host of one RDMA process (pid 123 holding uverbs0, VmPin `pinned_kib`), recorded over
// samples with the readings given; the live series of each sample, as the collector maps them.
struct Recorded {
  testing::TempDir tmp;
  std::vector<std::string> live;
  fs::path host() const { return tmp.path() / "host"; }
  fs::path dir() const { return tmp.path() / "cap"; }

  void HostProcess(uint64_t pinned_kib) const {
    const fs::path proc = host() / "proc";
    Write(proc / "meminfo", "MemTotal:       16384 kB\n");
    Write(proc / "123/comm", "app\n");
    Write(proc / "123/status",
          "Name:\tapp\nVmPin:\t" + std::to_string(pinned_kib) + " kB\nCapEff:\t0000000000000000\n");
    Write(proc / "123/limits", "Max locked memory         65536      65536      bytes\n");
    fs::create_directories(proc / "123/fd");
    if (!fs::is_symlink(proc / "123/fd/3")) {
      fs::create_symlink("/dev/infiniband/uverbs0", proc / "123/fd/3");
      fs::create_symlink("/home/user/secret.txt", proc / "123/fd/4");
    }
  }

  explicit Recorded(const std::vector<std::string>& mr_files) {
    auto writer = capture::Writer::Create(dir(), false).value();
    Installed session(capture::Session::Recording(capture::Layout(host() / "sys", host() / "proc"),
                                                  writer.get()));
    HostProcess(1024);
    EXPECT_TRUE(writer->BeginSample(1).has_value());
    // As MrCollector builds it under a capture session.
    UverbsHolders pinned(
        host() / "proc", host() / "sys", std::chrono::seconds(0),
        std::make_shared<CapturedProcfs>(std::make_shared<sys::DirectProcfs>(host() / "proc")));
    for (size_t sample = 1; sample <= mr_files.size(); ++sample) {
      if (sample > 1) {
        EXPECT_TRUE(writer->BeginSample(sample).has_value());
        HostProcess(1024 * sample);
      }
      if (!mr_files[sample - 1].empty()) RecordProbeFile(kMrCaptureFile, mr_files[sample - 1]);
      const auto reading = MrReadingFromJson(mr_files[sample - 1]);
      std::vector<uint32_t> registrants;
      if (reading) {
        for (const MrProcess& proc : reading->snapshot.processes) registrants.push_back(proc.pid);
      }
      const auto holders = pinned.Read(registrants);
      const auto meminfo = sysfs::ReadFile(host() / "proc/meminfo", 4096);
      MetricSet out;
      if (reading) {
        MapMrReading(*reading, holders, ParseMemTotalBytes(meminfo.value_or("")), false, out);
      }
      live.push_back(testing::Serialise(out.Take()));
      EXPECT_TRUE(writer->CommitSample().has_value());
    }
    EXPECT_TRUE(writer->WriteIndex("test", {"mr"}).has_value());
  }
};

struct Replay {
  Installed session;
  MrCollector collector;
  explicit Replay(const fs::path& dir)
      : session(capture::Session::Replaying(capture::Layout("/sys", "/proc"),
                                            capture::Reader::Open(dir).value())),
        collector(MrProbeOptions{.pinned_rescan_seconds = 0}, "/proc", "/sys") {}
  std::string Scrape(CollectResult* result = nullptr) {
    session->NextSample();
    MetricSet out;
    const CollectResult got = collector.Collect(out);
    if (result != nullptr) *result = got;
    return testing::Serialise(out.Take());
  }
};

TEST(ProbeCapture, MrReplayGivesTheLiveSeriesOfEachSample) {
  const Recorded capture({MrReadingToJson(MrReading(5)), MrReadingToJson(MrReading(9))});
  ASSERT_EQ(capture.live.size(), 2U);
  EXPECT_NE(capture.live[0], capture.live[1]);
  EXPECT_NE(capture.live[0].find("rdma_process_pinned_bytes{pid=\"123\",comm=\"app\"} 1048576"),
            std::string::npos)
      << capture.live[0];
  // The holders scan is kept as its answer: no process's descriptor listing or link.
  const fs::path sample = capture.dir() / "samples/0001";
  EXPECT_EQ(testing::ReadText(sample / kUverbsHoldersFile), "123 uverbs0\n");
  EXPECT_FALSE(fs::exists(sample / "proc/123/fd"));
  fs::remove_all(capture.host());  // the replay has nothing of the host but the capture

  Replay replay(capture.dir());
  EXPECT_EQ(replay.collector.ProbeError(), "");
  CollectResult result;
  EXPECT_EQ(replay.Scrape(&result), capture.live[0]);
  EXPECT_EQ(result.detail, "1 processes with registrations, 1 regions from before the start");
  EXPECT_EQ(replay.Scrape(), capture.live[1]);
  EXPECT_EQ(replay.Scrape(), capture.live[1]);  // the last sample repeats
  // /debug/mr/stacks is the recorded exporter's answer under replay, not this collector's.
  DebugRoutes routes;
  replay.collector.AddDebugRoutes(routes);
  EXPECT_TRUE(routes.empty());
}

TEST(ProbeCapture, ProbesNotAttachedReplayWithTheirReason) {
  const MrProbeReading off{.error = "bpf(BPF_PROG_LOAD): Operation not permitted"};
  const Recorded capture({MrReadingToJson(off)});
  Replay replay(capture.dir());
  EXPECT_EQ(replay.collector.ProbeError(), off.error);
  CollectResult result;
  const std::string scrape = replay.Scrape(&result);
  EXPECT_EQ(scrape, capture.live[0]);
  EXPECT_TRUE(result.no_data);
  EXPECT_EQ(result.detail, "eBPF probes not attached: " + off.error);
  EXPECT_NE(scrape.find("rdmascope_probe_attached{probe=\"mr\"} 0"), std::string::npos);
  EXPECT_EQ(scrape.find("rdma_mr_outstanding"), std::string::npos);        // absent, not 0
  EXPECT_NE(scrape.find("rdma_process_pinned_bytes"), std::string::npos);  // works without eBPF
}

TEST(ProbeCapture, AMissingOrMalformedReadingFailsTheCollection) {
  const Recorded capture({MrReadingToJson(MrReading(1)), "", "{\"version\":1,\"probe\":\"mr\"}"});
  Replay replay(capture.dir());
  EXPECT_EQ(replay.Scrape(), capture.live[0]);
  try {
    replay.Scrape();
    ADD_FAILURE() << "a sample without bpf/mr.json was collected";
  } catch (const std::runtime_error& error) {
    EXPECT_STREQ(error.what(),
                 "capture's eBPF snapshot refused: bpf/mr.json of sample 2: not in the capture");
  }
  try {
    replay.Scrape();
    ADD_FAILURE() << "a malformed bpf/mr.json was collected";
  } catch (const std::runtime_error& error) {
    EXPECT_STREQ(error.what(), "capture's eBPF snapshot refused: bpf/mr.json: attached: missing");
  }
}

TEST(ProbeCapture, AFailedLiveCollectionFailsItsReplay) {
  const Recorded capture({MrReadingToJson({.attached = true, .failed = "restrack: EAGAIN"})});
  Replay replay(capture.dir());
  EXPECT_THROW(replay.Scrape(), std::runtime_error);
}

TEST(ProbeCapture, VerbsReplayGivesTheLiveSeries) {
  testing::TempDir tmp;
  VerbsProbeReading reading{.attached = true, .links = 20};
  reading.snapshot.cqs.push_back({.pid = 9, .comm = "bw", .device = "rxe0", .entries = 64});
  reading.snapshot.processes.push_back({.pid = 9, .comm = "bw"});
  {
    auto writer = capture::Writer::Create(tmp.path() / "cap", false).value();
    Installed session(capture::Session::Recording(capture::Layout("/sys", "/proc"), writer.get()));
    EXPECT_TRUE(writer->BeginSample(1).has_value());
    EXPECT_TRUE(RecordingCapture());
    RecordProbeFile(kVerbsCaptureFile, VerbsReadingToJson(reading));
    EXPECT_TRUE(writer->CommitSample().has_value());
    EXPECT_TRUE(writer->WriteIndex("test", {"verbs"}).has_value());
  }
  MetricSet live;
  MapVerbsReading(reading, 1000, live);
  Installed session(capture::Session::Replaying(capture::Layout("/sys", "/proc"),
                                                capture::Reader::Open(tmp.path() / "cap").value()));
  EXPECT_TRUE(ReplayingCapture());
  const VerbsCollector collector(VerbsOptions{}, "/proc");
  session->NextSample();
  MetricSet out;
  collector.Collect(out);
  EXPECT_EQ(testing::Serialise(out.Take()), testing::Serialise(live.Take()));
  EXPECT_TRUE(collector.Qps(9).empty());  // no probe under replay
}

TEST(ProbeCapture, UverbsHoldersFileIsCheckedLineByLine) {
  EXPECT_EQ(ParseUverbsHolders("").value().size(), 0U);
  const auto two = ParseUverbsHolders("1 uverbs0 uverbs1\n77\n");
  ASSERT_TRUE(two.has_value());
  EXPECT_EQ(two->at(1).size(), 2U);
  EXPECT_TRUE(two->at(77).empty());
  EXPECT_EQ(FormatUverbsHolders(*two), "1 uverbs0 uverbs1\n77\n");
  for (const char* bad : {"0 uverbs0\n", "2147483648 uverbs0\n", "-1\n", "x uverbs0\n", "5 eth0\n",
                          "5 uverbs\n", "5 uverbs0x\n", "5\n5\n", " 5\n"}) {
    EXPECT_FALSE(ParseUverbsHolders(bad).has_value()) << bad;
  }
}

TEST(ProbeCapture, CaptureKeepsTheEbpfCollectorsOn) {
  CollectorsConfig config;
  config.collector_enabled = {{"mr", true}, {"verbs", true}, {"occupancy", true}};
  ConfigureForCapture(config);
  EXPECT_TRUE(config.collector_enabled["mr"]);
  EXPECT_TRUE(config.collector_enabled["verbs"]);
  EXPECT_TRUE(config.collector_enabled["occupancy"]);
  EXPECT_EQ(config.mr.pinned_rescan_seconds, 0U);  // each sample holds its holders
}

}  // namespace
}  // namespace rdmascope
