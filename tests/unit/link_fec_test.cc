// The link collector's FEC and link-mode slice (collectors/link_fec.h): series and values of
// dumps built as the kernel builds them, rdma_link_source_available for ports without FEC
// (veth, native InfiniBand, a refused dump), capture -> replay of the dumps, and the host's own
// answer (this host's interfaces have no FEC: source_available{source="fec"} 0).
#include <gtest/gtest.h>
#include <linux/ethtool.h>
#include <net/if.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "collectors/link.h"
#include "core/capture.h"
#include "unit/ethtool_reply_builder.h"
#include "unit/fixture_tree.h"
#include "unit/installed_session.h"

namespace rdmascope {
namespace {

using namespace std::chrono_literals;
using testing::EthtoolDump;

class FakePorts : public LinkPortSource {
 public:
  explicit FakePorts(std::vector<LinkPort> ports) : ports_(std::move(ports)) {}
  std::vector<LinkPort> Read() const override { return ports_; }

 private:
  std::vector<LinkPort> ports_;
};

ModuleReads::Read NoModules() {
  return [](std::string_view, const sys::ModulePageKey&, uint8_t,
            uint8_t) -> std::expected<std::string, int> { return std::unexpected(EOPNOTSUPP); };
}

std::string Scrape(const Collector& collector) {
  MetricSet set;
  collector.Collect(set);
  return testing::Serialise(set.Take());
}

double Value(const std::string& text, const std::string& series) {
  const size_t at = text.find(series + " ");
  if (at == std::string::npos || (at > 0 && text[at - 1] != '\n')) return std::nan("");
  return std::stod(text.substr(at + series.size() + 1));
}

// The FEC dump of two mlx5 ports (RS totals; BaseR lanes) and a 6.18 histogram port.
std::string FecDump() {
  EthtoolDump dump;
  const auto put = [&](uint32_t index, const std::string& name, uint32_t active,
                       const std::vector<uint64_t>& corrected, const std::vector<uint64_t>& uncorr,
                       const std::vector<uint64_t>& bits, bool hist) {
    nlmsghdr* m = dump.Begin(ETHTOOL_MSG_FEC_GET_REPLY, ETHTOOL_A_FEC_HEADER, index, name);
    mnl_attr_put_u8(m, ETHTOOL_A_FEC_AUTO, 0);
    mnl_attr_put_u32(m, ETHTOOL_A_FEC_ACTIVE, active);
    nlattr* stats = mnl_attr_nest_start(m, ETHTOOL_A_FEC_STATS);
    EthtoolDump::PutArray(m, ETHTOOL_A_FEC_STAT_CORRECTED, corrected);
    EthtoolDump::PutArray(m, ETHTOOL_A_FEC_STAT_UNCORR, uncorr);
    EthtoolDump::PutArray(m, ETHTOOL_A_FEC_STAT_CORR_BITS, bits);
    if (hist) {
      const struct {
        uint32_t low, high, value;
        std::vector<uint64_t> lanes;
      } bins[] = {{0, 0, 445, {125, 120, 100, 100}}, {1, 3, 12, {}}, {9, 15, 2, {0, 2, 0, 0}}};
      for (const auto& b : bins) {
        nlattr* nest = mnl_attr_nest_start(m, sys::kEthtoolFecStatHist);
        mnl_attr_put_u32(m, sys::kEthtoolFecHistBinLow, b.low);
        mnl_attr_put_u32(m, sys::kEthtoolFecHistBinHigh, b.high);
        mnl_attr_put_u32(m, sys::kEthtoolFecHistBinVal, b.value);
        if (!b.lanes.empty()) EthtoolDump::PutArray(m, sys::kEthtoolFecHistBinValPerLane, b.lanes);
        mnl_attr_nest_end(m, nest);
      }
    }
    mnl_attr_nest_end(m, stats);
    dump.End();
  };
  put(4, "eth2", ETHTOOL_LINK_MODE_FEC_RS_BIT, {1234}, {5}, {98765}, false);
  put(5, "eth3", ETHTOOL_LINK_MODE_FEC_BASER_BIT, {100, 10, 20, 30, 40}, {1, 0, 1, 0, 0},
      {55, 10, 15, 20, 10}, false);
  put(6, "eth4", ETHTOOL_LINK_MODE_FEC_RS_BIT, {123}, {4}, {}, true);
  return dump.Done();
}

// Link modes: eth2 100G CR4 (port max 200G), eth4 400G over 4 PAM4 lanes, veth0 10G.
std::string ModesDump() {
  EthtoolDump dump;
  const auto put = [&](const std::string& name, uint32_t speed, uint32_t lanes,
                       std::vector<uint32_t> supported) {
    nlmsghdr* m = dump.Begin(ETHTOOL_MSG_LINKMODES_GET_REPLY, ETHTOOL_A_LINKMODES_HEADER, 1, name);
    nlattr* nest = mnl_attr_nest_start(m, ETHTOOL_A_LINKMODES_OURS);
    mnl_attr_put_u32(m, ETHTOOL_A_BITSET_SIZE, 93);
    uint32_t words[3] = {};
    for (const uint32_t bit : supported) words[bit / 32] |= 1U << (bit % 32);
    mnl_attr_put(m, ETHTOOL_A_BITSET_VALUE, sizeof words, words);
    mnl_attr_put(m, ETHTOOL_A_BITSET_MASK, sizeof words, words);
    mnl_attr_nest_end(m, nest);
    if (name == "eth4") {  // the partner advertises 400G CR4 too (autonegotiation)
      nlattr* peer = mnl_attr_nest_start(m, ETHTOOL_A_LINKMODES_PEER);
      mnl_attr_put(m, ETHTOOL_A_BITSET_NOMASK, 0, nullptr);
      mnl_attr_put_u32(m, ETHTOOL_A_BITSET_SIZE, 93);
      mnl_attr_put(m, ETHTOOL_A_BITSET_VALUE, sizeof words, words);
      mnl_attr_nest_end(m, peer);
    }
    mnl_attr_put_u32(m, ETHTOOL_A_LINKMODES_SPEED, speed);
    if (lanes != 0) mnl_attr_put_u32(m, ETHTOOL_A_LINKMODES_LANES, lanes);
    dump.End();
  };
  put("eth2", 100000, 4,
      {ETHTOOL_LINK_MODE_100000baseCR4_Full_BIT, ETHTOOL_LINK_MODE_200000baseCR4_Full_BIT});
  put("eth4", 400000, 4, {ETHTOOL_LINK_MODE_400000baseCR4_Full_BIT});
  put("veth0", 10000, 0, {});
  return dump.Done();
}

LinkEthtoolRead FixtureRead(int fec_error = 0) {
  return [fec_error]() -> LinkEthtoolDumps {
    LinkEthtoolDumps dumps{std::vector<sys::FecReading>{}, std::vector<sys::LinkModesReading>{}};
    const std::string fec = FecDump(), modes = ModesDump();
    if (fec_error != 0) {
      dumps.fec = std::unexpected(fec_error);
    } else {
      EXPECT_EQ(sys::ParseFecDump(fec.data(), fec.size(), *dumps.fec), 0);
    }
    EXPECT_EQ(sys::ParseLinkModesDump(modes.data(), modes.size(), *dumps.modes), 0);
    return dumps;
  };
}

std::vector<LinkPort> Ports() {
  return {{.device = "mlx5_0", .port = "1", .netdev = "eth2"},
          {.device = "mlx5_1", .port = "1", .netdev = "eth3"},
          {.device = "bnxt_re0", .port = "1", .netdev = "eth4"},
          {.device = "rxe0", .port = "1", .netdev = "veth0"},
          {.device = "mlx5_2", .port = "1", .netdev = "", .native_ib = true}};
}

LinkOptions Synchronous() { return {.refresh_interval = 0s, .static_refresh_interval = 0s}; }

TEST(LinkFec, SeriesAndValues) {
  LinkCollector collector(Synchronous(), std::make_unique<FakePorts>(Ports()), NoModules(),
                          std::chrono::steady_clock::now, FixtureRead());
  const std::string text = Scrape(collector);
  const std::string eth2 = R"(device="mlx5_0",port="1",netdev="eth2")";
  const std::string eth3 = R"(device="mlx5_1",port="1",netdev="eth3")";
  const std::string eth4 = R"(device="bnxt_re0",port="1",netdev="eth4")";
  const std::string veth = R"(device="rxe0",port="1",netdev="veth0")";
  const std::string ib = R"(device="mlx5_2",port="1",netdev="")";
  EXPECT_TRUE(testing::MatchesGolden(text, "link_fec.prom"));
  const auto v = [&](const std::string& series) { return Value(text, series); };
  EXPECT_EQ(v("rdma_link_source_available{" + eth2 + ",source=\"fec\"}"), 1);
  EXPECT_EQ(v("rdma_link_source_available{" + eth2 + ",source=\"fec_hist\"}"), 0);
  EXPECT_EQ(v("rdma_link_fec_info{" + eth2 + ",mode=\"rs\",auto=\"0\"}"), 1);
  EXPECT_EQ(v("rdma_link_fec_corrected_codewords_total{" + eth2 + ",source=\"netlink\"}"), 1234);
  EXPECT_EQ(v("rdma_link_fec_uncorrectable_codewords_total{" + eth2 + ",source=\"netlink\"}"), 5);
  EXPECT_EQ(v("rdma_link_fec_corrected_bits_total{" + eth2 + ",source=\"netlink\"}"), 98765);
  EXPECT_EQ(v("rdma_link_speed_bits_per_second{" + eth2 + "}"), 100e9);
  EXPECT_EQ(v("rdma_link_lanes{" + eth2 + "}"), 4);
  EXPECT_EQ(v("rdma_link_line_rate_bits_per_second{" + eth2 + "}"), 103.125e9);
  EXPECT_EQ(v("rdma_link_max_speed_bits_per_second{" + eth2 + "}"), 200e9);
  // BaseR with lanes: the total is the lanes' sum.
  EXPECT_EQ(v("rdma_link_fec_info{" + eth3 + ",mode=\"baser\",auto=\"0\"}"), 1);
  EXPECT_EQ(v("rdma_link_fec_corrected_codewords_total{" + eth3 + ",source=\"netlink\"}"), 100);
  EXPECT_EQ(
      v("rdma_link_fec_lane_corrected_codewords_total{" + eth3 + ",source=\"netlink\",lane=\"3\"}"),
      40);
  EXPECT_EQ(v("rdma_link_fec_lane_uncorrectable_codewords_total{" + eth3 +
              ",source=\"netlink\",lane=\"1\"}"),
            1);
  EXPECT_EQ(
      v("rdma_link_fec_lane_corrected_bits_total{" + eth3 + ",source=\"netlink\",lane=\"2\"}"), 20);
  EXPECT_EQ(v("rdma_link_common_max_speed_bits_per_second{" + eth4 + "}"), 400e9);
  EXPECT_EQ(text.find("rdma_link_common_max_speed_bits_per_second{" + eth2), std::string::npos);
  EXPECT_EQ(text.find("rdma_link_speed_bits_per_second{" + eth3), std::string::npos);
  EXPECT_EQ(v("rdma_link_source_available{" + eth3 + ",source=\"linkmodes\"}"), 0);
  // The histogram, total and per lane, and each bin's low bound as a value.
  EXPECT_EQ(v("rdma_link_source_available{" + eth4 + ",source=\"fec_hist\"}"), 1);
  EXPECT_EQ(v("rdma_link_fec_histogram_codewords_total{" + eth4 +
              ",source=\"netlink\",bin_low=\"0\",bin_high=\"0\"}"),
            445);
  EXPECT_EQ(v("rdma_link_fec_lane_histogram_codewords_total{" + eth4 +
              ",source=\"netlink\",bin_low=\"9\",bin_high=\"15\",lane=\"1\"}"),
            2);
  EXPECT_EQ(v("rdma_link_fec_histogram_bin_low_symbol_errors{" + eth4 +
              ",bin_low=\"9\",bin_high=\"15\"}"),
            9);
  EXPECT_EQ(v("rdma_link_line_rate_bits_per_second{" + eth4 + "}"), 425e9);
  // rxe on a veth: not in the FEC dump (EOPNOTSUPP, skipped by the kernel): 0, and no
  // counter; its link modes have no speed bit: no maximum.
  EXPECT_EQ(v("rdma_link_source_available{" + veth + ",source=\"fec\"}"), 0);
  EXPECT_EQ(v("rdma_link_source_available{" + veth + ",source=\"fec_hist\"}"), 0);
  EXPECT_EQ(v("rdma_link_speed_bits_per_second{" + veth + "}"), 10e9);
  EXPECT_EQ(text.find("rdma_link_max_speed_bits_per_second{" + veth), std::string::npos);
  EXPECT_EQ(text.find("rdma_link_fec_info{" + veth), std::string::npos);
  // Native InfiniBand: nothing of ethtool's.
  EXPECT_EQ(v("rdma_link_source_available{" + ib + ",source=\"fec\"}"), 0);
  EXPECT_EQ(v("rdma_link_source_available{" + ib + ",source=\"linkmodes\"}"), 0);
}

// A refused dump: every port's "fec" is 0 and no FEC counter is made up.
TEST(LinkFec, RefusedDumpIsUnavailableNotZero) {
  LinkCollector collector(Synchronous(), std::make_unique<FakePorts>(Ports()), NoModules(),
                          std::chrono::steady_clock::now, FixtureRead(EOPNOTSUPP));
  const std::string text = Scrape(collector);
  EXPECT_EQ(
      Value(text,
            R"(rdma_link_source_available{device="mlx5_0",port="1",netdev="eth2",source="fec"})"),
      0);
  EXPECT_EQ(text.find("rdma_link_fec_corrected"), std::string::npos);
  EXPECT_EQ(text.find("rdma_link_fec_info"), std::string::npos);
  // The link modes still read.
  EXPECT_EQ(
      Value(text, R"(rdma_link_speed_bits_per_second{device="mlx5_0",port="1",netdev="eth2"})"),
      100e9);
}

// The refresher reads the dumps once per refresh interval, never in a scrape.
TEST(LinkFec, OneDumpPerInterval) {
  // A clock the test moves while the refresher's thread reads it.
  auto advanced_ms = std::make_shared<std::atomic<int64_t>>(0);
  const auto fake_now = [advanced_ms] {
    return std::chrono::steady_clock::time_point() + 1000h +
           std::chrono::milliseconds(advanced_ms->load());
  };
  std::atomic<int> reads{0};
  const auto read = FixtureRead();
  LinkCollector collector({.refresh_interval = 50ms, .static_refresh_interval = 1h},
                          std::make_unique<FakePorts>(Ports()), NoModules(), fake_now,
                          [&reads, read] {
                            ++reads;
                            return read();
                          });
  Scrape(collector);  // starts the refresher
  const auto wait_for_reads = [&](int n) {
    for (int i = 0; i < 500 && reads.load() < n; ++i) std::this_thread::sleep_for(10ms);
    return reads.load();
  };
  EXPECT_EQ(wait_for_reads(1), 1);
  // Many passes (a tick is 5 ms), no new dump while the fake clock stands still.
  ASSERT_TRUE(collector.WaitForPasses(20, 5s));
  EXPECT_EQ(reads.load(), 1);
  *advanced_ms += 51;
  EXPECT_EQ(wait_for_reads(2), 2);
  ASSERT_TRUE(collector.WaitForPasses(40, 5s));
  EXPECT_EQ(reads.load(), 2);
  const std::string text = Scrape(collector);
  EXPECT_EQ(reads.load(), 2);  // the scrape read nothing
  EXPECT_NE(text.find("rdma_link_fec_corrected_codewords_total"), std::string::npos);
}

// ---- capture and replay

using Installed = testing::InstalledSession;

LinkFecSnapshot ReadThroughCapture(const std::filesystem::path& dir, bool record,
                                   const std::string& fec_bytes = "") {
  if (record) {
    auto writer = capture::Writer::Create(dir, false).value();
    LinkFecSnapshot snapshot;
    {
      Installed session(
          capture::Session::Recording(capture::Layout("/sys", "/proc"), writer.get()));
      EXPECT_TRUE(writer->BeginSample(1).has_value());
      if (fec_bytes.empty()) {
        snapshot = MakeLinkFecSnapshot(SystemLinkEthtoolRead()());
      } else {
        // Fixture dumps in place of the host's (whose interfaces have no FEC), as a recording
        // stores them.
        writer->File("netlink/ethtool/fec_get.bin", fec_bytes);
        writer->File("netlink/ethtool/linkmodes_get.bin", ModesDump());
      }
      EXPECT_TRUE(writer->CommitSample().has_value());
      EXPECT_TRUE(writer->WriteIndex("test", {"link"}).has_value());
    }
    return snapshot;
  }
  auto session = capture::Session::Replaying(capture::Layout("/sys", "/proc"),
                                             capture::Reader::Open(dir).value());
  capture::Session* replaying = session.get();
  Installed installed(std::move(session));
  replaying->NextSample();
  return MakeLinkFecSnapshot(SystemLinkEthtoolRead()());
}

// The host's own dumps recorded and replayed decode alike (without a socket under replay);
// a recorded fixture dump replays to its readings.
TEST(LinkFec, CaptureThenReplayGivesEqualReadings) {
  testing::TempDir dir;
  const LinkFecSnapshot recorded = ReadThroughCapture(dir.path() / "host", true);
  ASSERT_TRUE(recorded.read);
  EXPECT_EQ(ReadThroughCapture(dir.path() / "host", false), recorded);
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "host"));

  ReadThroughCapture(dir.path() / "fixture", true, FecDump());
  const LinkFecSnapshot replayed = ReadThroughCapture(dir.path() / "fixture", false);
  EXPECT_EQ(replayed.fec_error, 0);
  EXPECT_EQ(replayed, MakeLinkFecSnapshot(FixtureRead()()));
  ASSERT_EQ(replayed.fec.count("eth4"), 1U);
  EXPECT_EQ(replayed.fec.at("eth4").histogram.size(), 3U);
  EXPECT_EQ(replayed.fec.at("eth2").corrected.total, 1234U);
}

// This host: its interfaces (virtio, veth, lo) have no get_fecparam: the kernel leaves them
// out of the FEC dump (net/ethtool/netlink.c skips -EOPNOTSUPP), so every one is "fec" 0.
TEST(LinkFec, HostInterfacesWithoutFecAreUnavailable) {
  const LinkEthtoolDumps dumps = SystemLinkEthtoolRead()();
  if (!dumps.fec && dumps.fec.error() == ENOENT) GTEST_SKIP() << "no ethtool netlink family";
  ASSERT_TRUE(dumps.fec.has_value()) << std::strerror(dumps.fec.error());
  const LinkFecSnapshot snapshot = MakeLinkFecSnapshot(dumps);
  MetricSet set;
  const MetricDesc available{"rdma_link_source_available", "h", prometheus::MetricType::Gauge};
  char name[IF_NAMESIZE] = "lo";
  for (const char* candidate : {"eth0", "lo"}) {
    if (if_nametoindex(candidate) != 0) {
      std::snprintf(name, sizeof name, "%s", candidate);
      break;
    }
  }
  if (snapshot.fec.count(name) != 0) GTEST_SKIP() << name << " reports FEC on this host";
  const LinkPort port{.device = "", .port = "", .netdev = name};
  MapLinkFec({{"device", ""}, {"port", ""}, {"netdev", name}}, port, snapshot, available, set);
  const std::string text = testing::Serialise(set.Take());
  EXPECT_NE(text.find(std::string("rdma_link_source_available{device=\"\",port=\"\",netdev=\"") +
                      name + "\",source=\"fec\"} 0"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace rdmascope
