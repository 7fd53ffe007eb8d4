// Which pod each RDMA device and netdev was handed to: the kubelet's PodResources answer
// (sys/pod_resources.h) mapped through sysfs (sys/plugin_devices.h) to one
// rdma_device_workload_info series per device, pod, container and resource. Part of the
// workload collector (collectors/workload.h), which calls Collect at each scrape; a scrape
// uses the kubelet's last answer and never waits for it.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>

#include "core/metric_set.h"
#include "sys/pod_resources.h"

namespace rdmascope {

// --collector.workload.kubelet-*.
struct KubeletOptions {
  // A gRPC target ("unix:///var/lib/kubelet/pod-resources/kubelet.sock") or a socket path,
  // "auto" (the kubelet's default socket when it exists at start) or "none".
  std::string socket = "auto";
  std::chrono::milliseconds timeout{2000};
  std::chrono::milliseconds refresh_interval{30000};
};

// The gRPC target "auto" stands for here (the default socket under `root`, when it is one), or
// the one given (a path becomes "unix://PATH"); empty for "none" or when auto finds none.
std::string ResolveKubeletSocket(const std::string& configured, const std::filesystem::path& root);

class DeviceWorkloads {
 public:
  DeviceWorkloads(std::filesystem::path sysfs, std::unique_ptr<sys::PodResources> pods);

  // Adds the series of the kubelet's last answer; returns what the landing page shows.
  std::string Collect(MetricSet& out) const;

  sys::PodResources& pods() const { return *pods_; }

 private:
  const std::filesystem::path sysfs_;
  const std::unique_ptr<sys::PodResources> pods_;
};

}  // namespace rdmascope
