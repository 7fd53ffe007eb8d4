#include "cli/serve_flags.h"

#include <gtest/gtest.h>

#include <sstream>
#include <vector>

#include "cli/help_format.h"
#include "collectors/registry.h"

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

// Issue 37: the occupancy collector's caps on the stats files read per collection.
TEST(ServeFlags, OccupancyCaps) {
  const ServeConfig defaults = Parse({});
  EXPECT_EQ(defaults.occupancy.max_processes, 256U);
  EXPECT_EQ(defaults.occupancy.max_processes_per_uid, 32U);
  const ServeConfig set = Parse(
      {"--collector.occupancy.max-processes=10", "--collector.occupancy.max-processes-per-uid=2"});
  EXPECT_EQ(set.occupancy.max_processes, 10U);
  EXPECT_EQ(set.occupancy.max_processes_per_uid, 2U);
  EXPECT_THROW(Parse({"--collector.occupancy.max-processes=0"}), CLI::ValidationError);
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

// Every field a renamed flag sets, as text: two configurations that print alike were set alike.
std::string CollectorOptionFields(const ServeConfig& c) {
  std::ostringstream out;
  out << c.resources.max_processes << ' ' << c.resources.max_raw_cqs << ' '
      << static_cast<int>(c.mr.tracking) << ' ' << c.mr.max_regions << ' ' << c.mr.leak_age_ns
      << ' ' << c.mr.pinned_rescan_seconds << ' ' << c.mr.aggregate_by_comm << ' '
      << c.mr.max_processes << ' ' << c.verbs.probe.max_queues << ' ' << c.verbs.probe.max_processes
      << ' ' << c.verbs.max_queue_series << ' ' << c.occupancy.dir << ' ' << c.perf.per_cpu;
  for (const auto& list : {c.mr.libraries, c.mr.binaries, c.perf.events}) {
    out << " [";
    for (const std::string& item : list) out << item << ';';
    out << ']';
  }
  return out.str();
}

// The first release's spellings (the contract users' unit files and DaemonSets rely on), the
// new names, and a value other than the default.
struct Rename {
  const char* old_name;
  const char* new_name;
  const char* value;  // nullptr: a flag
};
constexpr Rename kRenames[] = {
    {"--resources.max-processes", "--collector.resources.max-processes", "7"},
    {"--resources.max-raw-cqs", "--collector.resources.max-raw-cqs", "3"},
    {"--mr.library", "--probe.library", "/etc/hostname"},
    {"--mr.binary", "--probe.binary", "/etc/hostname"},
    {"--mr.tracking", "--collector.mr.tracking", "kernel"},
    {"--mr.max-regions", "--collector.mr.max-regions", "1000"},
    {"--mr.leak-age", "--collector.mr.leak-age", "90s"},
    {"--mr.pinned-rescan-seconds", "--collector.mr.pinned-rescan-seconds", "5"},
    {"--mr.aggregate-by-comm", "--collector.mr.aggregate-by-comm", nullptr},
    {"--mr.max-processes", "--collector.mr.max-processes", "64"},
    {"--verbs.max-queues", "--collector.verbs.max-queues", "128"},
    {"--verbs.max-processes", "--collector.verbs.max-processes", "32"},
    {"--verbs.max-queue-series", "--collector.verbs.max-queue-series", "10"},
    {"--occupancy.dir", "--collector.occupancy.dir", "/tmp/rdmascope-flags-test"},
    {"--perf.event", "--collector.perf.event", "cpu-clock"},
    {"--perf.per-cpu", "--collector.perf.per-cpu", nullptr},
};

std::vector<std::string> Args(const char* flag, const char* value) {
  return {value ? std::string(flag) + "=" + value : std::string(flag)};
}

TEST(ServeFlags, OldNamesAreDeprecatedAliasesOfTheNewOnes) {
  const std::string defaults = CollectorOptionFields(Parse({}));
  for (const Rename& rename : kRenames) {
    SCOPED_TRACE(rename.old_name);
    const ServeConfig by_new = Parse(Args(rename.new_name, rename.value));
    ASSERT_NE(CollectorOptionFields(by_new), defaults) << "the test value is the default";
    testing::internal::CaptureStderr();
    const ServeConfig by_old = Parse(Args(rename.old_name, rename.value));
    const std::string log = testing::internal::GetCapturedStderr();
    EXPECT_EQ(CollectorOptionFields(by_old), CollectorOptionFields(by_new));
    // One warning, naming both spellings.
    EXPECT_NE(log.find("level=warn"), std::string::npos) << log;
    EXPECT_EQ(log.find("level=warn"), log.rfind("level=warn")) << log;
    EXPECT_NE(log.find(std::string("flag=") + rename.old_name), std::string::npos) << log;
    EXPECT_NE(log.find(std::string("new=") + rename.new_name), std::string::npos) << log;
  }
  // The table the binary uses is this one (docs/configuration.md lists it).
  ASSERT_EQ(RenamedFlags().size(), std::size(kRenames));
  for (size_t i = 0; i < std::size(kRenames); ++i) {
    EXPECT_EQ(RenamedFlags()[i].old_name, kRenames[i].old_name);
    EXPECT_EQ(RenamedFlags()[i].new_name, kRenames[i].new_name);
  }
}

TEST(ServeFlags, DeprecatedAliasesValidateAndRepeatLikeTheNewNames) {
  testing::internal::CaptureStderr();
  EXPECT_THROW(Parse({"--mr.leak-age=10x"}), CLI::ValidationError);
  EXPECT_THROW(Parse({"--mr.tracking=sometimes"}), CLI::ValidationError);
  EXPECT_THROW(Parse({"--mr.library=/nonexistent/libibverbs.so.1"}), CLI::ValidationError);
  // Both names at once: refused, not a silent pick of one.
  EXPECT_THROW(Parse({"--mr.max-regions=5", "--collector.mr.max-regions=6"}), CLI::ValidationError);
  const ServeConfig repeated = Parse({"--perf.event=cycles", "--perf.event=cpu-clock"});
  testing::internal::GetCapturedStderr();
  EXPECT_EQ(repeated.perf.events, (std::vector<std::string>{"cycles", "cpu-clock"}));
}

// The last of --collector.NAME / --no-collector.NAME wins, as in node_exporter.
TEST(ServeFlags, LastCollectorSwitchWins) {
  EXPECT_TRUE(Parse({"--no-collector.rdma", "--collector.rdma"}).collector_enabled.at("rdma"));
  EXPECT_FALSE(Parse({"--collector.rdma", "--no-collector.rdma"}).collector_enabled.at("rdma"));
}

std::string ServeHelp() {
  CLI::App app("rdmascope", "rdmascope");
  UseHelpFormatter(app);
  ServeConfig config;
  CLI::App* serve = app.add_subcommand("serve", "Run the Prometheus exporter");
  AddServeFlags(*serve, config);
  return serve->help();
}

// Whether `help` has an entry for `name`: "  --name", then its value ("=..."), the description
// (" ...") or the end of the line.
bool Lists(const std::string& help, const std::string& name) {
  for (const char after : {'=', ' ', '\n'}) {
    if (help.find("  " + name + after) != std::string::npos) return true;
  }
  return false;
}

TEST(ServeFlags, HelpReadsCleanly) {
  const std::string help = ServeHelp();
  EXPECT_EQ(help.find("{false}"), std::string::npos) << help;
  EXPECT_EQ(help.find("{true}"), std::string::npos) << help;
  std::istringstream lines(help);
  std::string line;
  while (std::getline(lines, line)) {
    EXPECT_LE(line.size(), kHelpWidth) << line;
    // Comma-joined names (`--a,--b`) and the old spellings are gone from the help.
    EXPECT_EQ(line.find(",--"), std::string::npos) << line;
    EXPECT_EQ(line.find("deprecated"), std::string::npos) << line;
  }
  for (const CollectorEntry& entry : AllCollectors()) {
    EXPECT_TRUE(Lists(help, "--[no-]collector." + std::string(entry.name))) << entry.name;
  }
  EXPECT_TRUE(Lists(help, "--[no-]collector.ethtool.pfc"));
  for (const Rename& rename : kRenames) {
    EXPECT_TRUE(Lists(help, rename.new_name)) << rename.new_name;
    EXPECT_FALSE(Lists(help, rename.old_name)) << rename.old_name;
  }
  // Defaults are shown with the option (`--flag=DEFAULT`), a range in the description.
  EXPECT_TRUE(Lists(help, "--collector.mr.leak-age=10m")) << help;
  EXPECT_TRUE(Lists(help, "--collector.mr.tracking=auto")) << help;
  EXPECT_TRUE(Lists(help, "--web.threads=4")) << help;
  EXPECT_NE(help.find("(1-64)"), std::string::npos) << help;
}

TEST(ServeFlags, WrapText) {
  EXPECT_EQ(WrapText("aa bb cc", 2, 7, false), "aa bb\n  cc");
  EXPECT_EQ(WrapText("aa bb", 2, 7, true), "  aa bb");
  EXPECT_EQ(WrapText("averyverylongword x", 2, 7, false), "averyverylongword\n  x");
  EXPECT_EQ(WrapText("a\nb", 1, 80, false), "a\n b");
}

TEST(ServeFlags, RejectsBadValues) {
  EXPECT_THROW(Parse({"--collector.rdma.device-include=[z-a]"}), CLI::ValidationError);
  EXPECT_THROW(Parse({"--web.listen-address=localhost"}), CLI::ValidationError);
  EXPECT_THROW(Parse({"--web.threads=0"}), CLI::ValidationError);
  EXPECT_THROW(Parse({"--collector.nonexistent"}), CLI::ExtrasError);
}

TEST(ServeFlags, WorkloadRuntimeFlags) {
  const ServeConfig defaults = Parse({});
  EXPECT_EQ(defaults.workload.cri_endpoint, "auto");
  EXPECT_EQ(defaults.workload.cri_timeout, std::chrono::milliseconds(2000));
  EXPECT_EQ(defaults.workload.cri_refresh_interval, std::chrono::milliseconds(30000));
  const ServeConfig set = Parse({"--collector.workload.cri-endpoint=unix:///run/crio/crio.sock",
                                 "--collector.workload.cri-timeout=500ms",
                                 "--collector.workload.cri-refresh-interval=1m"});
  EXPECT_EQ(set.workload.cri_endpoint, "unix:///run/crio/crio.sock");
  EXPECT_EQ(set.workload.cri_timeout, std::chrono::milliseconds(500));
  EXPECT_EQ(set.workload.cri_refresh_interval, std::chrono::milliseconds(60000));
  EXPECT_THROW(Parse({"--collector.workload.cri-timeout=0s"}), CLI::ValidationError);
  EXPECT_THROW(Parse({"--collector.workload.cri-refresh-interval=soon"}), CLI::ValidationError);
}

TEST(ServeFlags, WorkloadKubeletFlags) {
  const ServeConfig defaults = Parse({});
  EXPECT_EQ(defaults.workload_kubelet.socket, "auto");
  EXPECT_EQ(defaults.workload_kubelet.timeout, std::chrono::milliseconds(2000));
  EXPECT_EQ(defaults.workload_kubelet.refresh_interval, std::chrono::milliseconds(30000));
  const ServeConfig set = Parse({"--collector.workload.kubelet-socket=/host/kubelet.sock",
                                 "--collector.workload.kubelet-timeout=250ms",
                                 "--collector.workload.kubelet-refresh-interval=2m"});
  EXPECT_EQ(set.workload_kubelet.socket, "/host/kubelet.sock");
  EXPECT_EQ(set.workload_kubelet.timeout, std::chrono::milliseconds(250));
  EXPECT_EQ(set.workload_kubelet.refresh_interval, std::chrono::milliseconds(120000));
  EXPECT_EQ(Parse({"--collector.workload.kubelet-socket=none"}).workload_kubelet.socket, "none");
  EXPECT_THROW(Parse({"--collector.workload.kubelet-timeout=0s"}), CLI::ValidationError);
  EXPECT_THROW(Parse({"--collector.workload.kubelet-refresh-interval=often"}),
               CLI::ValidationError);
  // The CRI flags are the runtime's only.
  EXPECT_EQ(Parse({"--collector.workload.cri-timeout=9s"}).workload_kubelet.timeout,
            std::chrono::milliseconds(2000));
}

}  // namespace
}  // namespace rdmascope
