#include <gtest/gtest.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>

#include "collectors/ethtool.h"
#include "unit/fixture_tree.h"

namespace rdmascope {
namespace {

using testing::FixturePath;
using testing::ParseEthtoolS;
using testing::ReadText;

std::vector<NetdevSnapshot> FixtureNetdevs() {
  NetdevSnapshot mlx5{.name = "ens1f0np0"};
  mlx5.driver = sys::DriverInfo{"mlx5_core", "6.1.0", "22.36.1010 (MT_0000000359)", "0000:3b:00.0"};
  mlx5.stats = ParseEthtoolS(ReadText(FixturePath("ethtool/mlx5_cx6dx.txt")));
  mlx5.coalesce = sys::CoalesceSettings{8, 16, true, false};
  // `dcb app add dev ens1f0np0 dscp-prio 26:3 48:6`: RoCE's DSCP on the PFC priority, CNPs on 6.
  sys::DscpMap dscp;
  dscp.priorities[26] = 1U << 3;
  dscp.priorities[48] = 1U << 6;
  dscp.entries = 2;
  mlx5.pfc = sys::PfcConfig{.capability = 8, .enabled_mask = 0x08, .dscp = dscp};
  mlx5.mtu = 4200;
  mlx5.numa_node = 1;

  NetdevSnapshot ice{.name = "ens801f0"};
  ice.driver = sys::DriverInfo{"ice", "6.1.0", "4.20 0x8001778b 1.3346.0", "0000:af:00.0"};
  ice.stats = ParseEthtoolS(ReadText(FixturePath("ethtool/ice_e810.txt")));
  ice.mtu = 1500;
  ice.numa_node = -1;

  // The kernel's own string tables, in the order the drivers emit them:
  // i40e_xl710.txt from i40e_ethtool.c i40e_get_stat_strings() (2 queue pairs),
  // bnxt_p2100.txt from bnxt_ethtool.c bnxt_get_strings() (2 rings, TPA v2, port stats).
  NetdevSnapshot i40e{.name = "ens785f0"};
  i40e.driver = sys::DriverInfo{"i40e", "6.1.0", "9.20 0x8000d8c5 1.3429.0", "0000:5e:00.0"};
  i40e.stats = ParseEthtoolS(ReadText(FixturePath("ethtool/i40e_xl710.txt")));
  i40e.mtu = 9000;
  i40e.numa_node = 0;

  NetdevSnapshot bnxt{.name = "enp65s0f0np0"};
  bnxt.driver = sys::DriverInfo{"bnxt_en", "6.1.0", "224.0.110.0/pkg 224.1.102.0", "0000:41:00.0"};
  bnxt.stats = ParseEthtoolS(ReadText(FixturePath("ethtool/bnxt_p2100.txt")));
  bnxt.mtu = 9000;

  // An interface whose driver answers nothing (lo), with a hostile name.
  NetdevSnapshot odd{.name = "we\"ird\\n\xff"};
  odd.mtu = 65536;
  return {mlx5, ice, i40e, bnxt, odd};
}

std::string Render(QueueStatsMode mode, const NameFilter& stats = NameFilter()) {
  MetricSet out;
  MapNetdevs(FixtureNetdevs(), stats, mode, out);
  EXPECT_EQ(out.dropped_duplicates(), 0U);
  return testing::Serialise(out.Take());
}

TEST(EthtoolCollector, GoldenRaw) {
  EXPECT_TRUE(testing::MatchesGolden(Render(QueueStatsMode::kRaw), "ethtool_raw.prom"));
}

TEST(EthtoolCollector, GoldenQueueLabel) {
  EXPECT_TRUE(testing::MatchesGolden(Render(QueueStatsMode::kLabel), "ethtool_label.prom"));
}

TEST(EthtoolCollector, GoldenQueueSum) {
  EXPECT_TRUE(testing::MatchesGolden(Render(QueueStatsMode::kSum), "ethtool_sum.prom"));
}

double Value(const std::vector<prometheus::MetricFamily>& families, const std::string& name,
             const std::map<std::string, std::string>& labels) {
  for (const auto& family : families) {
    if (family.name != name) continue;
    for (const auto& metric : family.metric) {
      size_t matched = 0;
      for (const auto& label : metric.label) {
        const auto it = labels.find(label.name);
        if (it != labels.end() && it->second == label.value) ++matched;
      }
      if (matched == labels.size()) {
        return family.type == prometheus::MetricType::Counter ? metric.counter.value
               : family.type == prometheus::MetricType::Gauge ? metric.gauge.value
                                                              : metric.untyped.value;
      }
    }
  }
  return -1;
}

// mlx5's rx_pause_ctrl_phy is a fallback for drivers without rx_global_pause, and never beside
// per-priority pause counters (PFC on), whose frames it may count as global pause.
TEST(EthtoolCollector, PauseCtrlPhyOnlyWithoutPfcCounters) {
  const auto global_rx = [](sys::EthtoolStats stats) {
    NetdevSnapshot dev;
    dev.name = "eth0";
    dev.stats = std::move(stats);
    MetricSet out;
    MapNetdevs({dev}, NameFilter(), QueueStatsMode::kRaw, out);
    return Value(out.Take(), "rdma_netdev_pause_frames_total",
                 {{"device", "eth0"}, {"direction", "rx"}, {"priority", "global"}});
  };
  EXPECT_EQ(global_rx({{"rx_pause_ctrl_phy", 40}}), 40) << "no PFC: the 802.3 counter is all";
  EXPECT_EQ(global_rx({{"rx_pause_ctrl_phy", 40}, {"rx_prio3_pause", 40}}), -1)
      << "PFC on priority 3: its frames would read as global pause";
  EXPECT_EQ(global_rx({{"rx_pause_ctrl_phy", 40}, {"rx_global_pause", 0}}), 0);
}

TEST(EthtoolCollector, NormalisedCountersPickTheDocumentedNames) {
  MetricSet out;
  MapNetdevs(FixtureNetdevs(), NameFilter(), QueueStatsMode::kRaw, out);
  const auto families = out.Take();
  EXPECT_EQ(Value(families, "rdma_netdev_crc_errors_total", {{"device", "ens1f0np0"}}), 3);
  EXPECT_EQ(Value(families, "rdma_netdev_crc_errors_total", {{"device", "ens801f0"}}), 5);
  EXPECT_EQ(Value(families, "rdma_netdev_crc_errors_total", {{"device", "enp65s0f0np0"}}), 11);
  EXPECT_EQ(Value(families, "rdma_netdev_crc_errors_total", {{"device", "ens785f0"}}), 13);
  // mlx5: rx_global_pause (listed only while global pause is on) wins over the 802.3
  // MAC-control counter, which may count PFC frames too.
  EXPECT_EQ(Value(families, "rdma_netdev_pause_frames_total",
                  {{"device", "ens1f0np0"}, {"direction", "rx"}, {"priority", "global"}}),
            41);
  EXPECT_EQ(Value(families, "rdma_netdev_pause_frames_total",
                  {{"device", "ens1f0np0"}, {"direction", "rx"}, {"priority", "3"}}),
            9001);
  EXPECT_EQ(Value(families, "rdma_netdev_pause_frames_total",
                  {{"device", "ens801f0"}, {"direction", "rx"}, {"priority", "3"}}),
            700);
  EXPECT_EQ(Value(families, "rdma_netdev_pause_frames_total",
                  {{"device", "enp65s0f0np0"}, {"direction", "tx"}, {"priority", "3"}}),
            8);
  // i40e per-priority pause (port.rx_priority_3_xoff_rx / port.tx_priority_3_xoff_tx); the
  // xon counters of the same priority are not pause-on frames.
  EXPECT_EQ(Value(families, "rdma_netdev_pause_frames_total",
                  {{"device", "ens785f0"}, {"direction", "rx"}, {"priority", "3"}}),
            510);
  EXPECT_EQ(Value(families, "rdma_netdev_pause_frames_total",
                  {{"device", "ens785f0"}, {"direction", "tx"}, {"priority", "3"}}),
            14);
  EXPECT_EQ(Value(families, "rdma_netdev_pause_frames_total",
                  {{"device", "ens785f0"}, {"direction", "rx"}, {"priority", "global"}}),
            6);
  EXPECT_EQ(
      Value(families, "rdma_netdev_discards_total", {{"device", "ens785f0"}, {"direction", "rx"}}),
      21);
  // bnxt_en: port discards (rx_stat_discard) and ring discards (rx_total_ring_discards: the
  // host had no buffer) are different series.
  EXPECT_EQ(Value(families, "rdma_netdev_discards_total",
                  {{"device", "enp65s0f0np0"}, {"direction", "rx"}}),
            17);
  EXPECT_EQ(Value(families, "rdma_netdev_discards_total",
                  {{"device", "enp65s0f0np0"}, {"direction", "tx"}}),
            4);
  EXPECT_EQ(Value(families, "rdma_netdev_ring_discards_total",
                  {{"device", "enp65s0f0np0"}, {"direction", "rx"}}),
            2);
  EXPECT_EQ(Value(families, "rdma_netdev_ring_discards_total",
                  {{"device", "enp65s0f0np0"}, {"direction", "tx"}}),
            1);
  EXPECT_EQ(Value(families, "rdma_netdev_ring_discards_total",
                  {{"device", "ens1f0np0"}, {"direction", "rx"}}),
            7);
  EXPECT_EQ(Value(families, "rdma_netdev_pause_storm_events_total",
                  {{"device", "ens1f0np0"}, {"level", "warning"}}),
            2);
  EXPECT_EQ(
      Value(families, "rdma_netdev_pfc_enabled", {{"device", "ens1f0np0"}, {"priority", "3"}}), 1);
  EXPECT_EQ(
      Value(families, "rdma_netdev_pfc_enabled", {{"device", "ens1f0np0"}, {"priority", "0"}}), 0);
  // Absent on drivers without such counters: a missing series, never 0.
  EXPECT_EQ(Value(families, "rdma_netdev_symbol_errors_total", {{"device", "ens801f0"}}), -1);
}

// The DCB APP table's DSCP map: a trust flag per interface and one info series per entry; no
// series at all when the table was not read (old kernel, malformed reply).
TEST(EthtoolCollector, DscpTrustAndMap) {
  sys::DscpMap dscp_trust;
  for (int dscp = 0; dscp < 64; ++dscp) dscp_trust.priorities[dscp] = 1U << (dscp >> 3);
  dscp_trust.entries = 64;
  NetdevSnapshot trusting{.name = "ens1f0np0"};
  trusting.pfc = sys::PfcConfig{.capability = 8, .enabled_mask = 0x08, .dscp = dscp_trust};
  NetdevSnapshot pcp{.name = "ens1f1np1"};
  pcp.pfc = sys::PfcConfig{.capability = 8, .enabled_mask = 0x08, .dscp = sys::DscpMap{}};
  NetdevSnapshot unread{.name = "ens2f0np0"};
  unread.pfc =
      sys::PfcConfig{.capability = 8, .enabled_mask = 0x08, .dscp_error = "truncated APP table"};
  MetricSet out;
  MapNetdevs({trusting, pcp, unread}, NameFilter(), QueueStatsMode::kRaw, out);
  const auto families = out.Take();
  EXPECT_EQ(Value(families, "rdma_netdev_dscp_trust", {{"device", "ens1f0np0"}}), 1);
  EXPECT_EQ(Value(families, "rdma_netdev_dscp_trust", {{"device", "ens1f1np1"}}), 0);
  EXPECT_EQ(Value(families, "rdma_netdev_dscp_trust", {{"device", "ens2f0np0"}}), -1);
  EXPECT_EQ(Value(families, "rdma_netdev_dscp_priority_info",
                  {{"device", "ens1f0np0"}, {"dscp", "26"}, {"priority", "3"}}),
            1);
  size_t entries = 0;
  for (const auto& family : families) {
    if (family.name == "rdma_netdev_dscp_priority_info") entries = family.metric.size();
  }
  EXPECT_EQ(entries, 64U);  // only the trusting interface's entries
  // PFC is still served when the APP table could not be read.
  EXPECT_EQ(
      Value(families, "rdma_netdev_pfc_enabled", {{"device", "ens2f0np0"}, {"priority", "3"}}), 1);
}

// Kernels before v6.4 name bnxt's ring discard sum rx_total_discard_pkts (bnxt_sw_func_stats).
TEST(EthtoolCollector, BnxtOldRingDiscardName) {
  NetdevSnapshot dev{.name = "eth0"};
  dev.stats = sys::EthtoolStats{{"[0]: rx_discards", 5},
                                {"rx_total_discard_pkts", 5},
                                {"tx_total_discard_pkts", 0},
                                {"rx_stat_discard", 9}};
  MetricSet out;
  MapNetdevs({dev}, NameFilter(), QueueStatsMode::kRaw, out);
  const auto families = out.Take();
  EXPECT_EQ(Value(families, "rdma_netdev_ring_discards_total", {{"direction", "rx"}}), 5);
  EXPECT_EQ(Value(families, "rdma_netdev_discards_total", {{"direction", "rx"}}), 9);
}

// Issue #18 item 6: a NIC outside the driver table (here one without any ethtool stats, and a
// virtio_net whose names carry no CRC counter) still feeds the CRC alert from the kernel's
// standard statistics/rx_crc_errors; where the driver has a name, the driver's counter wins.
TEST(EthtoolCollector, StandardLinkStatisticsBackTheCrcCounter) {
  NetdevSnapshot unknown{.name = "enp1s0"};
  unknown.link_errors = {{"crc", 12}, {"frame", 3}, {"fifo", 0}, {"missed", 7}};
  NetdevSnapshot virtio{.name = "eth0"};
  virtio.stats = sys::EthtoolStats{{"rx_queue_0_packets", 1}};
  virtio.link_errors = {{"crc", 4}};
  NetdevSnapshot mlx5{.name = "ens1f0np0"};
  mlx5.stats = sys::EthtoolStats{{"rx_crc_errors_phy", 40}};
  mlx5.link_errors = {{"crc", 39}};
  MetricSet out;
  MapNetdevs({unknown, virtio, mlx5}, NameFilter(), QueueStatsMode::kRaw, out);
  const auto families = out.Take();
  EXPECT_EQ(Value(families, "rdma_netdev_crc_errors_total", {{"device", "enp1s0"}}), 12);
  EXPECT_EQ(Value(families, "rdma_netdev_crc_errors_total", {{"device", "eth0"}}), 4);
  EXPECT_EQ(Value(families, "rdma_netdev_crc_errors_total", {{"device", "ens1f0np0"}}), 40)
      << "the driver's PHY counter wins over the kernel's";
  EXPECT_EQ(Value(families, "rdma_netdev_receive_errors_total",
                  {{"device", "enp1s0"}, {"error", "missed"}}),
            7);
  EXPECT_EQ(Value(families, "rdma_netdev_receive_errors_total",
                  {{"device", "ens1f0np0"}, {"error", "crc"}}),
            39)
      << "the standard statistics are exported as they are";
  NetdevSnapshot bare{.name = "eth7"};
  MetricSet none;
  MapNetdevs({bare}, NameFilter(), QueueStatsMode::kRaw, none);
  const auto nothing = none.Take();
  EXPECT_EQ(Value(nothing, "rdma_netdev_crc_errors_total", {{"device", "eth7"}}), -1)
      << "no source: a missing series, never 0";
}

TEST(EthtoolCollector, StatFilterLimitsRawStatsOnly) {
  MetricSet out;
  MapNetdevs(FixtureNetdevs(), NameFilter("rx_.*", ".*pause.*"), QueueStatsMode::kRaw, out);
  const auto families = out.Take();
  EXPECT_EQ(Value(families, "rdma_ethtool_stat", {{"stat", "tx_packets"}}), -1);
  EXPECT_EQ(Value(families, "rdma_ethtool_stat", {{"stat", "rx_prio3_pause"}}), -1);
  EXPECT_EQ(Value(families, "rdma_ethtool_stat", {{"device", "ens1f0np0"}, {"stat", "rx_packets"}}),
            104501);
  // Normalised counters still see every stat.
  EXPECT_EQ(Value(families, "rdma_netdev_pause_frames_total",
                  {{"device", "ens1f0np0"}, {"direction", "tx"}, {"priority", "3"}}),
            17);
}

TEST(EthtoolCollector, DuplicateDriverNamesCostOneSeriesNotTheScrape) {
  NetdevSnapshot dev{.name = "eth9"};
  dev.stats = sys::EthtoolStats{{"rx_packets", 1}, {"rx_packets", 2}, {"tx_packets", 3}};
  MetricSet out;
  MapNetdevs({dev}, NameFilter(), QueueStatsMode::kRaw, out);
  EXPECT_EQ(out.dropped_duplicates(), 1U);
  const auto families = out.Take();
  EXPECT_EQ(Value(families, "rdma_ethtool_stat", {{"stat", "rx_packets"}}), 1);
  EXPECT_EQ(Value(families, "rdma_ethtool_stat", {{"stat", "tx_packets"}}), 3);
}

class FakeSource : public NetdevSource {
 public:
  std::vector<NetdevSnapshot> Read(const NameFilter& devices) const override {
    std::vector<NetdevSnapshot> out;
    for (auto& dev : FixtureNetdevs()) {
      if (devices.Allows(dev.name)) out.push_back(dev);
    }
    return out;
  }
};

TEST(EthtoolCollector, DeviceFilterAndNoData) {
  EthtoolCollector only_ice(EthtoolOptions{.device_include = "ens8.*"},
                            std::make_unique<FakeSource>());
  MetricSet out;
  EXPECT_FALSE(only_ice.Collect(out).no_data);
  for (const auto& family : out.Take()) {
    for (const auto& metric : family.metric) EXPECT_EQ(metric.label[0].value, "ens801f0");
  }
  EthtoolCollector none(EthtoolOptions{.device_include = "nothing"},
                        std::make_unique<FakeSource>());
  EXPECT_TRUE(none.Collect(out).no_data);
}

// A network namespace as SIOCETHTOOL, SIOCGIFMTU and SIOCGIFINDEX show it, with a count of the
// commands each interface served.
struct FakeNetns {
  struct Interface {
    int ifindex;
    int mtu = 1500;
    std::string driver = "veth";
    uint32_t rx_usecs = 0;
    std::vector<std::string> stats{"peer_ifindex", "rx_queue_0_xdp_packets"};
    uint64_t value = 0;
  };
  std::map<std::string, Interface, std::less<>> interfaces;
  std::map<std::string, std::vector<uint32_t>, std::less<>> served;

  int EthtoolCall(std::string_view name, void* command) {
    const auto it = interfaces.find(name);
    if (it == interfaces.end()) return ENODEV;
    const Interface& dev = it->second;
    uint32_t cmd;
    std::memcpy(&cmd, command, sizeof cmd);
    served[std::string(name)].push_back(cmd);
    const auto n = static_cast<uint32_t>(dev.stats.size());
    switch (cmd) {
      case ETHTOOL_GDRVINFO: {
        auto* info = static_cast<ethtool_drvinfo*>(command);
        std::strncpy(info->driver, dev.driver.c_str(), sizeof info->driver - 1);
        return 0;
      }
      case ETHTOOL_GCOALESCE:
        static_cast<ethtool_coalesce*>(command)->rx_coalesce_usecs = dev.rx_usecs;
        return 0;
      case ETHTOOL_GSSET_INFO: {
        auto* info = static_cast<ethtool_sset_info*>(command);
        if (info->sset_mask != 1ULL << ETH_SS_STATS) return EOPNOTSUPP;  // no private flags
        std::memcpy(static_cast<char*>(command) + sizeof(ethtool_sset_info), &n, sizeof n);
        return 0;
      }
      case ETHTOOL_GSTRINGS: {
        auto* strings = static_cast<ethtool_gstrings*>(command);
        strings->len = n;
        for (uint32_t i = 0; i < n; ++i) {
          char* slot = reinterpret_cast<char*>(strings->data) + size_t{i} * ETH_GSTRING_LEN;
          std::memset(slot, 0, ETH_GSTRING_LEN);
          std::memcpy(slot, dev.stats[i].data(), dev.stats[i].size());
        }
        return 0;
      }
      case ETHTOOL_GSTATS: {
        auto* stats = static_cast<ethtool_stats*>(command);
        stats->n_stats = n;
        for (uint32_t i = 0; i < n; ++i) stats->data[i] = dev.value + i;
        return 0;
      }
      default:
        return EOPNOTSUPP;
    }
  }
  int InterfaceCall(std::string_view name, unsigned long request, int& value) const {
    const auto it = interfaces.find(name);
    if (it == interfaces.end()) return ENODEV;
    value = request == SIOCGIFMTU ? it->second.mtu : it->second.ifindex;
    return 0;
  }
  size_t Count(const std::string& name, uint32_t cmd) {
    return std::ranges::count(served[name], cmd);
  }
};

class SystemNetdevSourceTest : public ::testing::Test {
 protected:
  SystemNetdevSourceTest() {
    AddInterface("veth0", 7);
    std::filesystem::create_directories(root.path() / "devices/pci0000:00/0000:3b:00.0");
    std::ofstream(root.path() / "devices/pci0000:00/0000:3b:00.0/numa_node") << "1\n";
    AddInterface("eth0", 2);
    std::filesystem::create_directory_symlink(root.path() / "devices/pci0000:00/0000:3b:00.0",
                                              root.path() / "class/net/eth0/device");
  }
  void AddInterface(const std::string& name, int ifindex) {
    std::filesystem::create_directories(root.path() / "class/net" / name);
    netns.interfaces[name] = {.ifindex = ifindex};
  }
  SystemNetdevSource Source(std::chrono::nanoseconds refresh) {
    return SystemNetdevSource(
        root.path(), false, refresh, [this] { return now; },
        [this]() -> std::expected<sys::Ethtool, int> {
          return sys::Ethtool::WithIoctl(
              [this](std::string_view name, void* command) {
                return netns.EthtoolCall(name, command);
              },
              [this](std::string_view name, unsigned long request, int& value) {
                return netns.InterfaceCall(name, request, value);
              });
        });
  }
  static const NetdevSnapshot& Find(const std::vector<NetdevSnapshot>& read,
                                    const std::string& name) {
    const auto it = std::ranges::find(read, name, &NetdevSnapshot::name);
    EXPECT_NE(it, read.end()) << name;
    return *it;
  }

  testing::TempDir root;
  FakeNetns netns;
  std::chrono::steady_clock::time_point now =
      std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
};

// Driver info and coalescing are served from the last reading within the refresh interval and
// read again after it; MTU and stats are read at every scrape.
TEST_F(SystemNetdevSourceTest, SettingsServedBetweenRefreshesStatsAndMtuEveryScrape) {
  const SystemNetdevSource source = Source(std::chrono::seconds(60));
  netns.interfaces["veth0"].rx_usecs = 8;
  auto read = source.Read(NameFilter());
  ASSERT_EQ(read.size(), 2U);
  EXPECT_EQ(Find(read, "veth0").coalesce->rx_usecs, 8U);

  netns.interfaces["veth0"].rx_usecs = 50;
  netns.interfaces["veth0"].mtu = 9000;
  netns.interfaces["veth0"].value = 100;
  now += std::chrono::seconds(59);
  read = source.Read(NameFilter());
  const NetdevSnapshot& between = Find(read, "veth0");
  EXPECT_EQ(between.coalesce->rx_usecs, 8U) << "served from the last reading";
  EXPECT_EQ(between.driver->driver, "veth");
  EXPECT_EQ(between.mtu, 9000) << "MTU at every scrape";
  ASSERT_TRUE(between.stats);
  EXPECT_EQ(between.stats->at(0).second, 100U) << "stats at every scrape";
  EXPECT_EQ(netns.Count("veth0", ETHTOOL_GCOALESCE), 1U);
  EXPECT_EQ(netns.Count("veth0", ETHTOOL_GDRVINFO), 1U);
  // A count query for the stats at each read, one for the private flags at the first only.
  EXPECT_EQ(netns.Count("veth0", ETHTOOL_GSSET_INFO), 3U);

  now += std::chrono::seconds(1);
  read = source.Read(NameFilter());
  EXPECT_EQ(Find(read, "veth0").coalesce->rx_usecs, 50U) << "read again after the interval";
  EXPECT_EQ(netns.Count("veth0", ETHTOOL_GCOALESCE), 2U);
}

// The stat names are read twice at an interface's first scrape (before and after the values),
// then once per scrape, refreshes included; an interface re-created under its name with other
// stats of the same count is paired with its own names.
TEST_F(SystemNetdevSourceTest, StatNamesReadOncePerScrapeOnceKnown) {
  const SystemNetdevSource source = Source(std::chrono::seconds(60));
  source.Read(NameFilter());
  EXPECT_EQ(netns.Count("veth0", ETHTOOL_GSTRINGS), 2U);
  for (int scrape = 0; scrape < 3; ++scrape) {
    now += std::chrono::seconds(30);  // one refresh among them
    source.Read(NameFilter());
  }
  EXPECT_EQ(netns.Count("veth0", ETHTOOL_GSTRINGS), 5U);
  EXPECT_EQ(netns.Count("veth0", ETHTOOL_GSTATS), 4U);

  netns.interfaces["veth0"] = {.ifindex = 11, .stats = {"tx_timeout", "rx_queue_0_drops"}};
  netns.interfaces["veth0"].value = 40;
  now += std::chrono::seconds(1);
  const auto read = source.Read(NameFilter());
  const NetdevSnapshot& recreated = Find(read, "veth0");
  ASSERT_TRUE(recreated.stats);
  EXPECT_EQ(*recreated.stats, (sys::EthtoolStats{{"tx_timeout", 40}, {"rx_queue_0_drops", 41}}));
}

// --collector.ethtool.refresh-interval=0s: a coalescing change shows at the next scrape.
TEST_F(SystemNetdevSourceTest, RefreshIntervalZeroReadsSettingsEveryScrape) {
  const SystemNetdevSource source = Source(std::chrono::seconds(0));
  netns.interfaces["veth0"].rx_usecs = 8;
  EXPECT_EQ(Find(source.Read(NameFilter()), "veth0").coalesce->rx_usecs, 8U);
  netns.interfaces["veth0"].rx_usecs = 50;
  EXPECT_EQ(Find(source.Read(NameFilter()), "veth0").coalesce->rx_usecs, 50U);
}

// Within the refresh interval an interface re-created under its name (a new ifindex) is read at
// once, not served the settings of the one it replaced; a new interface likewise.
TEST_F(SystemNetdevSourceTest, NewAndRecreatedInterfacesAreReadAtOnce) {
  const SystemNetdevSource source = Source(std::chrono::seconds(60));
  ASSERT_EQ(source.Read(NameFilter()).size(), 2U);

  netns.interfaces["veth0"] = {.ifindex = 9, .driver = "dummy", .rx_usecs = 3};
  AddInterface("veth1", 10);
  netns.interfaces["veth1"].rx_usecs = 4;
  now += std::chrono::seconds(1);
  const auto read = source.Read(NameFilter());
  ASSERT_EQ(read.size(), 3U);
  EXPECT_EQ(Find(read, "veth0").driver->driver, "dummy");
  EXPECT_EQ(Find(read, "veth0").coalesce->rx_usecs, 3U);
  EXPECT_EQ(Find(read, "veth1").coalesce->rx_usecs, 4U);
  EXPECT_EQ(netns.Count("eth0", ETHTOOL_GDRVINFO), 1U) << "the unchanged one is not read again";
}

// Only an interface with a parent device has a NUMA node (one lstat decides, veth has none).
TEST_F(SystemNetdevSourceTest, NumaNodeOfInterfacesWithADevice) {
  const SystemNetdevSource source = Source(std::chrono::seconds(60));
  const auto read = source.Read(NameFilter());
  EXPECT_EQ(Find(read, "eth0").numa_node, 1);
  EXPECT_FALSE(Find(read, "veth0").numa_node);
}

}  // namespace
}  // namespace rdmascope
