#include "collectors/workload.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_map>
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

std::optional<uint32_t> ParsePid(std::string_view text) {
  uint32_t pid = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), pid);
  if (error != std::errc() || end != text.data() + text.size() || pid == 0) return std::nullopt;
  return pid;
}

// Between 3/4 of the recheck interval and all of it, by pid: processes first seen together
// (a job's ranks, a node's pods after a restart of rdmascope) are read again over a quarter of
// the interval, not all in one scrape.
std::chrono::milliseconds Spread(std::chrono::milliseconds interval, uint32_t pid) {
  const uint64_t mixed = (static_cast<uint64_t>(pid) * 0x9E3779B97F4A7C15ULL) >> 54;  // 0..1023
  return interval - interval * static_cast<int64_t>(mixed) / 4096;
}

struct Exported {
  uint32_t pid;
  std::string_view comm;  // of the first series naming it with one; views into `earlier`
};

// The processes the earlier families name, by pid, with the comm of the first series naming
// it. Non-numeric pids ("kernel", "other", "unknown") are owners without a process to read.
// A family lists a process's series one after the other: a pid equal to the last one seen is
// not looked up again (15 series per process in the bench of docs/benchmarks.md).
// Only the exporter's own pids are: a series with a `pid_ns` label names a process by its
// number in another pid namespace (collectors/occupancy.h, a process it could not translate),
// which in the exporter's /proc is another process or none. Those are counted in
// `namespace_local` (distinct namespace and pid), never looked up.
std::vector<Exported> ExportedProcesses(EarlierFamilies earlier, size_t& namespace_local) {
  std::unordered_map<uint32_t, std::string_view> comms;
  std::set<std::pair<std::string_view, std::string_view>> foreign;
  for (const prometheus::MetricFamily& family : earlier) {
    std::string_view last_pid;
    bool last_had_comm = false;
    for (const prometheus::ClientMetric& metric : family.metric) {
      const std::string* pid = nullptr;
      const std::string* comm = nullptr;
      const std::string* pid_ns = nullptr;
      for (const prometheus::ClientMetric::Label& label : metric.label) {
        if (label.name == "pid") pid = &label.value;
        if (label.name == "comm") comm = &label.value;
        if (label.name == "pid_ns") pid_ns = &label.value;
      }
      if (pid == nullptr) continue;
      if (pid_ns != nullptr && !pid_ns->empty()) {
        foreign.emplace(*pid_ns, *pid);
        continue;
      }
      if (*pid == last_pid && (last_had_comm || comm == nullptr)) continue;
      last_pid = *pid;
      last_had_comm = comm != nullptr && !comm->empty();
      const std::optional<uint32_t> number = ParsePid(*pid);
      if (!number) continue;
      // Both std::string_view: `cond ? *comm : ""` would be a temporary std::string.
      const std::string_view comm_view = comm != nullptr ? std::string_view(*comm) : "";
      auto [it, fresh] = comms.try_emplace(*number, comm_view);
      if (!fresh && it->second.empty() && comm != nullptr) it->second = *comm;
    }
  }
  std::vector<Exported> processes;
  processes.reserve(comms.size());
  for (const auto& [pid, comm] : comms) processes.push_back({pid, comm});
  std::sort(processes.begin(), processes.end(),
            [](const Exported& a, const Exported& b) { return a.pid < b.pid; });
  namespace_local = foreign.size();
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
                                     std::unique_ptr<DeviceWorkloads> devices,
                                     std::chrono::milliseconds recheck_interval)
    : procfs_(std::move(procfs)),
      names_(std::move(names)),
      devices_(std::move(devices)),
      recheck_interval_(recheck_interval),
      own_procfs_(sys::IsOwnProcfs(procfs_)) {}

CollectResult WorkloadCollector::Collect(MetricSet& out) const { return CollectAfter({}, out); }

sys::Workload WorkloadCollector::Parse(const std::string& content) const {
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

std::optional<sys::Workload> WorkloadCollector::Read(uint32_t pid, bool still_running,
                                                     Clock::time_point now) const {
  const auto known = known_.find(pid);
  if (known != known_.end() && still_running &&
      now < known->second.read_at + Spread(recheck_interval_, pid)) {
    known->second.scrape = scrape_;
    return known->second.workload;
  }
  // Pinned before the read: should the pid name another process by the time of the read, the
  // handle is of the one that exited, and the next scrape reads again.
  sys::ProcessHandle handle;
  if (known != known_.end() && still_running) {
    handle = std::move(known->second.handle);
  } else if (own_procfs_) {
    handle = sys::ProcessHandle::Open(pid);
  }
  // Gone since the other collectors read it: no series rather than a guess.
  const std::optional<std::string> content =
      sysfs::ReadFile(procfs_ / std::to_string(pid) / "cgroup", kMaxCgroupFile);
  if (!content) {
    if (known != known_.end()) known_.erase(known);
    return std::nullopt;
  }
  sys::Workload workload = Parse(*content);
  if (handle.valid()) {
    known_.insert_or_assign(
        pid,
        Known{
            .handle = std::move(handle), .read_at = now, .workload = workload, .scrape = scrape_});
  } else if (known != known_.end()) {
    known_.erase(known);
  }
  return workload;
}

WorkloadLabels WorkloadCollector::Labels(sys::Workload workload) const {
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
  WorkloadLabels labels;
  const std::pair<const char*, std::string*> fields[] = {
      {"namespace", named ? &named->pod_namespace : nullptr},
      {"pod", named ? &named->pod : nullptr},
      {"container", named ? &named->container : nullptr},
      {"pod_uid", &workload.pod_uid},
      {"container_id", &workload.container_id},
      {"slurm_job_id", &workload.slurm_job_id},
      {"slurm_step_id", &workload.slurm_step_id},
      {"systemd_unit", &workload.systemd_unit},
  };
  for (const auto& [name, value] : fields) {
    if (value != nullptr && !value->empty()) labels.emplace_back(name, std::move(*value));
  }
  return labels;
}

WorkloadLabels WorkloadCollector::Describe(uint32_t pid) const {
  std::optional<sys::Workload> workload;
  {
    std::lock_guard lock(mutex_);
    if (const auto it = known_.find(pid); it != known_.end() && !it->second.handle.Exited()) {
      workload = it->second.workload;
    }
  }
  if (!workload) {
    // Not exported at the last scrape (or none yet): read now, and keep nothing.
    const std::optional<std::string> content =
        sysfs::ReadFile(procfs_ / std::to_string(pid) / "cgroup", kMaxCgroupFile);
    if (!content) return {};
    workload = sys::WorkloadOfProcCgroup(*content);
  }
  return Labels(std::move(*workload));
}

void WorkloadCollector::AddDebugRoutes(DebugRoutes& routes) {
  routes["/debug/workloads"] = [this](std::string_view) { return WorkloadsJson(); };
}

std::string WorkloadCollector::WorkloadsJson() const {
  std::vector<std::pair<uint32_t, sys::Workload>> known;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [pid, entry] : known_) known.emplace_back(pid, entry.workload);
  }
  std::sort(known.begin(), known.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  nlohmann::json processes = nlohmann::json::array();
  for (auto& [pid, workload] : known) {
    nlohmann::json labels = nlohmann::json::object();
    for (auto& [name, value] : Labels(std::move(workload))) labels[name] = std::move(value);
    processes.push_back({{"pid", pid}, {"workload", std::move(labels)}});
  }
  nlohmann::json body = {{"processes", std::move(processes)}};
  // A source's state: where it is asked, how often it was, its last answer's age and error.
  const auto source = [](const std::string& endpoint, const auto& status) {
    nlohmann::json state = {{"endpoint", endpoint}, {"attempts", status.attempts}};
    if (status.last_success) {
      state["last_success_age_seconds"] =
          std::chrono::duration<double>(Clock::now() - *status.last_success).count();
    }
    if (!status.last_error.empty()) state["last_error"] = status.last_error;
    return state;
  };
  nlohmann::json runtime = {{"endpoint", ""}};
  if (names_ != nullptr) {
    const sys::ContainerNames::Status status = names_->status();
    runtime = source(names_->endpoint(), status);
    runtime["containers"] = status.containers;
  }
  nlohmann::json kubelet = {{"endpoint", ""}};
  if (devices_ != nullptr) {
    kubelet = source(devices_->pods().endpoint(), devices_->pods().status());
    const auto pods = devices_->pods().Snapshot();
    // One entry per pod, container and resource with devices, in the last answer.
    kubelet["container_resources"] = pods ? pods->size() : 0;
  }
  body["kubelet"] = std::move(kubelet);
  body["container_runtime"] = std::move(runtime);
  return body.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

CollectResult WorkloadCollector::CollectAfter(EarlierFamilies earlier, MetricSet& out) const {
  // Capture and replay: the runtime's answer of this sample, whatever the processes (each
  // sample holds one).
  if (names_ != nullptr) names_->CollectionStarts();
  // The kubelet's devices of pods, whatever the processes.
  const std::string devices = devices_ ? "; " + devices_->Collect(out) : "";
  size_t namespace_local = 0;
  const std::vector<Exported> processes = ExportedProcesses(earlier, namespace_local);
  const std::string skipped =
      namespace_local == 0 ? ""
                           : "; " + std::to_string(namespace_local) +
                                 " processes of other pid namespaces not described (no pid here)";
  if (processes.empty()) {
    return {.no_data = devices.empty(), .detail = "no process exported" + skipped + devices};
  }
  std::lock_guard lock(mutex_);
  ++scrape_;
  // A new generation: what this scrape parses, plus what it finds in the last one's.
  parsed_previous_ = std::exchange(parsed_, {});
  // Which of the processes read before still run: one poll() for all.
  std::vector<const sys::ProcessHandle*> handles;
  std::vector<uint32_t> handle_pids;
  for (const Exported& process : processes) {
    if (const auto it = known_.find(process.pid); it != known_.end()) {
      handles.push_back(&it->second.handle);
      handle_pids.push_back(process.pid);
    }
  }
  const std::vector<bool> exited = sys::ProcessHandle::Exited(handles);
  std::unordered_map<uint32_t, bool> running;
  for (size_t i = 0; i < handle_pids.size(); ++i) running[handle_pids[i]] = !exited[i];

  const Clock::time_point now = Clock::now();
  size_t described = 0;
  size_t with_workload = 0;
  for (const auto& [pid, comm] : processes) {
    const auto run = running.find(pid);
    std::optional<sys::Workload> read = Read(pid, run != running.end() && run->second, now);
    if (!read) continue;
    const WorkloadLabels workload = Labels(*read);
    const std::string pid_text = std::to_string(pid);
    std::vector<Label> labels{{"pid", pid_text}};
    if (!comm.empty()) labels.emplace_back("comm", comm);
    for (const auto& [name, value] : workload) labels.emplace_back(name, value);
    if (!workload.empty()) ++with_workload;
    if (out.Add(kWorkloadInfo, labels, 1)) ++described;
  }
  // Processes no longer exported: their pidfds are closed.
  std::erase_if(known_, [this](const auto& entry) { return entry.second.scrape != scrape_; });
  return {.detail = std::to_string(described) + " of " + std::to_string(processes.size()) +
                    " processes described, " + std::to_string(with_workload) + " with a workload" +
                    skipped + devices};
}

}  // namespace rdmascope
