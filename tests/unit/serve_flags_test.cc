#include "cli/serve_flags.h"

#include <gtest/gtest.h>

#include <vector>

namespace rdmascope {
namespace {

ServeConfig Parse(std::vector<std::string> args) {
  CLI::App app;
  ServeConfig config;
  AddServeFlags(app, config);
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments reversed
  app.parse(args);
  FinishServeConfig(config);
  return config;
}

TEST(ServeFlags, Defaults) {
  const ServeConfig config = Parse({});
  EXPECT_EQ(config.web.listen_address, ":9879");
  EXPECT_EQ(config.web.telemetry_path, "/metrics");
  EXPECT_EQ(config.sysfs, "/sys");
  EXPECT_TRUE(config.collector_enabled.at("ethtool"));
  EXPECT_TRUE(config.collector_enabled.at("rdma"));
  EXPECT_EQ(config.ethtool.queue_stats, QueueStatsMode::kRaw);
  EXPECT_TRUE(config.ethtool.pfc);
}

TEST(ServeFlags, CollectorSwitches) {
  EXPECT_FALSE(Parse({"--no-collector.ethtool"}).collector_enabled.at("ethtool"));
  const ServeConfig only_rdma = Parse({"--collector.disable-defaults", "--collector.rdma"});
  EXPECT_FALSE(only_rdma.collector_enabled.at("ethtool"));
  EXPECT_TRUE(only_rdma.collector_enabled.at("rdma"));
  EXPECT_FALSE(Parse({"--collector.disable-defaults"}).collector_enabled.at("rdma"));
}

TEST(ServeFlags, CollectorOptions) {
  const ServeConfig config =
      Parse({"--collector.ethtool.queue-stats=sum", "--no-collector.ethtool.pfc",
             "--collector.ethtool.device-include=ens.*", "--collector.rdma.device-exclude=rxe.*",
             "--log.level=debug", "--web.listen-address=[::1]:0", "--path.procfs=/proc"});
  EXPECT_EQ(config.ethtool.queue_stats, QueueStatsMode::kSum);
  EXPECT_FALSE(config.ethtool.pfc);
  EXPECT_EQ(config.ethtool.device_include, "ens.*");
  EXPECT_EQ(config.rdma.device_exclude, "rxe.*");
  EXPECT_EQ(config.log_level, log::Level::kDebug);
}

TEST(ServeFlags, RejectsBadValues) {
  EXPECT_THROW(Parse({"--collector.rdma.device-include=[z-a]"}), CLI::ValidationError);
  EXPECT_THROW(Parse({"--web.listen-address=localhost"}), CLI::ValidationError);
  EXPECT_THROW(Parse({"--web.threads=0"}), CLI::ValidationError);
  EXPECT_THROW(Parse({"--collector.nonexistent"}), CLI::ExtrasError);
}

}  // namespace
}  // namespace rdmascope
