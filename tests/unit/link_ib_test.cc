// The link collector's InfiniBand additions (issue 40 items 2 and 5): whether an RDMA port's
// PMA counters answer (rdma_link_source_available{source="ib_counters"}) and a native IB port's
// width and lane speed as trained, from a fixture sysfs tree read by SystemLinkPorts, and the
// same series from a capture of that tree with the tree gone.
#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "collectors/link.h"
#include "core/capture.h"
#include "unit/fixture_tree.h"
#include "unit/installed_session.h"

namespace rdmascope {
namespace {

using namespace std::chrono_literals;

// mlx5_0/1: native InfiniBand, up at 4X NDR, counters readable.
// mlx5_0/2: native InfiniBand, down (its rate a preset), counters readable.
// mlx5_1/1: native InfiniBand, up at 2X HDR, symbol_error unreadable ("N/A": no PMA answer).
// rxe0/1: RoCE on veth0, no counters/ directory (rxe has none).
void WriteHost(const std::filesystem::path& sys) {
  const auto port = [&](const std::string& device, const std::string& number) {
    return sys / "class/infiniband" / device / "ports" / number;
  };
  testing::WriteText(port("mlx5_0", "1") / "link_layer", "InfiniBand\n");
  testing::WriteText(port("mlx5_0", "1") / "state", "4: ACTIVE\n");
  testing::WriteText(port("mlx5_0", "1") / "phys_state", "5: LinkUp\n");
  testing::WriteText(port("mlx5_0", "1") / "rate", "400 Gb/sec (4X NDR)\n");
  testing::WriteText(port("mlx5_0", "1") / "counters/symbol_error", "12\n");
  testing::WriteText(port("mlx5_0", "2") / "link_layer", "InfiniBand\n");
  testing::WriteText(port("mlx5_0", "2") / "state", "1: DOWN\n");
  testing::WriteText(port("mlx5_0", "2") / "phys_state", "2: Polling\n");
  testing::WriteText(port("mlx5_0", "2") / "rate", "40 Gb/sec (4X QDR)\n");
  testing::WriteText(port("mlx5_0", "2") / "counters/symbol_error", "0\n");
  testing::WriteText(port("mlx5_1", "1") / "link_layer", "InfiniBand\n");
  testing::WriteText(port("mlx5_1", "1") / "state", "4: ACTIVE\n");
  testing::WriteText(port("mlx5_1", "1") / "phys_state", "5: LinkUp\n");
  testing::WriteText(port("mlx5_1", "1") / "rate", "100 Gb/sec (2X HDR)\n");
  testing::WriteText(port("mlx5_1", "1") / "counters/symbol_error", "N/A\n");
  testing::WriteText(port("rxe0", "1") / "link_layer", "Ethernet\n");
  testing::WriteText(port("rxe0", "1") / "state", "4: ACTIVE\n");
  testing::WriteText(port("rxe0", "1") / "rate", "10 Gb/sec (1X QDR)\n");
}

// No module anywhere: a module read is EOPNOTSUPP (rxe's veth), the IB ports are never read.
ModuleReads::Read NoModules() {
  return [](std::string_view, const sys::ModulePageKey&, uint8_t,
            uint8_t) -> std::expected<std::string, int> { return std::unexpected(EOPNOTSUPP); };
}

std::string Scrape(const std::filesystem::path& sys) {
  LinkCollector collector({.refresh_interval = 0s, .static_refresh_interval = 0s},
                          std::make_unique<SystemLinkPorts>(sys, nullptr, 64), NoModules());
  MetricSet set;
  collector.Collect(set);
  return testing::Serialise(set.Take());
}

bool Has(const std::string& text, const std::string& line) {
  return text.find(line + "\n") != std::string::npos;
}

TEST(LinkIbRate, ParsesWidthAndLaneSpeedAsTheKernelPrintsThem) {
  // core/sysfs.c rate_show: the speed's rate per lane times the width.
  const auto ndr = ParseIbLinkRate("400 Gb/sec (4X NDR)\n");
  ASSERT_TRUE(ndr.has_value());
  EXPECT_EQ(ndr->width_lanes, 4U);
  EXPECT_DOUBLE_EQ(ndr->lane_bits_per_second, 100e9);
  const auto hdr100 = ParseIbLinkRate("100 Gb/sec (2X HDR)");
  ASSERT_TRUE(hdr100.has_value());
  EXPECT_EQ(hdr100->width_lanes, 2U);
  EXPECT_DOUBLE_EQ(hdr100->lane_bits_per_second, 50e9);
  const auto sdr = ParseIbLinkRate("2.5 Gb/sec (1X SDR)");
  ASSERT_TRUE(sdr.has_value());
  EXPECT_DOUBLE_EQ(sdr->lane_bits_per_second, 2.5e9);
  const auto edr12 = ParseIbLinkRate("300 Gb/sec (12X EDR)");
  ASSERT_TRUE(edr12.has_value());
  EXPECT_EQ(edr12->width_lanes, 12U);
  EXPECT_DOUBLE_EQ(edr12->lane_bits_per_second, 25e9);
  // Nothing made up from what is not a rate.
  for (const char* bad : {"", "400 Gb/sec", "400 Gb/sec (X NDR)", "400 Gb/sec (0X NDR)",
                          "400 Gb/sec (16X NDR)", "0 GB/sec", "nan Gb/sec (4X NDR)",
                          "400 GB/sec (4X NDR)", "-400 Gb/sec (4X NDR)", "(4X NDR) 400"}) {
    EXPECT_FALSE(ParseIbLinkRate(bad).has_value()) << bad;
  }
}

TEST(LinkIbPorts, CountersSourceAndTrainedRateFromSysfs) {
  testing::TempDir dir;
  WriteHost(dir.path() / "sys");
  const std::string text = Scrape(dir.path() / "sys");
  // The PMA counters: readable on the native IB ports, not where symbol_error does not parse
  // nor on rxe (no counters/).
  EXPECT_TRUE(Has(text,
                  "rdma_link_source_available{device=\"mlx5_0\",port=\"1\",netdev=\"\","
                  "source=\"ib_counters\"} 1"))
      << text;
  EXPECT_TRUE(Has(text,
                  "rdma_link_source_available{device=\"mlx5_0\",port=\"2\",netdev=\"\","
                  "source=\"ib_counters\"} 1"));
  EXPECT_TRUE(Has(text,
                  "rdma_link_source_available{device=\"mlx5_1\",port=\"1\",netdev=\"\","
                  "source=\"ib_counters\"} 0"));
  EXPECT_TRUE(Has(text,
                  "rdma_link_source_available{device=\"rxe0\",port=\"1\",netdev=\"\","
                  "source=\"ib_counters\"} 0"));
  // Width and lane speed of the ports that are up; none for the down port (its "4X QDR" is a
  // preset) nor for rxe (Ethernet: its rate is an Ethernet speed in IB words).
  EXPECT_TRUE(Has(text, "rdma_link_ib_width_lanes{device=\"mlx5_0\",port=\"1\",netdev=\"\"} 4"));
  EXPECT_TRUE(Has(text,
                  "rdma_link_ib_lane_rate_bits_per_second{device=\"mlx5_0\",port=\"1\","
                  "netdev=\"\"} 100000000000"))
      << text;
  EXPECT_TRUE(Has(text, "rdma_link_ib_width_lanes{device=\"mlx5_1\",port=\"1\",netdev=\"\"} 2"));
  EXPECT_TRUE(Has(text,
                  "rdma_link_ib_lane_rate_bits_per_second{device=\"mlx5_1\",port=\"1\","
                  "netdev=\"\"} 50000000000"));
  EXPECT_EQ(text.find("rdma_link_ib_width_lanes{device=\"mlx5_0\",port=\"2\""), std::string::npos);
  EXPECT_EQ(text.find("rdma_link_ib_width_lanes{device=\"rxe0\""), std::string::npos);
}

TEST(LinkIbPorts, CaptureThenReplayWithoutTheTreeGivesEqualSeries) {
  testing::TempDir dir;
  const auto sys = dir.path() / "sys";
  WriteHost(sys);
  std::string recorded;
  {
    auto writer = capture::Writer::Create(dir.path() / "cap", false).value();
    testing::InstalledSession session(
        capture::Session::Recording(capture::Layout(sys, dir.path() / "proc"), writer.get()));
    ASSERT_TRUE(writer->BeginSample(1).has_value());
    recorded = Scrape(sys);
    ASSERT_TRUE(writer->CommitSample().has_value());
    ASSERT_TRUE(writer->WriteIndex("test", {"link"}).has_value());
  }
  std::filesystem::remove_all(sys);  // the replay must not need the host
  ASSERT_NE(recorded.find("source=\"ib_counters\"} 1"), std::string::npos) << recorded;
  auto replaying = capture::Session::Replaying(capture::Layout(sys, dir.path() / "proc"),
                                               capture::Reader::Open(dir.path() / "cap").value());
  capture::Session* session = replaying.get();
  testing::InstalledSession installed(std::move(replaying));
  session->NextSample();
  EXPECT_EQ(Scrape(sys), recorded);
}

}  // namespace
}  // namespace rdmascope
