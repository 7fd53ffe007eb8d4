#include <gtest/gtest.h>

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
  EXPECT_EQ(port.netdev, "ens1f0np0");
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
  RdmaCollector collector(RdmaOptions{}, root.path(), std::make_unique<FakeMtu>());
  MetricSet out;
  const CollectResult result = collector.Collect(out);
  EXPECT_FALSE(result.no_data);
  EXPECT_EQ(out.dropped_duplicates(), 0U);
  EXPECT_TRUE(testing::MatchesGolden(testing::Serialise(out.Take()), "rdma.prom"));
}

TEST(RdmaCollector, DataCountersAreWordsTimesFour) {
  TempDir root;
  MaterialiseTree(FixturePath("sysfs/rdma_hosts.tree"), root.path());
  RdmaCollector collector(RdmaOptions{"mlx5_1", ""}, root.path(), nullptr);
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

TEST(RdmaCollector, NoDeviceIsNoDataNotFailure) {
  TempDir empty;
  RdmaCollector collector(RdmaOptions{}, empty.path(), std::make_unique<FakeMtu>());
  MetricSet out;
  const CollectResult result = collector.Collect(out);
  EXPECT_TRUE(result.no_data);
  EXPECT_NE(result.detail.find("no RDMA device"), std::string::npos);
  EXPECT_EQ(out.sample_count(), 0U);
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
