// ethtool private flags (ETHTOOL_GPFLAGS with the ETH_SS_PRIV_FLAGS names) against a fake
// driver answering as net/ethtool/ioctl.c does (ethtool_get_sset_info(), ethtool_get_strings(),
// ethtool_get_value() for ETHTOOL_GPFLAGS), their series, and doctor's roce.cqe_compression.
#include <gtest/gtest.h>
#include <linux/ethtool.h>

#include <cerrno>
#include <cstring>

#include "collectors/ethtool.h"
#include "core/name_filter.h"
#include "doctor/checks_host_tuning.h"
#include "sys/ethtool_ioctl.h"
#include "unit/doctor_fixtures.h"
#include "unit/fixture_tree.h"

namespace rdmascope {
namespace {

// The first flags of mlx5e_priv_flags[] (drivers/net/ethernet/mellanox/mlx5/core/en_ethtool.c).
const std::vector<std::string> kMlx5Flags{"rx_cqe_moder", "tx_cqe_moder", "rx_cqe_compress",
                                          "rx_striding_rq"};

struct FakeDriver {
  std::vector<std::string> names = kMlx5Flags;
  uint32_t bits = 0b1001;  // rx_cqe_moder and rx_striding_rq on, rx_cqe_compress off
  bool has_priv_flags = true;
  int operator()(std::string_view, void* command) const {
    uint32_t cmd;
    std::memcpy(&cmd, command, sizeof cmd);
    const auto n = static_cast<uint32_t>(names.size());
    switch (cmd) {
      case ETHTOOL_GSSET_INFO: {
        auto* info = static_cast<ethtool_sset_info*>(command);
        if (!has_priv_flags) {
          info->sset_mask = 0;  // the kernel clears the sets the driver does not count
          return 0;
        }
        std::memcpy(static_cast<char*>(command) + sizeof(ethtool_sset_info), &n, sizeof n);
        return 0;
      }
      case ETHTOOL_GSTRINGS: {
        auto* strings = static_cast<ethtool_gstrings*>(command);
        if (strings->string_set != ETH_SS_PRIV_FLAGS) return EINVAL;
        strings->len = n;
        for (uint32_t i = 0; i < n; ++i) {
          char* slot = reinterpret_cast<char*>(strings->data) + size_t{i} * ETH_GSTRING_LEN;
          std::memset(slot, 0, ETH_GSTRING_LEN);
          std::memcpy(slot, names[i].data(), names[i].size());
        }
        return 0;
      }
      case ETHTOOL_GPFLAGS:
        static_cast<ethtool_value*>(command)->data = bits;
        return 0;
      default:
        return EOPNOTSUPP;
    }
  }
};

TEST(PrivateFlags, NamesPairedWithBits) {
  const auto ethtool = sys::Ethtool::WithIoctl(FakeDriver{});
  const auto flags = ethtool.GetPrivateFlags("ens1f0np0");
  ASSERT_TRUE(flags) << std::strerror(flags.error());
  EXPECT_EQ(*flags, (sys::PrivateFlags{{"rx_cqe_moder", true},
                                       {"tx_cqe_moder", false},
                                       {"rx_cqe_compress", false},
                                       {"rx_striding_rq", true}}));
}

TEST(PrivateFlags, DriverWithoutFlagsOrTooManyIsAnErrorNotZeros) {
  FakeDriver none;
  none.has_priv_flags = false;
  const auto missing = sys::Ethtool::WithIoctl(none).GetPrivateFlags("veth0");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error(), EOPNOTSUPP);
  FakeDriver many;
  many.names.assign(33, "flag");
  const auto overflow = sys::Ethtool::WithIoctl(many).GetPrivateFlags("eth0");
  ASSERT_FALSE(overflow) << "a u32 bitmap holds 32 flags";
  EXPECT_EQ(overflow.error(), EOVERFLOW);
}

TEST(PrivateFlags, Series) {
  NetdevSnapshot dev{.name = "ens1f0np0"};
  dev.private_flags = sys::PrivateFlags{{"rx_cqe_compress", false}, {"rx_striding_rq", true}};
  NetdevSnapshot other{.name = "veth0"};  // no private flags read: no series
  MetricSet out;
  MapNetdevs({dev, other}, NameFilter("", ""), QueueStatsMode::kRaw, out);
  const std::string text = testing::Serialise(out.Take());
  EXPECT_NE(text.find("rdma_netdev_private_flag{device=\"ens1f0np0\",flag=\"rx_cqe_compress\"} 0"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("rdma_netdev_private_flag{device=\"ens1f0np0\",flag=\"rx_striding_rq\"} 1"),
            std::string::npos);
  EXPECT_EQ(text.find("veth0"), std::string::npos);
  EXPECT_TRUE(testing::MatchesGolden(text, "private_flags.prom"));
}

// The flag compresses the Ethernet receive queues' completions only (not RDMA's): it is worth
// a finding only where the interface receives IP traffic at a high packet rate.
TEST(DoctorCqeCompression, OffOnIdleAndNotMlx5) {
  const auto host = [](double seconds, double received) {
    doctor::testing::Families f;
    for (const auto& [device, netdev] :
         {std::pair{"mlx5_0", "eth2"}, std::pair{"mlx5_1", "eth3"}, std::pair{"mlx5_2", "eth5"},
          std::pair{"irdma0", "eth4"}}) {
      f.Gauge("rdma_port_info",
              {{"device", device},
               {"port", "1"},
               {"link_layer", "Ethernet"},
               {"state", "ACTIVE"},
               {"phys_state", "LinkUp"},
               {"netdev", netdev}},
              1);
    }
    f.Gauge("rdma_netdev_private_flag", {{"device", "eth2"}, {"flag", "rx_cqe_compress"}}, 0);
    f.Gauge("rdma_netdev_private_flag", {{"device", "eth3"}, {"flag", "rx_cqe_compress"}}, 1);
    f.Gauge("rdma_netdev_private_flag", {{"device", "eth5"}, {"flag", "rx_cqe_compress"}}, 0);
    // 200k IP packets/s on eth2 and eth3 over the 10 s window; eth5 carries RDMA only (1k/s).
    for (const char* netdev : {"eth2", "eth3"}) {
      f.Gauge("rdma_ethtool_stat", {{"device", netdev}, {"stat", "rx_packets"}}, received);
    }
    f.Gauge("rdma_ethtool_stat", {{"device", "eth5"}, {"stat", "rx_packets"}}, received / 200);
    return f.Build(seconds);
  };
  const doctor::Snapshot before = host(100, 1e6), now = host(110, 3e6);
  std::map<std::string, doctor::Finding> by;
  for (const auto& finding : doctor::CheckCqeCompression(now, &before, {})) {
    by[finding.scope.back().second] = finding;
  }
  EXPECT_EQ(by.at("eth2").severity, doctor::Severity::kInfo);
  EXPECT_EQ(by.at("eth2").observed, "rx_cqe_compress off, 200000 IP packets/s received");
  EXPECT_EQ(by.at("eth2").fix, "ethtool --set-priv-flags eth2 rx_cqe_compress on");
  EXPECT_NE(by.at("eth2").advice.find("RDMA completions are not affected"), std::string::npos);
  EXPECT_EQ(by.at("eth3").severity, doctor::Severity::kOk);
  EXPECT_EQ(by.at("eth5").severity, doctor::Severity::kOk) << "off, but no IP traffic to speak of";
  EXPECT_EQ(by.at("eth5").observed, "rx_cqe_compress off, 1000 IP packets/s received");
  EXPECT_EQ(by.at("eth4").severity, doctor::Severity::kSkip) << "irdma has no such flag";
  // One collection: the IP packet rate is unknown, and "off" alone is the mlx5 default.
  for (const auto& finding : doctor::CheckCqeCompression(now, nullptr, {})) {
    if (finding.scope.back().second != "eth2") continue;
    EXPECT_EQ(finding.severity, doctor::Severity::kOk);
    EXPECT_EQ(finding.observed, "rx_cqe_compress off, IP packet rate unknown (no window)");
  }
}

}  // namespace
}  // namespace rdmascope
