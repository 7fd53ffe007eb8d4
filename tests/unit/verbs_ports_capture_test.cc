// libibverbs' port answers under capture and replay (collectors/verbs_ports_capture.h): a fake
// live querier recorded, then replayed through the real rdma collector with libibverbs never
// asked; a capture's hostile or missing file gives no MTU series, never a made-up one.
#include "collectors/verbs_ports_capture.h"

#include <gtest/gtest.h>

#include <fstream>

#include "collectors/rdma.h"
#include "core/capture.h"
#include "core/metric_set.h"
#include "unit/fixture_tree.h"
#include "unit/installed_session.h"

namespace rdmascope {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

// The live querier: counts its calls, so that a replay that asks it fails.
class FakeLive : public PortMtuQuerier {
 public:
  explicit FakeLive(int* calls) : calls_(calls) {}
  PortMtus Query(const std::vector<RdmaDevice>& devices) const override {
    ++*calls_;
    PortMtus out;
    for (const auto& device : devices) {
      if (device.name == "rxe0") out[{device.name, 1}] = {1024, 4096};
      if (device.name == "mlx5_0") out[{device.name, 1}] = {4096, 4096};
    }
    return out;
  }

 private:
  int* calls_;
};

using Installed = testing::InstalledSession;

std::string Collect(const fs::path& sysfs, int* live_calls) {
  RdmaCollector collector(
      RdmaOptions{}, sysfs,
      std::make_unique<CapturedPortMtuQuerier>(std::make_unique<FakeLive>(live_calls)));
  MetricSet out;
  collector.Collect(out);
  return testing::Serialise(out.Take());
}

// A recorded capture of the rdma_hosts fixture; the host tree moved away after recording.
struct Recorded {
  TempDir root;
  TempDir out;
  std::string live;
  int live_calls = 0;
  Recorded() {
    testing::MaterialiseTree(testing::FixturePath("sysfs/rdma_hosts.tree"), sysfs());
    auto writer = capture::Writer::Create(dir(), false).value();
    {
      Installed session(
          capture::Session::Recording(capture::Layout(sysfs(), "/proc"), writer.get()));
      EXPECT_TRUE(writer->BeginSample(1).has_value());
      live = Collect(sysfs(), &live_calls);
      EXPECT_TRUE(writer->CommitSample().has_value());
      EXPECT_TRUE(writer->WriteIndex("test", {}).has_value());
    }
    fs::rename(sysfs(), root.path() / "gone");
  }
  fs::path sysfs() const { return root.path() / "sys"; }
  fs::path dir() const { return out.path() / "cap"; }
  fs::path file() const { return dir() / "samples/0001" / kVerbsQueryPortFile; }
  std::string Replay(int* calls) const {
    Installed session(capture::Session::Replaying(capture::Layout(sysfs(), "/proc"),
                                                  capture::Reader::Open(dir()).value()));
    return Collect(sysfs(), calls);
  }
};

TEST(VerbsPortsCapture, RoundTripThroughTheRdmaCollector) {
  const Recorded capture;
  EXPECT_EQ(capture.live_calls, 1);
  EXPECT_NE(capture.live.find("rdma_port_active_mtu_bytes{device=\"rxe0\",port=\"1\"} 1024"),
            std::string::npos)
      << capture.live;
  std::ifstream in(capture.file());
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(text.find("rxe0 1 1024 4096\n"), std::string::npos) << text;
  int replay_calls = 0;
  EXPECT_EQ(capture.Replay(&replay_calls), capture.live);
  EXPECT_EQ(replay_calls, 0);  // libibverbs is never asked under replay
}

TEST(VerbsPortsCapture, MissingOrHostileFileGivesNoMtuSeries) {
  const Recorded capture;
  const auto replay_without_mtu = [&](const char* what) {
    int calls = 0;
    const std::string replayed = capture.Replay(&calls);
    EXPECT_EQ(replayed.find("mtu_bytes{device=\"rxe0\""), std::string::npos) << what;
    EXPECT_EQ(replayed.find("rdma_port_active_mtu_bytes"), std::string::npos) << what;
    // The sysfs series are still there: only the MTU is missing.
    EXPECT_NE(replayed.find("rdma_port_state"), std::string::npos) << what;
    EXPECT_EQ(calls, 0) << what;
  };
  fs::remove(capture.file());
  replay_without_mtu("absent");
  std::ofstream(capture.file()) << "rxe0 1 0 4096\n";
  replay_without_mtu("MTU 0");
  std::ofstream(capture.file()) << "rxe0 1 1024\n";
  replay_without_mtu("truncated line");
  fs::remove(capture.file());
  fs::create_symlink("/etc/passwd", capture.file());
  replay_without_mtu("link out of the capture");
}

TEST(VerbsPortsCapture, ParseRefusesWhatLibibverbsCannotAnswer) {
  EXPECT_EQ(ParsePortMtus("# c\n\nmlx5_0 1 4096 4096\n  rxe0\t2 256 512").value().size(), 2U);
  EXPECT_EQ(
      ParsePortMtus(FormatPortMtus({{{"a", 1}, {2048, 4096}}})).value().at({"a", 1}).max_bytes,
      4096U);
  for (const char* bad :
       {"x 1 1000 4096", "x 0 1024 1024", "x 256 1024 1024", "x 1 -1 1024", "x 1 1024 1024 extra",
        "a/b 1 1024 1024", "x 1 1024 1024\nx 1 512 512", "x 1 0x400 1024"}) {
    const auto parsed = ParsePortMtus(bad);
    EXPECT_FALSE(parsed.has_value()) << bad;
    if (!parsed) {
      EXPECT_TRUE(parsed.error().starts_with("line ")) << parsed.error();
    }
  }
}

}  // namespace
}  // namespace rdmascope
