#include "collectors/device_workload.h"

#include <set>
#include <system_error>
#include <utility>
#include <vector>

#include "sys/plugin_devices.h"

namespace rdmascope {
namespace {

constexpr MetricDesc kDeviceWorkloadInfo{
    "rdma_device_workload_info",
    "The pod, namespace and container an RDMA device (device) or netdev (netdev) was handed "
    "to, and the device plugin resource it came from, from the kubelet's PodResources API: "
    "SR-IOV VFs and sub-functions by PCI address or auxiliary device name (labels without a "
    "value are omitted). Join on (instance, device); netdev series on the netdev label.",
    prometheus::MetricType::Gauge};

}  // namespace

std::string ResolveKubeletSocket(const std::string& configured, const std::filesystem::path& root) {
  if (configured == "none" || configured.empty()) return "";
  if (configured == "auto") {
    const std::string endpoint = sys::DefaultPodResourcesEndpoint(root);
    std::error_code ec;
    return std::filesystem::is_socket(endpoint.substr(std::string_view("unix://").size()), ec)
               ? endpoint
               : "";
  }
  // A path; anything else ("unix:...", "dns:...") is a gRPC target already.
  if (configured.front() == '/') return "unix://" + configured;
  return configured;
}

DeviceWorkloads::DeviceWorkloads(std::filesystem::path sysfs,
                                 std::unique_ptr<sys::PodResources> pods)
    : sysfs_(std::move(sysfs)), pods_(std::move(pods)) {}

std::string DeviceWorkloads::Collect(MetricSet& out) const {
  pods_->CollectionStarts();  // capture and replay: this sample's answer
  const std::shared_ptr<const std::vector<sys::PodDevices>> listed = pods_->Snapshot();
  size_t series = 0;
  size_t not_functions = 0;  // slots of the shared RDMA device plugin, GPU UUIDs...
  size_t absent = 0;         // functions this host does not have
  size_t without = 0;        // functions with neither an RDMA device nor a netdev
  std::set<std::string> pods;
  for (const sys::PodDevices& entry : *listed) {
    for (const std::string& id : entry.device_ids) {
      const sys::PluginDeviceMapping mapping = sys::MapPluginDevice(sysfs_, id);
      switch (mapping.result) {
        case sys::PluginDeviceMapping::Result::kNotAFunction:
          ++not_functions;
          continue;
        case sys::PluginDeviceMapping::Result::kAbsent:
          ++absent;
          continue;
        case sys::PluginDeviceMapping::Result::kNoRdmaOrNetdev:
          ++without;
          continue;
        case sys::PluginDeviceMapping::Result::kMapped:
          break;
      }
      for (const sys::PluginDevice& device : mapping.devices) {
        std::vector<Label> labels;
        if (!device.rdma_device.empty()) labels.emplace_back("device", device.rdma_device);
        if (!device.netdev.empty()) labels.emplace_back("netdev", device.netdev);
        const std::pair<const char*, const std::string&> fields[] = {
            {"namespace", entry.pod_namespace},
            {"pod", entry.pod},
            {"container", entry.container},
            {"resource", entry.resource},
        };
        for (const auto& [name, value] : fields) {
          if (!value.empty()) labels.emplace_back(name, value);
        }
        if (out.Add(kDeviceWorkloadInfo, labels, 1)) ++series;
      }
      pods.insert(entry.pod_namespace + "/" + entry.pod);
    }
  }
  const sys::BackgroundRefresh::Status status = pods_->status();
  std::string detail = "kubelet: " + std::to_string(series) + " device series of " +
                       std::to_string(pods.size()) + " pods";
  const size_t unmapped = not_functions + absent + without;
  if (unmapped > 0) {
    detail += ", " + std::to_string(unmapped) + " device ids name no RDMA device or netdev here (" +
              std::to_string(not_functions) + " not a PCI or auxiliary device, " +
              std::to_string(absent) + " absent, " + std::to_string(without) + " with neither)";
  }
  if (!status.last_success) {
    detail += status.last_error.empty() ? " (not answered yet)"
                                        : " (not answered: " + status.last_error + ")";
  } else if (!status.last_error.empty()) {
    detail += " (last answer kept: " + status.last_error + ")";
  }
  return detail;
}

}  // namespace rdmascope
