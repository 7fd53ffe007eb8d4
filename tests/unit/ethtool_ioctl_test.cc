// Ethtool::GetStats against a fake driver that reconfigures itself between the ioctls of one
// read, as `ethtool -L` on another CPU can. The fake answers as the kernel does
// (net/ethtool/ioctl.c: ethtool_get_sset_info, ethtool_get_strings and ethtool_get_stats set
// the length to what the driver reports *now* and copy that many entries).
#include "sys/ethtool_ioctl.h"

#include <gtest/gtest.h>
#include <linux/ethtool.h>

#include <cerrno>
#include <cstring>
#include <expected>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace rdmascope::sys {
namespace {

// veth's string table (drivers/net/veth.c, veth_get_strings): "peer_ifindex", then
// "rx_queue_%u_%.18s" over veth_rq_stats_desc per rx queue, "tx_queue_%u_%.18s" over
// veth_tq_stats_desc per tx queue. rx 1/tx 8 and rx 3/tx 1 both have 24 stats.
std::vector<std::string> VethNames(int rx_queues, int tx_queues) {
  static const char* const kRx[] = {"xdp_packets", "xdp_bytes", "drops",        "xdp_redirect",
                                    "xdp_drops",   "xdp_tx",    "xdp_tx_errors"};
  static const char* const kTx[] = {"xdp_xmit", "xdp_xmit_errors"};
  std::vector<std::string> names{"peer_ifindex"};
  for (int q = 0; q < rx_queues; ++q) {
    for (const char* stat : kRx) names.push_back("rx_queue_" + std::to_string(q) + "_" + stat);
  }
  for (int q = 0; q < tx_queues; ++q) {
    for (const char* stat : kTx) names.push_back("tx_queue_" + std::to_string(q) + "_" + stat);
  }
  return names;
}

struct Config {
  std::vector<std::string> names;
  uint64_t base;  // value of stat i is base + i: a name paired with another config's value shows
};

class FakeDriver {
 public:
  std::vector<Config> configs;
  size_t current = 0;
  // Called after each ioctl with the command just served; may switch `current`.
  std::function<void(uint32_t cmd)> after;
  std::vector<uint32_t> served;

  int operator()(std::string_view, void* command) {
    uint32_t cmd;
    std::memcpy(&cmd, command, sizeof cmd);
    const Config& config = configs[current];
    const auto n = static_cast<uint32_t>(config.names.size());
    switch (cmd) {
      case ETHTOOL_GSSET_INFO: {
        auto* info = static_cast<ethtool_sset_info*>(command);
        info->sset_mask = 1ULL << ETH_SS_STATS;
        std::memcpy(static_cast<char*>(command) + sizeof(ethtool_sset_info), &n, sizeof n);
        break;
      }
      case ETHTOOL_GSTRINGS: {
        auto* strings = static_cast<ethtool_gstrings*>(command);
        strings->len = n;
        for (uint32_t i = 0; i < n; ++i) {
          char* slot = reinterpret_cast<char*>(strings->data) + size_t{i} * ETH_GSTRING_LEN;
          std::memset(slot, 0, ETH_GSTRING_LEN);
          std::memcpy(slot, config.names[i].data(),
                      std::min<size_t>(config.names[i].size(), ETH_GSTRING_LEN));
        }
        break;
      }
      case ETHTOOL_GSTATS: {
        auto* stats = static_cast<ethtool_stats*>(command);
        stats->n_stats = n;
        for (uint32_t i = 0; i < n; ++i) stats->data[i] = config.base + i;
        break;
      }
      default:
        return EOPNOTSUPP;
    }
    served.push_back(cmd);
    if (after) after(cmd);
    return 0;
  }
};

// Every (name, value) must be the pairing of one configuration.
void ExpectConsistent(const EthtoolStats& stats, const Config& config) {
  ASSERT_EQ(stats.size(), config.names.size());
  for (size_t i = 0; i < stats.size(); ++i) {
    EXPECT_EQ(stats[i].first, config.names[i]) << i;
    EXPECT_EQ(stats[i].second, config.base + i) << stats[i].first;
  }
}

// A fake driver and an Ethtool whose ioctls it answers.
struct Rig {
  explicit Rig(std::vector<Config> configs) { driver->configs = std::move(configs); }
  std::shared_ptr<FakeDriver> driver = std::make_shared<FakeDriver>();
  const Ethtool ethtool =
      Ethtool::WithIoctl([driver = driver](std::string_view ifname, void* command) {
        return (*driver)(ifname, command);
      });
};

// Two veth configurations of the same count (24 stats), different names and values.
std::vector<Config> SameCountConfigs() {
  return {{VethNames(1, 8), 1000}, {VethNames(3, 1), 2000}};
}

TEST(EthtoolIoctl, SameCountDifferentNamesIsNotPairedUp) {
  Rig rig(SameCountConfigs());
  auto& driver = rig.driver;
  ASSERT_EQ(driver->configs[0].names.size(), driver->configs[1].names.size());
  // `ethtool -L race0 rx 3 tx 1` lands right after the names were read, once.
  bool switched = false;
  driver->after = [&](uint32_t cmd) {
    if (cmd == ETHTOOL_GSTRINGS && !switched) {
      driver->current = 1;
      switched = true;
    }
  };
  const auto stats = rig.ethtool.GetStats("race0");
  ASSERT_TRUE(stats) << std::strerror(stats.error());
  ExpectConsistent(*stats, driver->configs[1]);
}

TEST(EthtoolIoctl, EndlessReconfigurationGivesAnErrorNotAMixture) {
  Rig rig(SameCountConfigs());
  auto& driver = rig.driver;
  driver->after = [&](uint32_t cmd) {
    if (cmd == ETHTOOL_GSTATS) driver->current ^= 1;
  };
  const auto stats = rig.ethtool.GetStats("race0");
  ASSERT_FALSE(stats);
  EXPECT_EQ(stats.error(), EAGAIN);
}

TEST(EthtoolIoctl, StableDeviceReadsOnce) {
  Rig rig({{VethNames(2, 2), 500}});
  auto& driver = rig.driver;
  const auto stats = rig.ethtool.GetStats("veth0");
  ASSERT_TRUE(stats);
  ExpectConsistent(*stats, driver->configs[0]);
  EXPECT_EQ(driver->served, (std::vector<uint32_t>{ETHTOOL_GSSET_INFO, ETHTOOL_GSTRINGS,
                                                   ETHTOOL_GSTATS, ETHTOOL_GSTRINGS}));
}

// With the names of the last read the kernel's three calls do: count, values, names.
TEST(EthtoolIoctl, KnownNamesAreReadOnceAfterTheValues) {
  Rig rig({{VethNames(2, 2), 500}});
  auto& driver = rig.driver;
  std::string names;
  ASSERT_TRUE(rig.ethtool.GetStats("veth0", &names));
  EXPECT_EQ(names.size(), driver->configs[0].names.size() * ETH_GSTRING_LEN);
  driver->served.clear();
  driver->configs[0].base = 900;  // the counters moved on
  const auto stats = rig.ethtool.GetStats("veth0", &names);
  ASSERT_TRUE(stats);
  ExpectConsistent(*stats, driver->configs[0]);
  EXPECT_EQ(driver->served,
            (std::vector<uint32_t>{ETHTOOL_GSSET_INFO, ETHTOOL_GSTATS, ETHTOOL_GSTRINGS}));
}

// Reconfigured between two scrapes, same count: the names known from the last read no longer
// match, and the values are paired with the new ones, not the remembered ones.
TEST(EthtoolIoctl, KnownNamesThatChangedAreNotPairedUp) {
  Rig rig(SameCountConfigs());
  auto& driver = rig.driver;
  std::string names;
  ASSERT_TRUE(rig.ethtool.GetStats("race0", &names));
  driver->current = 1;
  const auto stats = rig.ethtool.GetStats("race0", &names);
  ASSERT_TRUE(stats) << std::strerror(stats.error());
  ExpectConsistent(*stats, driver->configs[1]);
  // The next read knows the new names: three calls again.
  driver->served.clear();
  ASSERT_TRUE(rig.ethtool.GetStats("race0", &names));
  EXPECT_EQ(driver->served.size(), 3U);
}

// Reconfigured between the values and the names of one read: the values are of the old
// configuration, the names of the new; neither the remembered names nor the new ones may be
// paired with them.
TEST(EthtoolIoctl, KnownNamesChangingDuringTheReadAreNotPairedUp) {
  Rig rig(SameCountConfigs());
  auto& driver = rig.driver;
  std::string names;
  ASSERT_TRUE(rig.ethtool.GetStats("race0", &names));
  driver->after = [&](uint32_t cmd) {
    if (cmd == ETHTOOL_GSTATS && driver->current == 0) driver->current = 1;
  };
  const auto stats = rig.ethtool.GetStats("race0", &names);
  ASSERT_TRUE(stats) << std::strerror(stats.error());
  ExpectConsistent(*stats, driver->configs[1]);
}

TEST(EthtoolIoctl, KnownNamesAreForgottenWhenNoReadSucceeds) {
  Rig rig(SameCountConfigs());
  auto& driver = rig.driver;
  std::string names;
  ASSERT_TRUE(rig.ethtool.GetStats("race0", &names));
  driver->after = [&](uint32_t cmd) {
    if (cmd == ETHTOOL_GSTATS) driver->current ^= 1;
  };
  const auto stats = rig.ethtool.GetStats("race0", &names);
  ASSERT_FALSE(stats);
  EXPECT_EQ(stats.error(), EAGAIN);
  EXPECT_TRUE(names.empty());
}

int FailingMprotect(void*, size_t, int) {
  errno = ENOMEM;  // the process hit vm.max_map_count: the mapping cannot be split
  return -1;
}

// Without its guard page a buffer no longer turns a kernel overrun into EFAULT: the read must
// not go ahead with it.
TEST(EthtoolIoctl, NoGuardPageNoRead) {
  Rig rig({{VethNames(1, 1), 10}});
  auto& driver = rig.driver;
  ethtool_testing::SetMprotect(FailingMprotect);
  std::expected<EthtoolStats, int> stats;
  // A new thread: buffers are cached per thread, and this one has none yet.
  std::thread([&] { stats = rig.ethtool.GetStats("veth0"); }).join();
  ethtool_testing::SetMprotect(nullptr);
  ASSERT_FALSE(stats);
  EXPECT_EQ(stats.error(), ENOMEM);
  EXPECT_EQ(driver->served, (std::vector<uint32_t>{ETHTOOL_GSSET_INFO}))
      << "no strings or stats were read into an unguarded buffer";

  // With mprotect working again, the same thread-less path reads normally.
  std::thread([&] { stats = rig.ethtool.GetStats("veth0"); }).join();
  ASSERT_TRUE(stats);
  ExpectConsistent(*stats, driver->configs[0]);
}

}  // namespace
}  // namespace rdmascope::sys
