// The container runtime's and the kubelet's answers in a capture (sys/grpc_capture.h): recorded
// through fake lists (the seam librdmascope_grpc.so sits behind), one answer per sample, then
// replayed with the lists never called; the workload collector built by the registry on the
// replay gives the series it gave live; hostile files are refused with a reason, never
// answered; --redact hashes the names and ids as the cgroup files' are.
#include "sys/grpc_capture.h"

#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <map>
#include <set>

#include "collectors/capture_config.h"
#include "collectors/config.h"
#include "collectors/device_workload.h"
#include "collectors/registry.h"
#include "collectors/workload.h"
#include "core/capture.h"
#include "core/collector_runner.h"
#include "core/redact.h"
#include "sys/background_refresh.h"
#include "sys/cri_names.h"
#include "sys/pod_resources.h"
#include "unit/fixture_tree.h"
#include "unit/installed_session.h"

namespace rdmascope {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using testing::TempDir;
using Installed = testing::InstalledSession;

const std::string kId(64, 'a');
const std::string kUid = "11111111-2222-3333-4444-555555555555";

sys::CriContainer Container(const std::string& pod) {
  return {
      .id = kId, .pod = pod, .pod_namespace = "training", .pod_uid = kUid, .container = "worker"};
}

sys::PodDevices Vf(const std::string& pod) {
  return {.pod = pod,
          .pod_namespace = "training",
          .container = "worker",
          .resource = "nvidia.com/sriov_rdma_vf",
          .device_ids = {"0000:3b:02.1", "mlx5_core.sf.4"}};
}

// What the runtime and the kubelet answer at each sample (index 0: sample 1); an entry with
// an error is a failed call. Counts the calls, so that a replay that asks fails.
struct FakeSources {
  std::vector<sys::CriAnswer> cri;
  std::vector<sys::PodResourcesAnswer> pods;
  std::atomic<int> cri_calls{0};
  std::atomic<int> pod_calls{0};
  size_t sample = 0;

  sys::ContainerNames::ListFn Cri() {
    return [this] {
      ++cri_calls;
      return cri.at(sample);
    };
  }
  sys::PodResources::ListFn Pods() {
    return [this] {
      ++pod_calls;
      return pods.at(sample);
    };
  }
};

// A process of pid 100 exported by an earlier collector, for the workload collector to
// describe (its cgroup names container kId of pod kUid).
constexpr MetricDesc kHeld{"rdma_process_resources", "objects", prometheus::MetricType::Gauge};
class Owner : public Collector {
 public:
  CollectResult Collect(MetricSet& out) const override {
    out.Add(kHeld, {{"pid", "100"}, {"comm", "trainer"}}, 1);
    return {};
  }
};

using Series = std::set<std::map<std::string, std::string>>;

// The workload collector's series of one collection, by family.
std::map<std::string, Series> WorkloadSeries(const std::vector<prometheus::MetricFamily>& all) {
  std::map<std::string, Series> out;
  for (const auto& family : all) {
    if (!family.name.starts_with("rdma_") || !family.name.ends_with("_workload_info")) continue;
    for (const auto& metric : family.metric) {
      std::map<std::string, std::string> labels;
      for (const auto& label : metric.label) labels[label.name] = label.value;
      out[family.name].insert(labels);
    }
  }
  return out;
}

// A host: the pod devices sysfs fixture and a procfs with pid 100's cgroup, recorded over
// `fake`'s samples by a workload collector asking the fakes; then the host moved away.
struct Recorded {
  TempDir root;
  TempDir out;
  std::vector<std::map<std::string, Series>> live;
  std::shared_ptr<const redact::Redactor> redactor;

  explicit Recorded(FakeSources& fake, std::shared_ptr<const redact::Redactor> redaction = nullptr)
      : redactor(std::move(redaction)) {
    testing::MaterialiseTree(testing::FixturePath("sysfs/pod_devices.tree"), sysfs());
    fs::create_directories(procfs() / "100");
    std::ofstream(procfs() / "100" / "cgroup")
        << "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod11111111_2222_"
           "3333_4444_555555555555.slice/cri-containerd-"
        << kId << ".scope\n";
    auto writer = capture::Writer::Create(dir(), false).value();
    if (redactor) writer->SetRedactor(redactor, true);
    {
      Installed session(
          capture::Session::Recording(capture::Layout(sysfs(), procfs()), writer.get()));
      EXPECT_TRUE(writer->BeginSample(1).has_value());
      // As capture builds it: refresh intervals 0 (ConfigureForCapture).
      auto names = std::make_unique<sys::ContainerNames>(
          sys::CriOptions{.endpoint = "unix:///run/containerd/containerd.sock",
                          .refresh_interval = milliseconds(0)},
          fake.Cri());
      auto pods = std::make_unique<sys::PodResources>(
          sys::PodResourcesOptions{.endpoint = "unix:///elsewhere/kubelet.sock",
                                   .refresh_interval = milliseconds(0)},
          fake.Pods());
      std::vector<NamedCollector> collectors;
      collectors.push_back({"owner", std::make_unique<Owner>()});
      collectors.push_back(
          {"workload", std::make_unique<WorkloadCollector>(
                           procfs(), std::move(names),
                           std::make_unique<DeviceWorkloads>(sysfs(), std::move(pods)))});
      CollectorRunner runner(std::move(collectors), BuildInfo{"1", "r"}, procfs());
      for (fake.sample = 0; fake.sample < fake.cri.size(); ++fake.sample) {
        if (fake.sample > 0) {
          EXPECT_TRUE(writer->BeginSample(fake.sample + 1).has_value());
        }
        live.push_back(WorkloadSeries(runner.Collect()));
        EXPECT_TRUE(writer->CommitSample().has_value());
      }
      EXPECT_TRUE(writer->WriteIndex("test", {"workload"}).has_value());
    }
    fs::rename(sysfs(), root.path() / "sys-gone");
    fs::rename(procfs(), root.path() / "proc-gone");
  }
  fs::path sysfs() const { return root.path() / "sys"; }
  fs::path procfs() const { return root.path() / "proc"; }
  fs::path dir() const { return out.path() / "cap"; }
  fs::path File(size_t sample, std::string_view name) const {
    return dir() / ("samples/000" + std::to_string(sample)) / name;
  }
  std::string Text(size_t sample, std::string_view name) const {
    std::ifstream in(File(sample, name));
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }

  // Each sample as serve --replay collects it: the workload collector the registry builds.
  // `debug`: set to the replay's /debug/workloads after the collections.
  std::vector<std::map<std::string, Series>> Replay(size_t collections,
                                                    std::string* debug = nullptr) const {
    Installed session(capture::Session::Replaying(capture::Layout(sysfs(), procfs()),
                                                  capture::Reader::Open(dir()).value()));
    CollectorsConfig config;
    config.sysfs = sysfs();
    config.procfs = procfs();
    config.collector_enabled["workload"] = true;
    ConfigureForReplay(config, {"workload"});
    std::unique_ptr<Collector> workload;
    for (const CollectorEntry& entry : AllCollectors()) {
      if (entry.name == "workload") workload = entry.create(config);
    }
    std::vector<NamedCollector> collectors;
    collectors.push_back({"owner", std::make_unique<Owner>()});
    collectors.push_back({"workload", std::move(workload)});
    CollectorRunner runner(std::move(collectors), BuildInfo{"1", "r"}, procfs());
    std::vector<std::map<std::string, Series>> replayed;
    for (size_t n = 0; n < collections; ++n) {
      session->NextSample();
      replayed.push_back(WorkloadSeries(runner.Collect()));
    }
    if (debug != nullptr) *debug = runner.CollectDebugRoutes().at("/debug/workloads")("");
    return replayed;
  }
};

TEST(GrpcCapture, TheWorkloadCollectorOnTheReplayGivesTheLiveSeriesSampleBySample) {
  FakeSources fake;
  fake.cri = {std::vector{Container("llm-0")}, std::vector{Container("llm-1")},
              std::unexpected(std::string("connection refused"))};
  fake.pods = {std::vector{Vf("llm-0")}, std::unexpected(std::string("kubelet gone")),
               std::vector{Vf("llm-2")}};
  const Recorded recorded(fake);
  // One fresh answer per sample: the refresher is in step with the collections.
  EXPECT_EQ(fake.cri_calls, 3);
  EXPECT_EQ(fake.pod_calls, 3);
  ASSERT_EQ(recorded.live.size(), 3U);
  // The sample's own names: llm-0, then llm-1, then the last answer kept (the call failed).
  const auto pod_of = [](const std::map<std::string, Series>& series) {
    const Series& processes = series.at("rdma_process_workload_info");
    return processes.size() == 1 ? processes.begin()->at("pod") : "?";
  };
  EXPECT_EQ(pod_of(recorded.live[0]), "llm-0");
  EXPECT_EQ(pod_of(recorded.live[1]), "llm-1");
  EXPECT_EQ(pod_of(recorded.live[2]), "llm-1");
  EXPECT_EQ(recorded.live[0].at("rdma_device_workload_info").size(), 2U);
  EXPECT_NE(recorded.Text(3, sys::kCriAnswerFile).find("\"error\": \"connection refused\""),
            std::string::npos)
      << recorded.Text(3, sys::kCriAnswerFile);

  const int cri_calls = fake.cri_calls;
  const int pod_calls = fake.pod_calls;
  const auto replayed = recorded.Replay(4);
  EXPECT_EQ(fake.cri_calls, cri_calls) << "a replay asks no runtime";
  EXPECT_EQ(fake.pod_calls, pod_calls) << "a replay asks no kubelet";
  ASSERT_EQ(replayed.size(), 4U);
  for (size_t n = 0; n < 3; ++n) EXPECT_EQ(replayed[n], recorded.live[n]) << "sample " << n + 1;
  EXPECT_EQ(replayed[3], recorded.live[2]) << "the last sample repeats";
}

TEST(GrpcCapture, AHostWithoutARuntimeOrKubeletReplaysWithNone) {
  FakeSources fake;
  fake.cri = {std::vector{Container("llm-0")}};
  fake.pods = {std::vector{Vf("llm-0")}};
  const Recorded recorded(fake);
  fs::remove(recorded.File(1, sys::kCriAnswerFile));
  fs::remove(recorded.File(1, sys::kPodResourcesAnswerFile));
  std::string debug;
  const auto replayed = recorded.Replay(1, &debug);
  ASSERT_EQ(replayed.size(), 1U);
  // Neither source built: nothing to ask, no attempt made, no error to show.
  EXPECT_EQ(debug.find("attempts"), std::string::npos) << debug;
  // The cgroup's ids only: no names made up, no device series.
  EXPECT_EQ(replayed[0].at("rdma_process_workload_info"),
            (Series{{{"pid", "100"},
                     {"comm", "trainer"},
                     {"pod_uid", kUid},
                     {"container_id", "containerd://" + kId}}}));
  EXPECT_FALSE(replayed[0].contains("rdma_device_workload_info"));
}

TEST(GrpcCapture, ASampleWithoutItsFileOrWithAHostileOneIsTheSourceFailing) {
  FakeSources fake;
  fake.cri = {std::vector{Container("llm-0")}, std::vector{Container("llm-1")}};
  fake.pods = {std::vector{Vf("llm-0")}, std::vector{Vf("llm-1")}};
  const Recorded recorded(fake);
  std::ofstream(recorded.File(2, sys::kCriAnswerFile)) << "{\"endpoint\": \"x\", \"containers\": [";
  fs::remove(recorded.File(2, sys::kPodResourcesAnswerFile));
  const auto replayed = recorded.Replay(2);
  ASSERT_EQ(replayed.size(), 2U);
  // Sample 2's sources fail: their last answer (sample 1's) stays, as a runtime that fails
  // live leaves it.
  EXPECT_EQ(replayed[1], recorded.live[0]);

  // The reasons, through the boundary itself.
  Installed session(capture::Session::Replaying(capture::Layout("/sys", "/proc"),
                                                capture::Reader::Open(recorded.dir()).value()));
  session->NextSample();
  session->NextSample();
  const auto never = []() -> sys::CriAnswer {
    ADD_FAILURE() << "the live list was called under replay";
    return {};
  };
  const auto cri = sys::CapturedCriList("x", never);
  ASSERT_FALSE(cri);
  EXPECT_EQ(cri.error(), "the capture's sample 2 grpc/cri.json is refused: not JSON");
  const auto pods = sys::CapturedPodResourcesList("x", [] {
    ADD_FAILURE() << "the live list was called under replay";
    return sys::PodResourcesAnswer{};
  });
  ASSERT_FALSE(pods);
  EXPECT_EQ(pods.error(), "the capture's sample 2 has no grpc/podresources.json (ENOENT)");
}

TEST(GrpcCapture, FilesRoundTripAndUnknownFieldsAreIgnored) {
  const std::vector<sys::CriContainer> containers{Container("a"), Container("b")};
  const auto cri = sys::ParseCriAnswer(sys::FormatCriAnswer("unix:///x", containers));
  ASSERT_TRUE(cri) << cri.error();
  EXPECT_EQ(cri->endpoint, "unix:///x");
  ASSERT_TRUE(cri->answer);
  ASSERT_EQ(cri->answer->size(), 2U);
  EXPECT_EQ((*cri->answer)[1].pod, "b");
  EXPECT_EQ((*cri->answer)[1].pod_uid, kUid);
  EXPECT_EQ((*cri->answer)[1].id, kId);

  const auto pods = sys::ParsePodResourcesAnswer(
      sys::FormatPodResourcesAnswer("unix:///k", std::vector{Vf("p")}));
  ASSERT_TRUE(pods) << pods.error();
  ASSERT_TRUE(pods->answer);
  ASSERT_EQ(pods->answer->size(), 1U);
  EXPECT_EQ(pods->answer->front().device_ids,
            (std::vector<std::string>{"0000:3b:02.1", "mlx5_core.sf.4"}));
  EXPECT_EQ(pods->answer->front().resource, "nvidia.com/sriov_rdma_vf");

  const auto failed =
      sys::ParseCriAnswer(sys::FormatCriAnswer("unix:///x", std::unexpected(std::string("boom"))));
  ASSERT_TRUE(failed);
  ASSERT_FALSE(failed->answer);
  EXPECT_EQ(failed->answer.error(), "boom");

  // A newer rdmascope's fields, or a person's notes: ignored.
  const auto extra = sys::ParseCriAnswer(
      R"({"endpoint": "e", "note": [1, 2], "containers": [{"id": "x", "image": "nginx"}]})");
  ASSERT_TRUE(extra) << extra.error();
  ASSERT_TRUE(extra->answer);
  ASSERT_EQ(extra->answer->size(), 1U);
  EXPECT_EQ(extra->answer->front().id, "x");
  EXPECT_EQ(extra->answer->front().pod, "") << "absent: empty, as the runtime leaves it";
}

TEST(GrpcCapture, HostileFilesAreRefusedWithTheirReason) {
  const std::string long_text(5000, 'x');
  const std::vector<std::pair<std::string, std::string>> cri_cases{
      {"", "not JSON"},
      {"{\"endpoint\": \"e\", \"containers\": [", "not JSON"},
      {"[]", "not a JSON object"},
      {"\"text\"", "not a JSON object"},
      {R"({"containers": []})", "no \"endpoint\""},
      {R"({"endpoint": 7, "containers": []})", "\"endpoint\" is not a string"},
      {R"({"endpoint": "e"})", "neither or both of \"error\" and \"containers\""},
      {R"({"endpoint": "e", "error": "x", "containers": []})",
       "neither or both of \"error\" and \"containers\""},
      {R"({"endpoint": "e", "error": ""})", "\"error\" is empty"},
      {R"({"endpoint": "e", "error": 1})", "\"error\" is not a string"},
      {R"({"endpoint": "e", "containers": {}})", "\"containers\" is not a list"},
      {R"({"endpoint": "e", "containers": [7]})", "containers[0]: not an object"},
      {R"({"endpoint": "e", "containers": [{"pod": "p"}]})", "containers[0]: no \"id\""},
      {R"({"endpoint": "e", "containers": [{"id": ""}]})", "containers[0]: \"id\" is empty"},
      {R"({"endpoint": "e", "containers": [{"id": "x"}, {"id": "y", "pod": 3}]})",
       "containers[1]: \"pod\" is not a string"},
      {R"({"endpoint": "e", "containers": [{"id": ")" + long_text + "\"}]}",
       "containers[0]: \"id\" is longer than 4096 bytes"},
      {R"({"endpoint": "e", "containers": [{"id": "\xff"}]})", "not JSON"},
      {std::string(100000, '[') + std::string(100000, ']'), "nested more than 4 deep"},
      {R"({"endpoint": "e", "containers": [{"id": "x", "deep": [[1]]}]})",
       "nested more than 4 deep"},
      {std::string(sys::kMaxGrpcAnswerBytes + 1, ' '), "larger than the bound"},
  };
  for (const auto& [text, why] : cri_cases) {
    const auto parsed = sys::ParseCriAnswer(text);
    ASSERT_FALSE(parsed) << text.substr(0, 200);
    EXPECT_EQ(parsed.error(), why) << text.substr(0, 200);
  }
  const std::vector<std::pair<std::string, std::string>> pod_cases{
      {R"({"endpoint": "e", "pod_devices": [{"resource": "r"}]})", "pod_devices[0]: no \"pod\""},
      {R"({"endpoint": "e", "pod_devices": [{"pod": "p"}]})", "pod_devices[0]: no \"resource\""},
      {R"({"endpoint": "e", "pod_devices": [{"pod": "p", "resource": "r", "device_ids": "x"}]})",
       "pod_devices[0]: \"device_ids\" is not a list"},
      {R"({"endpoint": "e", "pod_devices": [{"pod": "p", "resource": "r", "device_ids": [1]}]})",
       "pod_devices[0]: a device id that is not a string of at most 4096 bytes"},
      {R"({"endpoint": "e", "containers": []})",
       "neither or both of \"error\" and \"pod_devices\""},
  };
  for (const auto& [text, why] : pod_cases) {
    const auto parsed = sys::ParsePodResourcesAnswer(text);
    ASSERT_FALSE(parsed) << text;
    EXPECT_EQ(parsed.error(), why) << text;
  }
  // Many entries within the byte bound: refused past the entry bound, not built.
  std::string many = R"({"endpoint": "e", "containers": [)";
  for (int i = 0; i < 70000; ++i) many += i == 0 ? "{}" : ",{}";
  many += "]}";
  const auto parsed = sys::ParseCriAnswer(many);
  ASSERT_FALSE(parsed);
  EXPECT_EQ(parsed.error(), "\"containers\" has more than 65536 entries");
}

TEST(GrpcCapture, RedactedNamesAndIdsHashAsTheCgroupFilesDoAndStillJoin) {
  auto redactor = std::make_shared<const redact::Redactor>(
      redact::Redactor::WithKey(std::string(32, 'k')).value());
  FakeSources fake;
  fake.cri = {std::vector{Container("llm-secret-0")}};
  fake.pods = {std::vector{Vf("llm-secret-0")}};
  const Recorded recorded(fake, redactor);
  for (const std::string_view file : {sys::kCriAnswerFile, sys::kPodResourcesAnswerFile}) {
    const std::string text = recorded.Text(1, file);
    for (const std::string& original :
         {std::string("llm-secret-0"), std::string("training"), std::string("worker"), kId, kUid,
          std::string("/elsewhere/kubelet.sock")}) {
      EXPECT_EQ(text.find(original), std::string::npos) << original << " in " << text;
    }
  }
  const std::string cri = recorded.Text(1, sys::kCriAnswerFile);
  // The default containerd socket says which runtime, nothing of the host: kept.
  EXPECT_NE(cri.find("unix:///run/containerd/containerd.sock"), std::string::npos) << cri;
  // The container id as the cgroup file has it: the replay's lookup still finds its names.
  const std::string cgroup = recorded.Text(1, "proc/100/cgroup");
  const std::string hashed_id = redact::CgroupIds(*redactor, kId);
  EXPECT_NE(cgroup.find(hashed_id), std::string::npos) << cgroup;
  EXPECT_NE(cri.find(hashed_id), std::string::npos) << cri;
  const auto replayed = recorded.Replay(1);
  ASSERT_EQ(replayed.size(), 1U);
  const Series& processes = replayed[0].at("rdma_process_workload_info");
  ASSERT_EQ(processes.size(), 1U);
  EXPECT_EQ(processes.begin()->at("pod"), redactor->Name("pod", "llm-secret-0"));
  EXPECT_EQ(processes.begin()->at("namespace"), redactor->Name("namespace", "training"));
  EXPECT_EQ(processes.begin()->at("container"), redactor->Name("container", "worker"));
  EXPECT_EQ(processes.begin()->at("container_id"), "containerd://" + hashed_id);
  for (const auto& series : replayed[0].at("rdma_device_workload_info")) {
    EXPECT_EQ(series.at("pod"), redactor->Name("pod", "llm-secret-0"));
  }
}

TEST(BackgroundRefresh, InStepStartsNoThreadAndAsksOncePerCollection) {
  std::atomic<int> calls{0};
  sys::BackgroundRefresh refresh({.refresh_interval = milliseconds(0)}, {.fetch =
                                                                             [&] {
                                                                               ++calls;
                                                                               return std::string();
                                                                             },
                                                                         .after = [](bool) {}});
  {
    const auto lock = refresh.Lock();
    refresh.StartLocked();
    refresh.MissLocked();
  }
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_EQ(calls, 0) << "no thread asks by itself";
  refresh.FetchNow();
  refresh.FetchNow();
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(refresh.status().attempts, 2U);
  // With an interval, FetchNow leaves the asking to the thread.
  std::atomic<int> threaded{0};
  sys::BackgroundRefresh timed({.refresh_interval = std::chrono::hours(1)},
                               {.fetch =
                                    [&] {
                                      ++threaded;
                                      return std::string();
                                    },
                                .after = [](bool) {}});
  timed.FetchNow();
  EXPECT_EQ(threaded, 0);
}

}  // namespace
}  // namespace rdmascope
