#include <gtest/gtest.h>

#include <cerrno>
#include <map>
#include <optional>

#include "collectors/rdma.h"
#include "unit/fixture_tree.h"

namespace rdmascope {
namespace {

using testing::FixturePath;
using testing::MaterialiseTree;
using testing::TempDir;

class FakeMtu : public PortMtuQuerier {
 public:
  std::map<std::pair<std::string, uint32_t>, PortMtu> Query(
      const std::vector<RdmaDevice>& devices) const override {
    std::map<std::pair<std::string, uint32_t>, PortMtu> out;
    for (const auto& device : devices) {
      // The soft-RoCE default: active 1024 below max 4096 (the MTU pitfall).
      if (device.name == "rxe0") out[{device.name, 1}] = {1024, 4096};
      if (device.name == "mlx5_0") out[{device.name, 1}] = {4096, 4096};
    }
    return out;
  }
};

// What RDMA netlink reports on the host of rdma_hosts.tree: the netdevs of this namespace.
class FakeNetdevs : public PortNetdevSource {
 public:
  explicit FakeNetdevs(PortNetdevs netdevs) : netdevs_(std::move(netdevs)) {}
  std::expected<PortNetdevs, int> Read() const override { return netdevs_; }

 private:
  PortNetdevs netdevs_;
};

class FailingNetdevs : public PortNetdevSource {
 public:
  std::expected<PortNetdevs, int> Read() const override { return std::unexpected(EPROTONOSUPPORT); }
};

std::unique_ptr<PortNetdevSource> HostNetdevs() {
  return std::make_unique<FakeNetdevs>(PortNetdevs{
      {{"mlx5_0", 1}, "ens1f0np0"}, {{"irdma0", 1}, "ens801f0"}, {{"rxe0", 1}, "eth0"}});
}

// Collects a fixture tree; returns family name -> (labels -> value).
using Series = std::map<std::string, std::map<std::map<std::string, std::string>, double>>;
Series CollectTree(const std::string& tree, std::unique_ptr<PortNetdevSource> netdevs) {
  TempDir root;
  MaterialiseTree(FixturePath(tree), root.path());
  RdmaCollector collector(RdmaOptions{}, root.path(), nullptr, std::move(netdevs));
  MetricSet out;
  collector.Collect(out);
  EXPECT_EQ(out.dropped_duplicates(), 0U);
  Series series;
  for (const auto& family : out.Take()) {
    for (const auto& metric : family.metric) {
      std::map<std::string, std::string> labels;
      for (const auto& label : metric.label) labels[label.name] = label.value;
      series[family.name][labels] = family.type == prometheus::MetricType::Counter
                                        ? metric.counter.value
                                        : metric.gauge.value;
    }
  }
  return series;
}

std::optional<double> Value(const Series& series, const std::string& family,
                            const std::map<std::string, std::string>& labels) {
  const auto f = series.find(family);
  if (f == series.end()) return std::nullopt;
  const auto it = f->second.find(labels);
  if (it == f->second.end()) return std::nullopt;
  return it->second;
}

TEST(RdmaParse, NumberedState) {
  EXPECT_EQ(ParseNumberedState("4: ACTIVE"), std::make_pair(4U, std::string("ACTIVE")));
  EXPECT_EQ(ParseNumberedState("5: LinkUp\n"), std::make_pair(5U, std::string("LinkUp")));
  EXPECT_FALSE(ParseNumberedState("ACTIVE"));
  EXPECT_FALSE(ParseNumberedState("x: ACTIVE"));
  EXPECT_FALSE(ParseNumberedState(""));
}

TEST(RdmaParse, RateInBytesPerSecond) {
  EXPECT_DOUBLE_EQ(*ParseRateBytesPerSecond("100 Gb/sec (4X EDR)"), 12.5e9);
  EXPECT_DOUBLE_EQ(*ParseRateBytesPerSecond("2.5 Gb/sec (1X SDR)"), 312.5e6);
  EXPECT_DOUBLE_EQ(*ParseRateBytesPerSecond("400 Gb/sec (4X NDR)"), 50e9);
  EXPECT_FALSE(ParseRateBytesPerSecond("fast"));
  EXPECT_FALSE(ParseRateBytesPerSecond("100 Mb/sec"));
  EXPECT_FALSE(ParseRateBytesPerSecond("-1 Gb/sec"));
  EXPECT_EQ(ParseRateBytesPerSecond("0 GB/sec"), 0.0) << "an empty cage, out-of-tree drivers";
  EXPECT_FALSE(ParseRateBytesPerSecond("100 GB/sec")) << "bytes or bits? ambiguous";
}

// core/sysfs.c rate_show prints InfiniBand's signalling rate; the data rate takes the line
// coding off. Ethernet ports print the Ethernet speed (mlx5 names 40GbE "4X QDR"): as is.
TEST(RdmaParse, DataRateTakesInfiniBandLineCodingOff) {
  EXPECT_DOUBLE_EQ(*DataRateBytesPerSecond("40 Gb/sec (4X QDR)", "InfiniBand"), 4e9);
  EXPECT_DOUBLE_EQ(*DataRateBytesPerSecond("10 Gb/sec (4X SDR)", "InfiniBand"), 1e9);
  EXPECT_DOUBLE_EQ(*DataRateBytesPerSecond("20 Gb/sec (4X DDR)", "InfiniBand"), 2e9);
  EXPECT_NEAR(*DataRateBytesPerSecond("56 Gb/sec (4X FDR)", "InfiniBand") * 8, 54.545e9, 0.01e9);
  EXPECT_DOUBLE_EQ(*DataRateBytesPerSecond("40 Gb/sec (4X FDR10)", "InfiniBand"), 5e9);
  EXPECT_DOUBLE_EQ(*DataRateBytesPerSecond("100 Gb/sec (4X EDR)", "InfiniBand"), 12.5e9);
  EXPECT_DOUBLE_EQ(*DataRateBytesPerSecond("400 Gb/sec (4X NDR)", "InfiniBand"), 50e9);
  EXPECT_DOUBLE_EQ(*DataRateBytesPerSecond("40 Gb/sec (4X QDR)", "Ethernet"), 5e9)
      << "40GbE carries 40 Gb/s";
  EXPECT_DOUBLE_EQ(*DataRateBytesPerSecond("40 Gb/sec", "InfiniBand"), 5e9)
      << "no speed name: nothing to take off";
  EXPECT_FALSE(DataRateBytesPerSecond("fast (4X QDR)", "InfiniBand"));
}

TEST(RdmaSysfs, ReadsEveryDeviceOfTheFixture) {
  TempDir root;
  MaterialiseTree(FixturePath("sysfs/rdma_hosts.tree"), root.path());
  const auto devices = ReadRdmaDevices(root.path(), NameFilter());
  ASSERT_EQ(devices.size(), 5U);
  const RdmaDevice& mlx = devices[2];
  ASSERT_EQ(mlx.name, "mlx5_0");
  EXPECT_EQ(mlx.node_type, "CA");
  EXPECT_EQ(mlx.numa_node, 1);
  ASSERT_EQ(mlx.ports.size(), 1U);
  const RdmaPort& port = mlx.ports[0];
  EXPECT_EQ(port.state, 4U);
  EXPECT_EQ(port.netdev, "") << "sysfs does not say which namespace a GID's ndev is in";
  EXPECT_EQ(port.gids.size(), 4U) << "the all-zero GID must be skipped";
  EXPECT_EQ(port.gids[1].type, "RoCE v2");
  for (const auto& [name, value] : port.hw_counters) EXPECT_NE(name, "lifespan");
  for (const auto& [name, value] : port.counters) EXPECT_NE(name, "VL15_dropped") << "N/A";
}

TEST(RdmaSysfs, MalformedAttributesAreMissingNotZero) {
  TempDir root;
  MaterialiseTree(FixturePath("sysfs/rdma_hosts.tree"), root.path());
  const auto devices = ReadRdmaDevices(root.path(), NameFilter("broken0", ""));
  ASSERT_EQ(devices.size(), 1U);
  const RdmaDevice& broken = devices[0];
  EXPECT_FALSE(broken.numa_node);
  EXPECT_EQ(broken.node_type, "CA without a number");
  ASSERT_EQ(broken.ports.size(), 2U) << "'notaport' is not a port number";
  const RdmaPort& port = broken.ports[0];
  EXPECT_FALSE(port.state);
  EXPECT_FALSE(port.phys_state);
  EXPECT_FALSE(port.rate_bytes_per_second);
  EXPECT_TRUE(port.counters.empty()) << "negative, directory and overflowing values are dropped";
  ASSERT_EQ(port.hw_counters.size(), 1U);
  EXPECT_EQ(port.hw_counters[0].first, "weird\"name\\with{chars}");
  EXPECT_TRUE(broken.ports[1].hw_counters.empty());
}

TEST(RdmaSysfs, DeviceFilterAndAbsentTree) {
  TempDir root;
  MaterialiseTree(FixturePath("sysfs/rdma_hosts.tree"), root.path());
  EXPECT_EQ(ReadRdmaDevices(root.path(), NameFilter("mlx5_.*", "mlx5_1")).size(), 1U);
  TempDir empty;
  EXPECT_TRUE(ReadRdmaDevices(empty.path(), NameFilter()).empty());
}

TEST(RdmaCollector, GoldenExposition) {
  TempDir root;
  MaterialiseTree(FixturePath("sysfs/rdma_hosts.tree"), root.path());
  RdmaCollector collector(RdmaOptions{}, root.path(), std::make_unique<FakeMtu>(), HostNetdevs());
  MetricSet out;
  const CollectResult result = collector.Collect(out);
  EXPECT_FALSE(result.no_data);
  EXPECT_EQ(out.dropped_duplicates(), 0U);
  EXPECT_TRUE(testing::MatchesGolden(testing::Serialise(out.Take()), "rdma.prom"));
}

TEST(RdmaCollector, DataCountersAreWordsTimesFour) {
  TempDir root;
  MaterialiseTree(FixturePath("sysfs/rdma_hosts.tree"), root.path());
  RdmaCollector collector(RdmaOptions{"mlx5_1", ""}, root.path(), nullptr, nullptr);
  MetricSet out;
  collector.Collect(out);
  bool found = false;
  for (const auto& family : out.Take()) {
    if (family.name != "rdma_port_data_received_bytes_total") continue;
    ASSERT_EQ(family.metric.size(), 1U);
    EXPECT_DOUBLE_EQ(family.metric[0].counter.value, 4294967295.0 * 4);
    found = true;
  }
  EXPECT_TRUE(found);
}

// node_exporter's node_infiniband_info and our rdma_netdev_info name it firmware_version; the
// first name, fw_ver, stays with the same value until 0.2.0 so that queries keep working.
TEST(RdmaCollector, FirmwareVersionUnderItsNameAndTheDeprecatedOne) {
  const Series series = CollectTree("sysfs/rdma_hosts.tree", HostNetdevs());
  EXPECT_EQ(Value(series, "rdma_device_info",
                  {{"device", "mlx5_0"},
                   {"node_type", "CA"},
                   {"firmware_version", "22.36.1010"},
                   {"fw_ver", "22.36.1010"},
                   {"board_id", "MT_0000000359"},
                   {"hca_type", "MT4125"},
                   {"node_guid", "b8ce:f603:00e4:1a2c"}}),
            1);
}

TEST(RdmaCollector, NoDeviceIsNoDataNotFailure) {
  TempDir empty;
  RdmaCollector collector(RdmaOptions{}, empty.path(), std::make_unique<FakeMtu>(),
                          std::make_unique<FailingNetdevs>());
  MetricSet out;
  const CollectResult result = collector.Collect(out);
  EXPECT_TRUE(result.no_data);
  EXPECT_NE(result.detail.find("no RDMA device"), std::string::npos);
  EXPECT_EQ(out.sample_count(), 0U);
}

// Issue 18 item 3 (tests/fault/sysfs_faults.py found it with opendir failing under libfiu):
// /sys/class/infiniband present but unreadable (here a symbolic link loop: ELOOP even for
// root) is a failure with its reason, not "no RDMA device on this host".
TEST(RdmaCollector, UnreadableDeviceDirectoryIsAFailureNotNoData) {
  TempDir root;
  std::filesystem::create_directories(root.path() / "class");
  std::filesystem::create_directory_symlink("infiniband", root.path() / "class" / "infiniband");
  RdmaCollector collector(RdmaOptions{}, root.path(), std::make_unique<FakeMtu>(),
                          std::make_unique<FailingNetdevs>());
  MetricSet out;
  try {
    const CollectResult result = collector.Collect(out);
    ADD_FAILURE() << "collected, no_data=" << result.no_data << " detail=" << result.detail;
  } catch (const std::exception& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cannot list "), std::string::npos) << what;
    EXPECT_NE(what.find("class/infiniband: Too many levels of symbolic links"), std::string::npos)
        << what;
  }
  EXPECT_EQ(out.sample_count(), 0U);
}

// Issue #12 item 2. bnxt_re/hw_counters.c bnxt_re_stat_descs names active_* (live object
// counts read from atomics in bnxt_re_ib_get_hw_stats) and watermark_* (their high-water
// marks): values that go down, not counters. The device is renamed (rocep65s0f0), so the
// driver comes from device/driver: bnxt_re.rdma (auxiliary bus, Linux >= 6.3) or bnxt_en.
TEST(RdmaKernelCases, BnxtReObjectCountsAreGauges) {
  const Series s = CollectTree("sysfs/rdma_kernel_cases.tree", nullptr);
  const std::map<std::string, std::string> qps{
      {"device", "rocep65s0f0"}, {"port", "1"}, {"counter", "active_qps"}};
  EXPECT_EQ(Value(s, "rdma_port_hw_value", qps), 12.0);
  EXPECT_FALSE(Value(s, "rdma_port_hw_counter_total", qps));
  EXPECT_EQ(Value(s, "rdma_port_hw_value",
                  {{"device", "rocep65s0f0"}, {"port", "1"}, {"counter", "watermark_mrs"}}),
            128.0);
  EXPECT_EQ(s.at("rdma_port_hw_value").size(), 18U + 1U) << "every active_*/watermark_* file";
  EXPECT_EQ(Value(s, "rdma_port_hw_counter_total",
                  {{"device", "rocep65s0f0"}, {"port", "1"}, {"counter", "to_retransmits"}}),
            5.0)
      << "the driver's real counters stay counters";
  EXPECT_EQ(Value(s, "rdma_port_hw_value",
                  {{"device", "bnxt_re0"}, {"port", "1"}, {"counter", "active_qps"}}),
            2.0)
      << "pre-6.3 kernels: the RDMA device's parent is bnxt_en's PCI function";
  EXPECT_FALSE(IsHwCounterGauge("mlx5_ib.rdma", "active_qps")) << "knowledge is per driver";
  // Issue 26 item 10: mana's current_rate is a rate, not a count; bnxt_re's doorbell FIFO
  // register is read as it stands. mana_ib's ib_device is parented on the mana PCI function,
  // so `device/driver` names the PCI driver "mana", never the auxiliary "mana_ib.rdma".
  EXPECT_TRUE(IsHwCounterGauge("mana", "current_rate"));
  EXPECT_TRUE(IsHwCounterGauge("mana", "num_qps_congested"));
  EXPECT_FALSE(IsHwCounterGauge("mana", "requester_timeout"));
  EXPECT_TRUE(IsHwCounterGauge("bnxt_re.rdma", "db_fifo_register"));
  EXPECT_FALSE(IsHwCounterGauge("bnxt_re.rdma", "resize_cq_cnt"));
  EXPECT_FALSE(IsHwCounterGauge("", "watermark_qps"));
}

// Issue #12 item 4. mlx5 main.c mlx5_query_port_roce presets 4X QDR, DOWN and phys_state 3;
// core/sysfs.c rate_show then prints "40 Gb/sec (4X QDR)" for a port with no link.
TEST(RdmaKernelCases, DownPortHasNoRate) {
  const Series s = CollectTree("sysfs/rdma_kernel_cases.tree", nullptr);
  const std::map<std::string, std::string> down{{"device", "mlx5_2"}, {"port", "1"}};
  EXPECT_EQ(Value(s, "rdma_port_state", down), 1.0);
  EXPECT_EQ(Value(s, "rdma_port_physical_state", down), 3.0);
  EXPECT_FALSE(Value(s, "rdma_port_rate_bytes_per_second", down));
  EXPECT_EQ(Value(s, "rdma_port_rate_bytes_per_second", {{"device", "mlx5_4"}, {"port", "1"}}),
            12.5e9)
      << "an ACTIVE/LinkUp port keeps its rate";
  RdmaPort port{.state = 5, .phys_state = 5};
  EXPECT_TRUE(PortIsUp(port)) << "ACTIVE_DEFER is up";
  port.phys_state = 2;
  EXPECT_FALSE(PortIsUp(port)) << "ACTIVE but Polling";
}

// Issue #12 item 6. mlx5 in switchdev mode registers alloc_hw_device_stats (counters.c
// hw_switchdev_stats_ops): core/sysfs.c ib_setup_device_attrs puts them in
// /sys/class/infiniband/<dev>/hw_counters, the uplink port has none.
TEST(RdmaKernelCases, DeviceLevelHwCounters) {
  const Series s = CollectTree("sysfs/rdma_kernel_cases.tree", nullptr);
  EXPECT_EQ(
      Value(s, "rdma_device_hw_stat_total", {{"device", "mlx5_3"}, {"counter", "out_of_buffer"}}),
      311.0);
  EXPECT_EQ(Value(s, "rdma_device_hw_stat_total",
                  {{"device", "mlx5_3"}, {"counter", "local_ack_timeout_err"}}),
            7.0);
  EXPECT_FALSE(
      Value(s, "rdma_device_hw_stat_total", {{"device", "mlx5_3"}, {"counter", "lifespan"}}))
      << "lifespan is the refresh period, a setting";
  EXPECT_EQ(s.at("rdma_device_hw_stat_total").size(), 7U) << "mlx5_3's only, no other device";
}

// Issue #12 item 8. core/sysfs.c PORT_PMA_ATTR widths: show_pma_counter prints a 16-bit
// symbol_error that has stopped at 65535, an 8-bit link_downed at 255, a 32-bit
// port_xmit_wait and (no extended width) port_rcv_data at 4294967295.
TEST(RdmaKernelCases, SaturatedCountersAreFlagged) {
  const Series s = CollectTree("sysfs/rdma_kernel_cases.tree", nullptr);
  const auto saturated = [&](const std::string& counter) {
    return Value(s, "rdma_port_stat_saturated",
                 {{"device", "mlx5_4"}, {"port", "1"}, {"counter", counter}});
  };
  for (const char* counter : {"symbol_error", "port_rcv_errors", "port_xmit_discards",
                              "link_downed", "port_xmit_wait", "port_rcv_data"}) {
    EXPECT_EQ(saturated(counter), 1.0) << counter;
  }
  EXPECT_EQ(saturated("link_error_recovery"), 0.0) << "254 is one below the 8-bit maximum";
  EXPECT_EQ(saturated("port_xmit_data"), 0.0);
  EXPECT_EQ(saturated("VL15_dropped"), 0.0);
  EXPECT_EQ(Value(s, "rdma_port_symbol_errors_total", {{"device", "mlx5_4"}, {"port", "1"}}),
            65535.0)
      << "the counter itself is still exported as read";
  EXPECT_EQ(PortCounterWidth("unicast_rcv_packets"), std::nullopt) << "64-bit extended only";
}

// Issue #18 item 5. Before 4.5 (commit 145d9c5410 "IB/core: Display extended counter set if
// available") the 64-bit PortCountersExtended are in counters_ext/, the counters/ data and
// packet files saturate at 2^32 - 1: the 64-bit values win, under the counters/ names.
TEST(RdmaOldStacks, CountersExtReplacesSaturatingCounters) {
  const Series s = CollectTree("sysfs/rdma_old_stacks.tree", nullptr);
  const std::map<std::string, std::string> port{{"device", "mlx4_0"}, {"port", "1"}};
  EXPECT_EQ(Value(s, "rdma_port_data_transmitted_bytes_total", port), 4e10) << "words x 4";
  EXPECT_EQ(Value(s, "rdma_port_data_received_bytes_total", port), 8e10);
  EXPECT_EQ(Value(s, "rdma_port_packets_transmitted_total", port), 3e10);
  EXPECT_EQ(Value(s, "rdma_port_packets_received_total", port), 4e10);
  const auto counter = [&](const std::string& name) {
    return Value(s, "rdma_port_stat_total",
                 {{"device", "mlx4_0"}, {"port", "1"}, {"counter", name}});
  };
  EXPECT_EQ(counter("unicast_xmit_packets"), 29e9) << "extended-only, under its 4.5+ name";
  EXPECT_EQ(counter("multicast_rcv_packets"), 17.0);
  EXPECT_FALSE(counter("port_xmit_data_64")) << "no series under the legacy file name";
  const auto saturated = [&](const std::string& name) {
    return Value(s, "rdma_port_stat_saturated",
                 {{"device", "mlx4_0"}, {"port", "1"}, {"counter", name}});
  };
  EXPECT_FALSE(saturated("port_xmit_data")) << "the value is the 64-bit one";
  EXPECT_EQ(saturated("symbol_error"), 1.0) << "no 64-bit twin: still saturating";
}

// Issue 26 item 14: a counters_ext/ that an old driver stopped refreshing is behind the 32-bit
// counters/ it duplicates: the larger of the two is served, never the stale one.
TEST(RdmaOldStacks, StaleCountersExtNeverHidesTraffic) {
  RdmaPort port;
  port.counters = {{"port_rcv_data", 5000}, {"port_xmit_data", 4294967295ULL}};
  MergeLegacyExtendedCounters(port, {{"port_rcv_data_64", 10},
                                     {"port_xmit_data_64", 9000000000ULL},
                                     {"port_unicast_rcv_packets", 7}});
  const auto value = [&](const std::string& name) -> std::optional<uint64_t> {
    for (const auto& [file, v] : port.counters) {
      if (file == name) return v;
    }
    return std::nullopt;
  };
  EXPECT_EQ(value("port_rcv_data"), 5000U) << "stale 64-bit twin (10) behind the 32-bit count";
  EXPECT_EQ(value("port_xmit_data"), 9000000000U) << "the 64-bit twin past a saturated one";
  EXPECT_EQ(value("unicast_rcv_packets"), 7U);
  EXPECT_EQ(port.counters_64bit,
            (std::vector<std::string>{"port_xmit_data", "unicast_rcv_packets"}))
      << "the kept 32-bit value is still checked for saturation";
}

TEST(RdmaOldStacks, ZeroGigabytesIsARateOfZero) {
  const Series s = CollectTree("sysfs/rdma_old_stacks.tree", nullptr);
  EXPECT_EQ(Value(s, "rdma_port_rate_bytes_per_second", {{"device", "qib0"}, {"port", "1"}}), 0.0);
}

// Issue #12 item 9. core/sysfs.c print_gid_type prints ib_cache_gid_type_str(): an InfiniBand
// GID is IB_GID_TYPE_IB, the same value as IB_GID_TYPE_ROCE, printed "IB/RoCE v1".
TEST(RdmaKernelCases, InfinibandGidHasAType) {
  const Series s = CollectTree("sysfs/rdma_kernel_cases.tree", nullptr);
  EXPECT_EQ(Value(s, "rdma_port_gid_info",
                  {{"device", "mlx5_4"},
                   {"port", "1"},
                   {"index", "0"},
                   {"gid", "fe80:0000:0000:0000:0c42:a103:0065:8e2b"},
                   {"type", "IB/RoCE v1"},
                   {"netdev", ""}}),
            1.0);
}

// Issue #12 item 11. nldev.c fill_port_info adds RDMA_NLDEV_ATTR_NDEV_NAME only when the
// netdev is in the caller's namespace; the GID table's ndevs name every namespace's
// interfaces. rxe0's GIDs say eth0, but netlink reports no netdev: its eth0 is a pod's, and
// rdma_port_info must not name the host's eth0.
TEST(RdmaKernelCases, PortNetdevComesFromNetlinkNotGids) {
  const Series s =
      CollectTree("sysfs/rdma_hosts.tree",
                  std::make_unique<FakeNetdevs>(PortNetdevs{{{"mlx5_0", 1}, "ens1f0np0"}}));
  const auto netdev_of = [&](const std::string& device) -> std::string {
    for (const auto& [labels, value] : s.at("rdma_port_info")) {
      if (labels.at("device") == device) return labels.at("netdev");
    }
    return "<no series>";
  };
  EXPECT_EQ(netdev_of("mlx5_0"), "ens1f0np0");
  EXPECT_EQ(netdev_of("rxe0"), "");
  EXPECT_EQ(netdev_of("irdma0"), "");
  bool gid_names_eth0 = false;
  for (const auto& [labels, value] : s.at("rdma_port_gid_info")) {
    gid_names_eth0 |= labels.at("device") == "rxe0" && labels.at("netdev") == "eth0";
  }
  EXPECT_TRUE(gid_names_eth0) << "the GID table keeps what sysfs says";

  const Series failed = CollectTree("sysfs/rdma_hosts.tree", std::make_unique<FailingNetdevs>());
  for (const auto& [labels, value] : failed.at("rdma_port_info")) {
    EXPECT_EQ(labels.at("netdev"), "")
        << "no guess from the GID table when netlink fails: sysfs names a netdev only when "
           "the device's own device/net lists it (none in this tree)";
  }
}

// Issue 26 item 1: the port's netdev and its admin state and carrier, from sysfs alone
// (--path.sysfs, or RDMA netlink failing), for each scenario of port_link_cases.tree.
TEST(PortLinkCases, NetdevAndItsStateFromSysfsAlone) {
  TempDir root;
  MaterialiseTree(FixturePath("sysfs/port_link_cases.tree"), root.path());
  // The production constructor: a sysfs that is not /sys reads netdevs from sysfs alone.
  RdmaCollector collector(RdmaOptions{}, root.path(), nullptr);
  MetricSet out;
  ASSERT_FALSE(collector.Collect(out).no_data);
  Series s;
  for (const auto& family : out.Take()) {
    for (const auto& metric : family.metric) {
      std::map<std::string, std::string> labels;
      for (const auto& label : metric.label) labels[label.name] = label.value;
      s[family.name][labels] = metric.gauge.value;
    }
  }
  const auto netdev_of = [&](const std::string& device) -> std::string {
    for (const auto& [labels, value] : s.at("rdma_port_info")) {
      if (labels.at("device") == device) return labels.at("netdev");
    }
    return "<no series>";
  };
  const auto port = [](const std::string& device) {
    return std::map<std::string, std::string>{{"device", device}, {"port", "1"}};
  };
  struct Case {
    const char* device;
    const char* netdev;
    std::optional<double> admin_up;
    std::optional<double> carrier;
  };
  const Case cases[] = {
      {"mlx5_pulled", "ens1f0np0", 1, 0},       // cable pulled: up, no carrier
      {"mlx5_admin_down", "ens1f1np1", 0, {}},  // ip link set down: no carrier read
      {"bnxt_re_up", "bnxt0", 1, 1},            // working
      {"mlx5_pod", "", {}, {}},                 // GID names another namespace's eth0
      {"rxe_up", "", {}, {}},                   // no device/net: netlink only
      {"mlx5_ib_no_sm", "", {}, {}},            // InfiniBand: no netdev
      {"mlx5_ib_disabled", "", {}, {}},
      {"irdma_pulled", "ens801f0", 1, 0},  // as mlx5
      {"rxe_no_carrier", "", {}, {}},
      {"efa_up", "", {}, {}},  // no netdev at all
  };
  for (const Case& c : cases) {
    EXPECT_EQ(netdev_of(c.device), c.netdev) << c.device;
    EXPECT_EQ(Value(s, "rdma_port_netdev_admin_up", port(c.device)), c.admin_up) << c.device;
    EXPECT_EQ(Value(s, "rdma_port_netdev_carrier", port(c.device)), c.carrier) << c.device;
  }
}

TEST(PortLinkCases, NetlinkNamesAreReadInThisSysfs) {
  const Series named =
      CollectTree("sysfs/port_link_cases.tree",
                  std::make_unique<FakeNetdevs>(PortNetdevs{{{"rxe_up", 1}, "bnxt0"},
                                                            {{"mlx5_pulled", 1}, "../../etc"},
                                                            {{"mlx5_pod", 1}, "gone0"}}));
  const std::map<std::string, std::string> rxe{{"device", "rxe_up"}, {"port", "1"}};
  EXPECT_EQ(Value(named, "rdma_port_netdev_admin_up", rxe), 1.0);
  EXPECT_EQ(Value(named, "rdma_port_netdev_carrier", rxe), 1.0);
  // A name that is a path reads nothing; a netdev without a sysfs entry has no state.
  for (const char* device : {"mlx5_pulled", "mlx5_pod"}) {
    const std::map<std::string, std::string> key{{"device", device}, {"port", "1"}};
    EXPECT_EQ(Value(named, "rdma_port_netdev_admin_up", key), std::nullopt) << device;
  }
  // Netlink answering, the sysfs source is not consulted: mlx5_admin_down has no netdev.
  const std::map<std::string, std::string> down{{"device", "mlx5_admin_down"}, {"port", "1"}};
  EXPECT_EQ(Value(named, "rdma_port_netdev_admin_up", down), std::nullopt);
}

TEST(VerbsPorts, MtuEnumToBytes) {
  EXPECT_EQ(IbvMtuToBytes(1), 256U);
  EXPECT_EQ(IbvMtuToBytes(3), 1024U);
  EXPECT_EQ(IbvMtuToBytes(5), 4096U);
  EXPECT_EQ(IbvMtuToBytes(0), 0U);
  EXPECT_EQ(IbvMtuToBytes(6), 0U);
}

}  // namespace
}  // namespace rdmascope
