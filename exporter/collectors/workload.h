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
//
// A process's cgroup is read when it is first exported, then again every `recheck_interval`
// (a process moved to another cgroup, rare once it uses RDMA, is seen within that time): in
// between, a pidfd held for it tells in one poll() for all of them whether its pid still names
// it (sys/process_handle.h). Reading /proc/PID/cgroup for every process at every scrape cost
// 6 us each, a quarter of a scrape of 1,000 processes (docs/benchmarks.md).
//
// The devices the kubelet handed to pods are described too (collectors/device_workload.h).
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "collectors/device_workload.h"
#include "core/collector.h"
#include "sys/cgroup_workload.h"
#include "sys/cri_names.h"
#include "sys/process_handle.h"

namespace rdmascope {

struct WorkloadOptions {
  // --collector.workload.cri-endpoint: a gRPC target ("unix:///run/containerd/containerd.sock"),
  // "auto" (the first default socket of containerd, CRI-O, cri-dockerd that exists at start)
  // or "none".
  std::string cri_endpoint = "auto";
  std::chrono::milliseconds cri_timeout{2000};
  std::chrono::milliseconds cri_refresh_interval{30000};
  // --collector.workload.recheck-interval: how long a process's cgroup reading is kept.
  std::chrono::milliseconds recheck_interval{60000};
};

// The endpoint "auto" stands for here (the first default socket present under `root`), or
// the one given; empty for "none" or when no default socket exists.
std::string ResolveCriEndpoint(const std::string& configured, const std::filesystem::path& root);

// A process's workload as label name -> value, in rdma_process_workload_info's order, without
// pid and comm; labels without a value are left out.
using WorkloadLabels = std::vector<std::pair<std::string, std::string>>;

class WorkloadCollector : public Collector {
 public:
  // `names`: the container runtime to ask for names; null: cgroups only. `devices`: the
  // kubelet's devices of pods (rdma_device_workload_info); null: none.
  explicit WorkloadCollector(std::filesystem::path procfs,
                             std::unique_ptr<sys::ContainerNames> names = nullptr,
                             std::unique_ptr<DeviceWorkloads> devices = nullptr,
                             std::chrono::milliseconds recheck_interval = std::chrono::seconds(60));

  // Alone (no other collector before it), there is no process to describe.
  CollectResult Collect(MetricSet& out) const override;
  CollectResult CollectAfter(EarlierFamilies earlier, MetricSet& out) const override;
  // /debug/workloads: the processes described at the last scrape, and the runtime's state.
  void AddDebugRoutes(DebugRoutes& routes) override;

  // The workload of one process, for /debug/mr/stacks and profile: the last scrape's reading
  // while its process runs, else its cgroup read now. Empty when it has none or is gone.
  WorkloadLabels Describe(uint32_t pid) const;

 private:
  using Clock = std::chrono::steady_clock;

  // A process whose cgroup was read: kept while it is exported and its pidfd says it runs.
  struct Known {
    sys::ProcessHandle handle;
    Clock::time_point read_at;
    sys::Workload workload;
    uint64_t scrape = 0;  // the last scrape that exported it
  };

  // With the container runtime's names (pod, namespace, container).
  WorkloadLabels Labels(sys::Workload workload) const;
  std::string WorkloadsJson() const;
  // The workload of `pid` from its cgroup file, or nullopt when it is gone. Under mutex_.
  std::optional<sys::Workload> Read(uint32_t pid, bool still_running, Clock::time_point now) const;
  // /proc/PID/cgroup as read -> its workload. The processes of a container share one content,
  // so a scrape parses each container once; entries unused for a scrape are dropped.
  sys::Workload Parse(const std::string& content) const;

  const std::filesystem::path procfs_;
  const std::unique_ptr<sys::ContainerNames> names_;
  const std::unique_ptr<DeviceWorkloads> devices_;
  const std::chrono::milliseconds recheck_interval_;
  // Pids read there can be pinned with pidfds (not a fixture directory, not another pid
  // namespace's procfs): without, every scrape reads every process's cgroup.
  const bool own_procfs_;
  mutable std::mutex mutex_;  // guards the caches: scrapes may run at once
  mutable uint64_t scrape_ = 0;
  mutable std::unordered_map<uint32_t, Known> known_;
  mutable std::map<std::string, sys::Workload> parsed_;
  mutable std::map<std::string, sys::Workload> parsed_previous_;
};

}  // namespace rdmascope
