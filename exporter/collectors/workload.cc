#include "collectors/workload.h"

#include <charconv>
#include <cstdint>
#include <utility>
#include <vector>

#include "core/sysfs.h"

namespace rdmascope {
namespace {

using prometheus::MetricType;

constexpr MetricDesc kWorkloadInfo{
    "rdma_process_workload_info",
    "The workload a process exported by another rdmascope series runs for, from its cgroup: "
    "Kubernetes pod_uid and container_id, Slurm slurm_job_id and slurm_step_id, the "
    "systemd_unit (labels without a value are omitted). Join on (instance, pid).",
    MetricType::Gauge};

// A cgroup file is a few hundred bytes; v1 hosts list a dozen hierarchies.
constexpr size_t kMaxCgroupFile = 64 * 1024;

bool IsPid(std::string_view text) {
  uint32_t pid = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), pid);
  return error == std::errc() && end == text.data() + text.size() && pid > 0;
}

// pid -> comm of the first series naming it. Non-numeric pids ("kernel", "other", "unknown")
// are owners without a process to read.
std::map<std::string, std::string> ExportedProcesses(EarlierFamilies earlier) {
  std::map<std::string, std::string> processes;
  for (const prometheus::MetricFamily& family : earlier) {
    for (const prometheus::ClientMetric& metric : family.metric) {
      const std::string* pid = nullptr;
      const std::string* comm = nullptr;
      for (const prometheus::ClientMetric::Label& label : metric.label) {
        if (label.name == "pid") pid = &label.value;
        if (label.name == "comm") comm = &label.value;
      }
      if (pid == nullptr || !IsPid(*pid)) continue;
      auto [it, fresh] = processes.try_emplace(*pid, comm != nullptr ? *comm : "");
      if (!fresh && it->second.empty() && comm != nullptr) it->second = *comm;
    }
  }
  return processes;
}

}  // namespace

WorkloadCollector::WorkloadCollector(std::filesystem::path procfs) : procfs_(std::move(procfs)) {}

CollectResult WorkloadCollector::Collect(MetricSet& out) const { return CollectAfter({}, out); }

sys::Workload WorkloadCollector::Parse(const std::string& content) const {
  std::lock_guard lock(mutex_);
  if (auto it = parsed_.find(content); it != parsed_.end()) return it->second;
  sys::Workload workload;
  if (auto it = parsed_previous_.find(content); it != parsed_previous_.end()) {
    workload = it->second;
  } else {
    workload = sys::WorkloadOfProcCgroup(content);
  }
  parsed_.emplace(content, workload);
  return workload;
}

CollectResult WorkloadCollector::CollectAfter(EarlierFamilies earlier, MetricSet& out) const {
  const std::map<std::string, std::string> processes = ExportedProcesses(earlier);
  if (processes.empty()) return {.no_data = true, .detail = "no process exported"};
  {
    // A new generation: what this scrape parses, plus what it finds in the last one's.
    std::lock_guard lock(mutex_);
    parsed_previous_ = std::exchange(parsed_, {});
  }
  size_t described = 0;
  size_t with_workload = 0;
  for (const auto& [pid, comm] : processes) {
    // Gone since the other collectors read it: no series rather than a guess.
    const std::optional<std::string> content =
        sysfs::ReadFile(procfs_ / pid / "cgroup", kMaxCgroupFile);
    if (!content) continue;
    const sys::Workload workload = Parse(*content);
    std::vector<Label> labels{{"pid", pid}};
    if (!comm.empty()) labels.emplace_back("comm", comm);
    const std::pair<std::string_view, const std::string&> fields[] = {
        {"pod_uid", workload.pod_uid},           {"container_id", workload.container_id},
        {"slurm_job_id", workload.slurm_job_id}, {"slurm_step_id", workload.slurm_step_id},
        {"systemd_unit", workload.systemd_unit},
    };
    for (const auto& [name, value] : fields) {
      if (!value.empty()) labels.emplace_back(name, value);
    }
    if (labels.size() > (comm.empty() ? 1 : 2)) ++with_workload;
    if (out.Add(kWorkloadInfo, labels, 1)) ++described;
  }
  return {.detail = std::to_string(described) + " of " + std::to_string(processes.size()) +
                    " processes described, " + std::to_string(with_workload) + " with a workload"};
}

}  // namespace rdmascope
