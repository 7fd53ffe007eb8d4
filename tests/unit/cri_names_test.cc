// Container names from the container runtime (sys/cri_names.*), through the list seam: lookups
// never wait, a miss asks again before the refresh interval (once per unknown container), a
// failing or hung runtime leaves the last answer, and the workload collector adds the names.
#include "sys/cri_names.h"

#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <map>
#include <string>

#include "collectors/workload.h"
#include "core/collector_runner.h"
#include "unit/fixture_tree.h"

namespace rdmascope::sys {
namespace {

using std::chrono::milliseconds;

const std::string kA(64, 'a');
const std::string kB(64, 'b');

CriContainer Named(const std::string& id, const std::string& pod) {
  return {.id = id, .pod = pod, .pod_namespace = "ns", .pod_uid = "uid-" + pod, .container = "c"};
}

// A runtime whose answer the test sets, counting its calls.
struct FakeRuntime {
  std::mutex mutex;
  std::vector<CriContainer> containers;
  std::string error;  // non-empty: the call fails
  std::atomic<int> calls{0};
  milliseconds delay{0};

  ContainerNames::ListFn Fn() {
    return [this]() -> std::expected<std::vector<CriContainer>, std::string> {
      ++calls;
      std::this_thread::sleep_for(delay);
      const std::lock_guard lock(mutex);
      if (!error.empty()) return std::unexpected(error);
      return containers;
    };
  }
};

CriOptions Options(milliseconds refresh, milliseconds miss) {
  return {.endpoint = "unix:///test", .refresh_interval = refresh, .miss_interval = miss};
}

TEST(ContainerNames, NothingRunsBeforeTheFirstLookup) {
  FakeRuntime runtime;
  {
    ContainerNames names(Options(milliseconds(1), milliseconds(1)), runtime.Fn());
    std::this_thread::sleep_for(milliseconds(50));
  }
  EXPECT_EQ(runtime.calls, 0) << "no thread, no call, before a scrape asks";
}

TEST(ContainerNames, TheFirstLookupDoesNotWaitThenTheAnswerNamesIt) {
  FakeRuntime runtime;
  runtime.containers = {Named(kA, "llm-0")};
  runtime.delay = milliseconds(200);
  ContainerNames names(Options(std::chrono::hours(1), milliseconds(10)), runtime.Fn());
  EXPECT_FALSE(names.Lookup(kA)) << "answered before the runtime was asked";
  ASSERT_TRUE(names.WaitForAttempts(1, milliseconds(10000)));
  const auto found = names.Lookup(kA);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->pod, "llm-0");
  EXPECT_EQ(found->pod_namespace, "ns");
  EXPECT_EQ(names.status().containers, 1U);
}

TEST(ContainerNames, AMissAsksAgainOncePerUnknownContainer) {
  FakeRuntime runtime;
  runtime.containers = {Named(kA, "llm-0")};
  ContainerNames names(Options(std::chrono::hours(1), milliseconds(10)), runtime.Fn());
  names.Lookup(kA);
  ASSERT_TRUE(names.WaitForAttempts(1, milliseconds(10000)));
  // A container started since: asked again long before the refresh interval.
  {
    const std::lock_guard lock(runtime.mutex);
    runtime.containers.push_back(Named(kB, "llm-1"));
  }
  EXPECT_FALSE(names.Lookup(kB));
  ASSERT_TRUE(names.WaitForAttempts(2, milliseconds(10000)));
  ASSERT_TRUE(names.Lookup(kB));
  EXPECT_EQ(names.Lookup(kB)->pod, "llm-1");
  // A container the runtime does not manage: asked about once, then left alone.
  const std::string other(64, 'c');
  EXPECT_FALSE(names.Lookup(other));
  ASSERT_TRUE(names.WaitForAttempts(3, milliseconds(10000)));
  for (int i = 0; i < 20; ++i) {
    EXPECT_FALSE(names.Lookup(other));
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_FALSE(names.WaitForAttempts(4, milliseconds(100)));
  EXPECT_EQ(runtime.calls, 3);
}

TEST(ContainerNames, AFailingRuntimeLeavesTheLastAnswer) {
  FakeRuntime runtime;
  runtime.containers = {Named(kA, "llm-0")};
  ContainerNames names(Options(milliseconds(20), milliseconds(10)), runtime.Fn());
  names.Lookup(kA);
  ASSERT_TRUE(names.WaitForAttempts(1, milliseconds(10000)));
  {
    const std::lock_guard lock(runtime.mutex);
    runtime.error = "connection refused";
  }
  ASSERT_TRUE(names.WaitForAttempts(3, milliseconds(10000)));
  ASSERT_TRUE(names.Lookup(kA));
  EXPECT_EQ(names.Lookup(kA)->pod, "llm-0");
  EXPECT_EQ(names.status().last_error, "connection refused");
  EXPECT_TRUE(names.status().last_success);
}

TEST(ContainerNames, LookupsDuringACallGetTheLastAnswer) {
  FakeRuntime runtime;
  runtime.containers = {Named(kA, "llm-0")};
  ContainerNames names(Options(milliseconds(1), milliseconds(1)), runtime.Fn());
  names.Lookup(kA);
  ASSERT_TRUE(names.WaitForAttempts(1, milliseconds(10000)));
  runtime.delay = milliseconds(300);  // every call from now on hangs for a while
  ASSERT_TRUE(names.WaitForAttempts(2, milliseconds(10000)));
  // The refresher is inside a call (every 1 ms a new one, each 300 ms long): lookups meanwhile
  // get the last answer, not an emptied table.
  int answered = 0;
  for (int i = 0; i < 100; ++i) answered += names.Lookup(kA) ? 1 : 0;
  EXPECT_EQ(answered, 100);
}

class WorkloadWithNames : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(procfs_.path() / "100");
    std::ofstream(procfs_.path() / "100" / "cgroup")
        << "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod11111111_2222_"
           "3333_4444_555555555555.slice/cri-containerd-"
        << kA << ".scope\n";
  }
  testing::TempDir procfs_;
};

constexpr MetricDesc kHeld{"rdma_process_resources", "objects", prometheus::MetricType::Gauge};

class Owner : public Collector {
 public:
  CollectResult Collect(MetricSet& out) const override {
    out.Add(kHeld, {{"pid", "100"}, {"comm", "trainer"}}, 1);
    return {};
  }
};

TEST_F(WorkloadWithNames, TheInfoSeriesCarriesTheRuntimesNames) {
  FakeRuntime runtime;
  runtime.containers = {{.id = kA,
                         .pod = "llm-0",
                         .pod_namespace = "training",
                         .pod_uid = "11111111-2222-3333-4444-555555555555",
                         .container = "worker"}};
  auto names = std::make_unique<ContainerNames>(Options(std::chrono::hours(1), milliseconds(10)),
                                                runtime.Fn());
  ContainerNames* raw = names.get();
  std::vector<NamedCollector> collectors;
  collectors.push_back({"owner", std::make_unique<Owner>()});
  collectors.push_back(
      {"workload", std::make_unique<WorkloadCollector>(procfs_.path(), std::move(names))});
  CollectorRunner runner(std::move(collectors), BuildInfo{"1", "r"}, procfs_.path());
  runner.Collect();  // the first lookup: not named yet
  ASSERT_TRUE(raw->WaitForAttempts(1, milliseconds(10000)));
  std::map<std::string, std::string> labels;
  for (const auto& family : runner.Collect()) {
    if (family.name != "rdma_process_workload_info") continue;
    ASSERT_EQ(family.metric.size(), 1U);
    for (const auto& label : family.metric[0].label) labels[label.name] = label.value;
  }
  EXPECT_EQ(labels,
            (std::map<std::string, std::string>{{"pid", "100"},
                                                {"comm", "trainer"},
                                                {"namespace", "training"},
                                                {"pod", "llm-0"},
                                                {"container", "worker"},
                                                {"pod_uid", "11111111-2222-3333-4444-555555555555"},
                                                {"container_id", "containerd://" + kA}}));
}

TEST(ResolveCriEndpoint, AutoTakesTheFirstDefaultSocketPresent) {
  testing::TempDir root;
  EXPECT_EQ(ResolveCriEndpoint("auto", root.path()), "") << "no socket: no runtime to ask";
  EXPECT_EQ(ResolveCriEndpoint("none", root.path()), "");
  EXPECT_EQ(ResolveCriEndpoint("unix:///x.sock", root.path()), "unix:///x.sock");
  const auto endpoints = DefaultCriEndpoints(root.path());
  ASSERT_EQ(endpoints.size(), 3U);
  EXPECT_EQ(endpoints[0], "unix://" + (root.path() / "run/containerd/containerd.sock").string());
}

}  // namespace
}  // namespace rdmascope::sys
