// Devices of pods (issue 28, item 3): device plugin ids mapped to RDMA devices and netdevs on a
// sysfs fixture (sys/plugin_devices.*), the kubelet's answer through the list seam
// (sys/pod_resources.*: never waited for, the last answer kept), and the workload collector's
// rdma_device_workload_info.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "collectors/device_workload.h"
#include "collectors/workload.h"
#include "core/collector_runner.h"
#include "sys/plugin_devices.h"
#include "sys/pod_resources.h"
#include "unit/fixture_tree.h"

namespace rdmascope {
namespace {

using std::chrono::milliseconds;
using sys::PluginDevice;
using sys::PluginDeviceMapping;
using Result = sys::PluginDeviceMapping::Result;

class PodDevicesFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::MaterialiseTree(testing::FixturePath("sysfs/pod_devices.tree"), sysfs_.path());
  }
  PluginDeviceMapping Map(std::string_view id) const {
    return sys::MapPluginDevice(sysfs_.path(), id);
  }
  testing::TempDir sysfs_;
};

TEST(PluginDeviceIds, PciAddressesAndAuxiliaryNames) {
  for (const char* id : {"0000:3b:02.1", "0000:AF:00.7", "10000:01:00.0"}) {
    EXPECT_TRUE(sys::IsPciAddress(id)) << id;
  }
  for (const char* id : {"", "0", "3b:02.1", "0000:3b:02.8", "0000:3b:2.1", "0000:3g:02.1",
                         "0000:3b:02.1/../../x", "000:3b:02.1", "0000:3b:02:1"}) {
    EXPECT_FALSE(sys::IsPciAddress(id)) << id;
  }
  for (const char* id : {"mlx5_core.sf.4", "mlx5_core.eth.12", "idpf.rdma-x.0"}) {
    EXPECT_TRUE(sys::IsAuxiliaryDeviceName(id)) << id;
  }
  for (const char* id : {"", "0", "mlx5_core.sf", "..", "../sf.4", "mlx5_core..4", "a.b.c/d.1",
                         ".mlx5_core.sf.4", "mlx5_core.sf.x", "GPU-8b3e1c2a-0f8e-11ee"}) {
    EXPECT_FALSE(sys::IsAuxiliaryDeviceName(id)) << id;
  }
}

TEST_F(PodDevicesFixture, AVfByPciAddressIsItsRdmaDeviceAndNetdev) {
  const PluginDeviceMapping vf = Map("0000:3b:02.1");
  EXPECT_EQ(vf.result, Result::kMapped);
  EXPECT_EQ(vf.devices, (std::vector<PluginDevice>{{"mlx5_5", "ens1f0v1"}}));
  // sysfs spells hex in lowercase; a plugin that does not is still understood.
  EXPECT_EQ(Map("0000:3B:02.1").devices, vf.devices);
}

TEST_F(PodDevicesFixture, FunctionsWithOneKindOnly) {
  EXPECT_EQ(Map("0000:3b:02.2").devices, (std::vector<PluginDevice>{{"", "ens2f0v2"}}))
      << "no RDMA device: the netdev alone";
  EXPECT_EQ(Map("0000:3b:02.3").devices, (std::vector<PluginDevice>{{"mlx5_7", ""}}))
      << "no netdev: the RDMA device alone";
  EXPECT_EQ(Map("0000:3b:02.4").result, Result::kNoRdmaOrNetdev);
  EXPECT_TRUE(Map("0000:3b:02.4").devices.empty());
}

TEST_F(PodDevicesFixture, SeveralNetdevsTheRdmaDevicesOwnByItsGid) {
  // A switchdev PF: uplink and representors; the RDMA device's is the one its GID is on.
  EXPECT_EQ(Map("0000:3b:00.0").devices, (std::vector<PluginDevice>{{"mlx5_0", "ens1f0np0"}}));
}

TEST_F(PodDevicesFixture, ASubFunctionByItsAuxiliaryName) {
  EXPECT_EQ(Map("mlx5_core.sf.4").devices, (std::vector<PluginDevice>{{"mlx5_9", "enp59s0f0s4"}}));
  EXPECT_EQ(Map("mlx5_core.sf.5").result, Result::kAbsent);
}

TEST_F(PodDevicesFixture, OddIdsNameNothing) {
  // The shared RDMA device plugin's slots, a GPU, paths.
  for (const char* id : {"0", "17", "GPU-8b3e1c2a-0f8e-11ee", "../../../etc", "/", ""}) {
    EXPECT_EQ(Map(id).result, Result::kNotAFunction) << id;
  }
  EXPECT_EQ(Map("0000:3b:02.5").result, Result::kAbsent) << "not on this host";
  EXPECT_EQ(Map("0000:3b:02.7").result, Result::kAbsent) << "a symlink loop";
  EXPECT_EQ(Map("0000:3b:02.6").result, Result::kAbsent) << "a dangling link";
  testing::TempDir empty;
  EXPECT_EQ(sys::MapPluginDevice(empty.path(), "0000:3b:02.1").result, Result::kAbsent);
}

// A kubelet whose answer the test sets, counting its calls.
struct FakeKubelet {
  std::mutex mutex;
  std::vector<sys::PodDevices> devices;
  std::string error;  // non-empty: the call fails
  std::atomic<int> calls{0};
  milliseconds delay{0};

  sys::PodResources::ListFn Fn() {
    return [this]() -> std::expected<std::vector<sys::PodDevices>, std::string> {
      ++calls;
      std::this_thread::sleep_for(delay);
      const std::lock_guard lock(mutex);
      if (!error.empty()) return std::unexpected(error);
      return devices;
    };
  }
};

sys::PodResourcesOptions KubeletOptionsFor(milliseconds refresh) {
  return {.endpoint = "unix:///test/kubelet.sock", .refresh_interval = refresh};
}

sys::PodDevices Vf(const std::string& pod, std::vector<std::string> ids) {
  return {.pod = pod,
          .pod_namespace = "training",
          .container = "worker",
          .resource = "nvidia.com/sriov_rdma_vf",
          .device_ids = std::move(ids)};
}

TEST(PodResources, NothingRunsBeforeTheFirstSnapshotThenTheAnswerIsKept) {
  FakeKubelet kubelet;
  kubelet.devices = {Vf("llm-0", {"0000:3b:02.1"})};
  {
    sys::PodResources pods(KubeletOptionsFor(milliseconds(1)), kubelet.Fn());
    std::this_thread::sleep_for(milliseconds(50));
    EXPECT_EQ(kubelet.calls, 0) << "no thread, no call, before a scrape asks";
  }
  kubelet.delay = milliseconds(200);
  sys::PodResources pods(KubeletOptionsFor(milliseconds(20)), kubelet.Fn());
  EXPECT_TRUE(pods.Snapshot()->empty()) << "the first scrape does not wait";
  ASSERT_TRUE(pods.WaitForAttempts(1, milliseconds(10000)));
  ASSERT_EQ(pods.Snapshot()->size(), 1U);
  EXPECT_EQ(pods.Snapshot()->front().pod, "llm-0");
  {
    const std::lock_guard lock(kubelet.mutex);
    kubelet.error = "connection refused";
  }
  ASSERT_TRUE(pods.WaitForAttempts(3, milliseconds(10000)));
  ASSERT_EQ(pods.Snapshot()->size(), 1U) << "a kubelet gone leaves the last answer";
  EXPECT_EQ(pods.status().last_error, "connection refused");
  EXPECT_TRUE(pods.status().last_success);
}

std::vector<std::map<std::string, std::string>> DeviceSeries(
    const std::vector<prometheus::MetricFamily>& families) {
  std::vector<std::map<std::string, std::string>> series;
  for (const auto& family : families) {
    if (family.name != "rdma_device_workload_info") continue;
    for (const auto& metric : family.metric) {
      std::map<std::string, std::string> labels;
      for (const auto& label : metric.label) labels[label.name] = label.value;
      series.push_back(labels);
    }
  }
  return series;
}

TEST_F(PodDevicesFixture, TheWorkloadCollectorNamesThePodOfEachDevice) {
  FakeKubelet kubelet;
  kubelet.devices = {
      Vf("llm-0", {"0000:3b:02.1", "0000:3b:02.5"}),  // the second is not on this host
      Vf("llm-1", {"mlx5_core.sf.4"}),
      {.pod = "shared",
       .pod_namespace = "hpc",
       .container = "mpi",
       .resource = "rdma/hca_shared_devices_a",
       .device_ids = {"3"}},  // a shared RDMA device plugin slot: nothing to map
      Vf("plain", {"0000:3b:02.2"}),
  };
  auto pods =
      std::make_unique<sys::PodResources>(KubeletOptionsFor(std::chrono::hours(1)), kubelet.Fn());
  sys::PodResources* raw = pods.get();
  std::vector<NamedCollector> collectors;
  collectors.push_back(
      {"workload", std::make_unique<WorkloadCollector>(
                       sysfs_.path(), nullptr,
                       std::make_unique<DeviceWorkloads>(sysfs_.path(), std::move(pods)))});
  CollectorRunner runner(std::move(collectors), BuildInfo{"1", "r"}, sysfs_.path());
  EXPECT_TRUE(DeviceSeries(runner.Collect()).empty()) << "the first scrape does not wait";
  ASSERT_TRUE(raw->WaitForAttempts(1, milliseconds(10000)));
  const auto families = runner.Collect();
  using Labels = std::map<std::string, std::string>;
  EXPECT_EQ(DeviceSeries(families), (std::vector<Labels>{
                                        {{"device", "mlx5_5"},
                                         {"netdev", "ens1f0v1"},
                                         {"namespace", "training"},
                                         {"pod", "llm-0"},
                                         {"container", "worker"},
                                         {"resource", "nvidia.com/sriov_rdma_vf"}},
                                        {{"device", "mlx5_9"},
                                         {"netdev", "enp59s0f0s4"},
                                         {"namespace", "training"},
                                         {"pod", "llm-1"},
                                         {"container", "worker"},
                                         {"resource", "nvidia.com/sriov_rdma_vf"}},
                                        {{"netdev", "ens2f0v2"},
                                         {"namespace", "training"},
                                         {"pod", "plain"},
                                         {"container", "worker"},
                                         {"resource", "nvidia.com/sriov_rdma_vf"}},
                                    }));
  // No process exported, yet the collector has data; its detail counts what mapped nothing.
  const auto states = runner.States();
  ASSERT_EQ(states.size(), 1U);
  EXPECT_EQ(states[0].health, CollectorHealth::kOk);
  EXPECT_NE(states[0].detail.find("3 device series of 3 pods"), std::string::npos)
      << states[0].detail;
  EXPECT_NE(states[0].detail.find("2 device ids name no RDMA device or netdev here (1 not a PCI "
                                  "or auxiliary device, 1 absent, 0 with neither)"),
            std::string::npos)
      << states[0].detail;
}

TEST(ResolveKubeletSocket, AutoTakesTheDefaultSocketWhenPresent) {
  testing::TempDir root;
  EXPECT_EQ(ResolveKubeletSocket("auto", root.path()), "") << "no socket: no kubelet to ask";
  EXPECT_EQ(ResolveKubeletSocket("none", root.path()), "");
  EXPECT_EQ(ResolveKubeletSocket("/x/kubelet.sock", root.path()), "unix:///x/kubelet.sock");
  EXPECT_EQ(ResolveKubeletSocket("unix:///x.sock", root.path()), "unix:///x.sock");
  const std::filesystem::path socket_path =
      root.path() / "var/lib/kubelet/pod-resources/kubelet.sock";
  EXPECT_EQ(sys::DefaultPodResourcesEndpoint(root.path()), "unix://" + socket_path.string());
  // A regular file there is not the kubelet's socket.
  std::filesystem::create_directories(socket_path.parent_path());
  std::ofstream(socket_path) << "";
  EXPECT_EQ(ResolveKubeletSocket("auto", root.path()), "");
  std::filesystem::remove(socket_path);
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un address{.sun_family = AF_UNIX, .sun_path = {}};
  ASSERT_LT(socket_path.string().size(), sizeof(address.sun_path));
  socket_path.string().copy(address.sun_path, sizeof(address.sun_path) - 1);
  ASSERT_EQ(bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0);
  EXPECT_EQ(ResolveKubeletSocket("auto", root.path()), "unix://" + socket_path.string());
  close(fd);
}

}  // namespace
}  // namespace rdmascope
