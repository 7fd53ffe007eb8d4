#include "collectors/workload.h"

#include <charconv>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "core/sysfs.h"

namespace rdmascope {
namespace {

using prometheus::MetricType;

constexpr MetricDesc kWorkloadInfo{
    "rdma_process_workload_info",
    "The workload a process exported by another rdmascope series runs for, from its cgroup: "
    "Kubernetes pod_uid and container_id (namespace, pod and container named by the "
    "container runtime), Slurm slurm_job_id and slurm_step_id, the systemd_unit (labels "
    "without a value are omitted). Join on (instance, pid).",
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

std::string ResolveCriEndpoint(const std::string& configured, const std::filesystem::path& root) {
  if (configured == "none" || configured.empty()) return "";
  if (configured != "auto") return configured;
  std::error_code ec;
  for (const std::string& endpoint : sys::DefaultCriEndpoints(root)) {
    if (std::filesystem::is_socket(endpoint.substr(std::string_view("unix://").size()), ec)) {
      return endpoint;
    }
  }
  return "";
}

WorkloadCollector::WorkloadCollector(std::filesystem::path procfs,
                                     std::unique_ptr<sys::ContainerNames> names,
                                     std::unique_ptr<DeviceWorkloads> devices)
    : procfs_(std::move(procfs)), names_(std::move(names)), devices_(std::move(devices)) {}

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
  // The kubelet's devices of pods, whatever the processes.
  const std::string devices = devices_ ? "; " + devices_->Collect(out) : "";
  const std::map<std::string, std::string> processes = ExportedProcesses(earlier);
  if (processes.empty()) {
    return {.no_data = devices.empty(), .detail = "no process exported" + devices};
  }
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
    sys::Workload workload = Parse(*content);
    // The runtime's names for the container; the cgroup's pod UID wins where both have one.
    std::optional<sys::CriContainer> named;
    if (names_ != nullptr && !workload.container_id.empty()) {
      std::string_view id = workload.container_id;
      if (const size_t scheme = id.find("://"); scheme != std::string_view::npos) {
        id.remove_prefix(scheme + 3);
      }
      named = names_->Lookup(id);
      if (named && workload.pod_uid.empty()) workload.pod_uid = named->pod_uid;
    }
    std::vector<Label> labels{{"pid", pid}};
    if (!comm.empty()) labels.emplace_back("comm", comm);
    const std::string none;
    const std::pair<std::string_view, const std::string&> fields[] = {
        {"namespace", named ? named->pod_namespace : none},
        {"pod", named ? named->pod : none},
        {"container", named ? named->container : none},
        {"pod_uid", workload.pod_uid},
        {"container_id", workload.container_id},
        {"slurm_job_id", workload.slurm_job_id},
        {"slurm_step_id", workload.slurm_step_id},
        {"systemd_unit", workload.systemd_unit},
    };
    for (const auto& [name, value] : fields) {
      if (!value.empty()) labels.emplace_back(name, value);
    }
    if (labels.size() > (comm.empty() ? 1 : 2)) ++with_workload;
    if (out.Add(kWorkloadInfo, labels, 1)) ++described;
  }
  return {.detail = std::to_string(described) + " of " + std::to_string(processes.size()) +
                    " processes described, " + std::to_string(with_workload) + " with a workload" +
                    devices};
}

}  // namespace rdmascope
