// The workload collector: which Kubernetes pod and container, Slurm job and step, or systemd
// unit each process runs for, as one rdma_process_workload_info series per pid that the other
// collectors exported in the same scrape (kube-state-metrics' kube_pod_info pattern: identity in
// an _info series joined in queries, so the per-process series keep their cardinality).
//
// It reads no process list of its own: the pids are those of the series the collectors listed
// before it produced (CollectAfter), so "every process rdmascope exports" holds by
// construction and a process is found once, by the collector that knows it is an RDMA one.
#pragma once

#include <filesystem>
#include <map>
#include <mutex>
#include <string>

#include "core/collector.h"
#include "sys/cgroup_workload.h"

namespace rdmascope {

class WorkloadCollector : public Collector {
 public:
  explicit WorkloadCollector(std::filesystem::path procfs);

  // Alone (no other collector before it), there is no process to describe.
  CollectResult Collect(MetricSet& out) const override;
  CollectResult CollectAfter(EarlierFamilies earlier, MetricSet& out) const override;

 private:
  // /proc/PID/cgroup as read -> its workload. The processes of a container share one content,
  // so a scrape parses each container once; entries unused for a scrape are dropped.
  sys::Workload Parse(const std::string& content) const;

  const std::filesystem::path procfs_;
  mutable std::mutex mutex_;  // guards the caches (scrapes may run at once)
  mutable std::map<std::string, sys::Workload> parsed_;
  mutable std::map<std::string, sys::Workload> parsed_previous_;
};

}  // namespace rdmascope
