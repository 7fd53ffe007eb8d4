// The workload collector: one rdma_process_workload_info per pid that the collectors before it
// exported in the same scrape, from a fake /proc/PID/cgroup; nothing for owners without a
// process, for processes gone since, or when it runs alone.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "collectors/workload.h"
#include "core/collector_runner.h"
#include "http/handler.h"
#include "unit/fixture_tree.h"

namespace rdmascope {
namespace {

constexpr MetricDesc kHeld{"rdma_process_resources", "objects", prometheus::MetricType::Gauge};
constexpr MetricDesc kPinned{"rdma_process_pinned_bytes", "VmPin", prometheus::MetricType::Gauge};
const std::string kId(64, 'e');

// Exports series for pids the way the resources and mr collectors do, owners without a
// process included.
class Owners : public Collector {
 public:
  CollectResult Collect(MetricSet& out) const override {
    out.Add(kHeld, {{"device", "mlx5_0"}, {"pid", "100"}, {"comm", "trainer"}}, 3);
    out.Add(kHeld, {{"device", "mlx5_1"}, {"pid", "100"}, {"comm", "trainer"}}, 1);
    out.Add(kHeld, {{"device", "mlx5_0"}, {"pid", "kernel"}, {"comm", "ib_core"}}, 9);
    out.Add(kHeld, {{"device", "mlx5_0"}, {"pid", "unknown"}, {"comm", "unknown"}}, 1);
    out.Add(kPinned, {{"pid", "200"}, {"comm", "slurm_rank"}}, 4096);
    out.Add(kPinned, {{"pid", "300"}, {"comm", "storage"}}, 4096);
    out.Add(kPinned, {{"pid", "400"}, {"comm", "exited"}}, 4096);
    out.Add(kPinned, {{"pid", "0x1f"}, {"comm", "odd"}}, 1);
    return {};
  }
};

void WriteCgroup(const std::filesystem::path& procfs, const std::string& pid,
                 const std::string& content) {
  std::filesystem::create_directories(procfs / pid);
  std::ofstream(procfs / pid / "cgroup") << content;
}

// pid -> labels of its info series (label name -> value).
std::map<std::string, std::map<std::string, std::string>> InfoSeries(
    const std::vector<prometheus::MetricFamily>& families) {
  std::map<std::string, std::map<std::string, std::string>> series;
  for (const auto& family : families) {
    if (family.name != "rdma_process_workload_info") continue;
    for (const auto& metric : family.metric) {
      std::map<std::string, std::string> labels;
      for (const auto& label : metric.label) labels[label.name] = label.value;
      EXPECT_EQ(metric.gauge.value, 1);
      series[labels["pid"]] = labels;
    }
  }
  return series;
}

class WorkloadCollectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteCgroup(procfs_.path(), "100",
                "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod11111111_2222_"
                "3333_4444_555555555555.slice/cri-containerd-" +
                    kId + ".scope\n");
    WriteCgroup(procfs_.path(), "200",
                "0::/system.slice/slurmstepd.scope/job_4711/step_0/user/task_0\n");
    WriteCgroup(procfs_.path(), "300", "0::/\n");
    // pid 400 exited between the other collectors' reading and this one's: no cgroup file.
  }

  std::vector<prometheus::MetricFamily> Scrape() {
    std::vector<NamedCollector> collectors;
    collectors.push_back({"owners", std::make_unique<Owners>()});
    collectors.push_back({"workload", std::make_unique<WorkloadCollector>(procfs_.path())});
    CollectorRunner runner(std::move(collectors), BuildInfo{"1", "r"}, procfs_.path());
    return runner.Collect();
  }

  testing::TempDir procfs_;
};

TEST_F(WorkloadCollectorTest, DescribesEachExportedProcessOnce) {
  const auto series = InfoSeries(Scrape());
  ASSERT_EQ(series.size(), 3U) << "100, 200, 300: not kernel, unknown, 0x1f nor the exited 400";
  EXPECT_EQ(series.at("100"),
            (std::map<std::string, std::string>{{"pid", "100"},
                                                {"comm", "trainer"},
                                                {"pod_uid", "11111111-2222-3333-4444-555555555555"},
                                                {"container_id", "containerd://" + kId}}));
  EXPECT_EQ(series.at("200"),
            (std::map<std::string, std::string>{{"pid", "200"},
                                                {"comm", "slurm_rank"},
                                                {"slurm_job_id", "4711"},
                                                {"slurm_step_id", "0"},
                                                {"systemd_unit", "slurmstepd.scope"}}));
  // In the root cgroup: the series carries the process only, so that joins keep it.
  EXPECT_EQ(series.at("300"),
            (std::map<std::string, std::string>{{"pid", "300"}, {"comm", "storage"}}));
}

// A series naming a process by its pid in another namespace (pid_ns: collectors/occupancy.h)
// is never looked up here: in the exporter's /proc that number is another process (here 300,
// "storage", whose workload would be given to the namespace's rank). Counted in the detail.
TEST_F(WorkloadCollectorTest, APidOfAnotherNamespaceIsNotLookedUp) {
  constexpr MetricDesc kOutstanding{"rdma_cq_outstanding_entries", "completions",
                                    prometheus::MetricType::Gauge};
  MetricSet earlier;
  earlier.Add(kOutstanding,
              {{"device", "mlx5_0"}, {"pid", "300"}, {"comm", "rank"}, {"pid_ns", "4026532999"}},
              4);
  earlier.Add(kOutstanding,
              {{"device", "mlx5_0"}, {"pid", "7"}, {"comm", "rank"}, {"pid_ns", "4026532999"}}, 4);
  earlier.Add(kOutstanding, {{"device", "mlx5_0"}, {"pid", "100"}, {"comm", "trainer"}}, 1);
  const std::vector<prometheus::MetricFamily> families = earlier.Take();
  WorkloadCollector collector(procfs_.path());
  MetricSet out;
  const CollectResult result = collector.CollectAfter(families, out);
  const auto series = InfoSeries(out.Take());
  ASSERT_EQ(series.size(), 1U);
  EXPECT_EQ(series.begin()->first, "100");
  EXPECT_NE(result.detail.find("1 of 1 processes described"), std::string::npos) << result.detail;
  EXPECT_NE(result.detail.find("2 processes of other pid namespaces not described"),
            std::string::npos)
      << result.detail;

  // Only such series: nothing to describe, and the count still said.
  MetricSet only;
  only.Add(kOutstanding,
           {{"device", "mlx5_0"}, {"pid", "300"}, {"comm", "rank"}, {"pid_ns", "4026532999"}}, 4);
  const std::vector<prometheus::MetricFamily> foreign = only.Take();
  MetricSet none;
  const CollectResult alone = collector.CollectAfter(foreign, none);
  EXPECT_TRUE(InfoSeries(none.Take()).empty());
  EXPECT_NE(alone.detail.find("1 processes of other pid namespaces"), std::string::npos)
      << alone.detail;
}

TEST_F(WorkloadCollectorTest, FollowsAProcessMovedToAnotherCgroup) {
  EXPECT_EQ(InfoSeries(Scrape()).at("300").count("systemd_unit"), 0U);
  WriteCgroup(procfs_.path(), "300", "0::/system.slice/storage-target.service\n");
  EXPECT_EQ(InfoSeries(Scrape()).at("300").at("systemd_unit"), "storage-target.service");
}

TEST_F(WorkloadCollectorTest, AloneItHasNoProcessToDescribe) {
  WorkloadCollector collector(procfs_.path());
  MetricSet out;
  const CollectResult result = collector.Collect(out);
  EXPECT_TRUE(result.no_data);
  EXPECT_EQ(out.sample_count(), 0U);
}

TEST_F(WorkloadCollectorTest, ReusesParsesAcrossScrapesOfOneCollector) {
  std::vector<NamedCollector> collectors;
  collectors.push_back({"owners", std::make_unique<Owners>()});
  collectors.push_back({"workload", std::make_unique<WorkloadCollector>(procfs_.path())});
  CollectorRunner runner(std::move(collectors), BuildInfo{"1", "r"}, procfs_.path());
  const auto first = InfoSeries(runner.Collect());
  WriteCgroup(procfs_.path(), "200", "0::/system.slice/slurmstepd.scope/job_4712/step_1/user\n");
  const auto second = InfoSeries(runner.Collect());
  EXPECT_EQ(first.at("100"), second.at("100"));
  EXPECT_EQ(second.at("200").at("slurm_job_id"), "4712") << "a new content is parsed again";
  EXPECT_EQ(second.at("200").at("slurm_step_id"), "1");
}

TEST_F(WorkloadCollectorTest, DescribesOneProcessForTheDebugPages) {
  const WorkloadCollector collector(procfs_.path());
  EXPECT_EQ(collector.Describe(200), (WorkloadLabels{{"slurm_job_id", "4711"},
                                                     {"slurm_step_id", "0"},
                                                     {"systemd_unit", "slurmstepd.scope"}}))
      << "read at once, before any scrape";
  EXPECT_TRUE(collector.Describe(300).empty()) << "the root cgroup: no workload";
  EXPECT_TRUE(collector.Describe(400).empty()) << "gone";
}

// A process read once is not read again while its pidfd says it runs, until the recheck
// interval; a pid whose process exited is read again at once (it may name another process).
// The fixture procfs has "self" pointing at this test's pid, so that its pids are pinned with
// pidfds as the real /proc's are: pid CHILD is a real child process of the test.
class ExportsPid : public Collector {
 public:
  explicit ExportsPid(std::string pid) : pid_(std::move(pid)) {}
  CollectResult Collect(MetricSet& out) const override {
    out.Add(kPinned, {{"pid", pid_}, {"comm", "trainer"}}, 4096);
    return {};
  }

 private:
  const std::string pid_;
};

class WorkloadCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directory_symlink(std::to_string(getpid()), procfs_.path() / "self");
    child_ = fork();
    ASSERT_GE(child_, 0);
    if (child_ == 0) {
      pause();
      _exit(0);
    }
    pid_ = std::to_string(child_);
    WriteCgroup(procfs_.path(), pid_, "0::/system.slice/first.service\n");
  }
  void TearDown() override { StopChild(); }

  void StopChild() {
    if (child_ <= 0) return;
    kill(child_, SIGKILL);
    waitpid(child_, nullptr, 0);
    child_ = -1;
  }

  CollectorRunner Runner(std::chrono::milliseconds recheck) {
    std::vector<NamedCollector> collectors;
    collectors.push_back({"owners", std::make_unique<ExportsPid>(pid_)});
    collectors.push_back({"workload", std::make_unique<WorkloadCollector>(procfs_.path(), nullptr,
                                                                          nullptr, recheck)});
    return CollectorRunner(std::move(collectors), BuildInfo{"1", "r"}, procfs_.path());
  }

  std::string Unit(CollectorRunner& runner) {
    const auto series = InfoSeries(runner.Collect());
    const auto it = series.find(pid_);
    if (it == series.end()) return "(no series)";
    const auto unit = it->second.find("systemd_unit");
    return unit == it->second.end() ? "(no unit)" : unit->second;
  }

  testing::TempDir procfs_;
  pid_t child_ = -1;
  std::string pid_;
};

TEST_F(WorkloadCacheTest, KeepsAReadingWhileItsProcessRuns) {
  CollectorRunner runner = Runner(std::chrono::seconds(60));
  EXPECT_EQ(Unit(runner), "first.service");
  WriteCgroup(procfs_.path(), pid_, "0::/system.slice/second.service\n");
  EXPECT_EQ(Unit(runner), "first.service") << "read again before the recheck interval";
}

TEST_F(WorkloadCacheTest, ReadsAgainAfterTheRecheckInterval) {
  CollectorRunner runner = Runner(std::chrono::milliseconds(0));
  EXPECT_EQ(Unit(runner), "first.service");
  WriteCgroup(procfs_.path(), pid_, "0::/system.slice/second.service\n");
  EXPECT_EQ(Unit(runner), "second.service");
}

TEST_F(WorkloadCacheTest, ReadsAgainWhenThePidNoLongerNamesTheProcessReadBefore) {
  CollectorRunner runner = Runner(std::chrono::seconds(60));
  EXPECT_EQ(Unit(runner), "first.service");
  // The process exits and (in this fixture) its pid now names a process of another unit.
  StopChild();
  WriteCgroup(procfs_.path(), pid_, "0::/system.slice/second.service\n");
  EXPECT_EQ(Unit(runner), "second.service") << "the pidfd said the process read before exited";
}

TEST_F(WorkloadCacheTest, AProcessNoLongerExportedIsForgotten) {
  CollectorRunner runner = Runner(std::chrono::seconds(60));
  EXPECT_EQ(Unit(runner), "first.service");
  std::filesystem::remove_all(procfs_.path() / pid_);
  EXPECT_EQ(Unit(runner), "first.service") << "still running: the reading is kept";
  StopChild();
  EXPECT_EQ(Unit(runner), "(no series)") << "exited and its cgroup file gone: no series";
}

TEST_F(WorkloadCacheTest, TheDebugPageListsTheProcessesOfTheLastScrape) {
  CollectorRunner runner = Runner(std::chrono::seconds(60));
  DebugRoutes routes = runner.CollectDebugRoutes();
  ASSERT_TRUE(routes.contains("/debug/workloads"));
  EXPECT_TRUE(nlohmann::json::parse(routes.at("/debug/workloads")("")).at("processes").empty());
  EXPECT_EQ(Unit(runner), "first.service");
  const auto body = nlohmann::json::parse(routes.at("/debug/workloads")(""));
  ASSERT_EQ(body.at("processes").size(), 1U) << body.dump();
  EXPECT_EQ(body.at("processes")[0].at("pid"), child_);
  EXPECT_EQ(body.at("processes")[0].at("workload").at("systemd_unit"), "first.service");
  EXPECT_EQ(body.at("container_runtime").at("endpoint"), "") << "none configured";
}

// A tenant names its own systemd units (a user's `systemd-run --unit=...`): the name reaches
// /debug/workloads as given, and served, no ESC, CSI (\xc2\x9b) or DEL is left raw for the
// terminal of whoever curls it (the handler escapes them; nlohmann's dump escapes C0 only).
TEST_F(WorkloadCacheTest, TheDebugPageServesAHostileUnitNameEscaped) {
  const std::string unit =
      "ev\x1b[2J\xc2\x9b"
      "31m\x7fil.service";
  WriteCgroup(procfs_.path(), pid_, "0::/user.slice/" + unit + "\n");
  CollectorRunner runner = Runner(std::chrono::seconds(60));
  EXPECT_EQ(Unit(runner), unit);
  const HttpHandler handler(std::make_shared<CollectorRunner>(std::vector<NamedCollector>{},
                                                              BuildInfo{"1", "r"}, procfs_.path()),
                            "/metrics", runner.CollectDebugRoutes());
  const HttpReply reply = handler.Handle({.method = "GET", .path = "/debug/workloads"});
  ASSERT_EQ(reply.status, 200U) << reply.body;
  for (const std::string raw : {"\x1b", "\x7f", "\xc2\x9b"}) {
    EXPECT_EQ(reply.body.find(raw), std::string::npos) << reply.body;
  }
  EXPECT_NE(reply.body.find("ev\\u001b[2J\\u009b31m\\u007fil.service"), std::string::npos)
      << reply.body;
  const auto body = nlohmann::json::parse(reply.body);
  ASSERT_EQ(body.at("processes").size(), 1U) << body.dump();
  EXPECT_EQ(body.at("processes")[0].at("workload").at("systemd_unit"), unit);
}

}  // namespace
}  // namespace rdmascope
