// The workload collector: which Kubernetes pod and container, Slurm job and step, or systemd
// unit each process runs for, as one rdma_process_workload_info series per pid that the other
// collectors exported in the same scrape (kube-state-metrics' kube_pod_info pattern: identity in
// an _info series joined in queries, so the per-process series keep their cardinality).
//
// It reads no process list of its own: the pids are those of the series the collectors listed
// before it produced (CollectAfter), so "every process rdmascope exports" holds by
// construction and a process is found once, by the collector that knows it is an RDMA one.
//
// Containers get their Kubernetes names (pod, namespace, container) from the container
// runtime's CRI socket when one is configured or found (sys/cri_names.h): never waited for.
// The devices the kubelet handed to pods are described too (collectors/device_workload.h).
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "collectors/device_workload.h"
#include "core/collector.h"
#include "sys/cgroup_workload.h"
#include "sys/cri_names.h"

namespace rdmascope {

struct WorkloadOptions {
  // --collector.workload.cri-endpoint: a gRPC target ("unix:///run/containerd/containerd.sock"),
  // "auto" (the first default socket of containerd, CRI-O, cri-dockerd that exists at start)
  // or "none".
  std::string cri_endpoint = "auto";
  std::chrono::milliseconds cri_timeout{2000};
  std::chrono::milliseconds cri_refresh_interval{30000};
};

// The endpoint "auto" stands for here (the first default socket present under `root`), or
// the one given; empty for "none" or when no default socket exists.
std::string ResolveCriEndpoint(const std::string& configured, const std::filesystem::path& root);

class WorkloadCollector : public Collector {
 public:
  // `names`: the container runtime to ask for names; null: cgroups only. `devices`: the
  // kubelet's devices of pods (rdma_device_workload_info); null: none.
  explicit WorkloadCollector(std::filesystem::path procfs,
                             std::unique_ptr<sys::ContainerNames> names = nullptr,
                             std::unique_ptr<DeviceWorkloads> devices = nullptr);

  // Alone (no other collector before it), there is no process to describe.
  CollectResult Collect(MetricSet& out) const override;
  CollectResult CollectAfter(EarlierFamilies earlier, MetricSet& out) const override;

 private:
  // /proc/PID/cgroup as read -> its workload. The processes of a container share one content,
  // so a scrape parses each container once; entries unused for a scrape are dropped.
  sys::Workload Parse(const std::string& content) const;

  const std::filesystem::path procfs_;
  const std::unique_ptr<sys::ContainerNames> names_;
  const std::unique_ptr<DeviceWorkloads> devices_;
  mutable std::mutex mutex_;  // guards the caches (scrapes may run at once)
  mutable std::map<std::string, sys::Workload> parsed_;
  mutable std::map<std::string, sys::Workload> parsed_previous_;
};

}  // namespace rdmascope
