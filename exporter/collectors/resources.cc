#include "collectors/resources.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <tuple>

#include "core/log.h"
#include "core/sysfs.h"
#include "sys/mlx5_cq_dump.h"
#include "sys/rdma_owners.h"

namespace rdmascope {
namespace {

using prometheus::MetricType;
using sys::RdmaResourceEntry;
using sys::RdmaResourceKind;

constexpr MetricDesc kDeviceResources{
    "rdma_resources", "RDMA objects on the device, host-wide (`rdma res show` summary).",
    MetricType::Gauge};
constexpr MetricDesc kProcessResources{
    "rdma_process_resources",
    "RDMA objects held, by owner: pid (\"kernel\" for kernel consumers, \"other\" for the "
    "processes beyond --collector.resources.max-processes) and comm.",
    MetricType::Gauge};
constexpr MetricDesc kProcessCqEntries{"rdma_process_cq_entries",
                                       "Summed capacity of the owner's completion queues.",
                                       MetricType::Gauge};
constexpr MetricDesc kProcessMrBytes{"rdma_process_mr_bytes",
                                     "Summed length of the owner's memory regions (restrack).",
                                     MetricType::Gauge};
constexpr MetricDesc kProcessQps{
    "rdma_process_qps", "Queue pairs held by the owner, by type and state.", MetricType::Gauge};

constexpr MetricDesc kHardwareOccupancy{
    "rdma_cq_hardware_occupancy_entries",
    "Completions in the CQ not yet consumed, from the device's own producer and consumer "
    "counters (mlx5 raw CQ context); `cqn` as in `rdma res show cq`.",
    MetricType::Gauge};
constexpr MetricDesc kHardwareCapacity{"rdma_cq_hardware_capacity_entries",
                                       "Capacity of the CQ whose hardware occupancy is reported.",
                                       MetricType::Gauge};

constexpr std::string_view kKernelPid = "kernel";
constexpr std::string_view kOtherPid = "other";

// Who holds an object, as labels.
struct Owner {
  std::string pid;
  std::string comm;
  auto operator<=>(const Owner&) const = default;
};

struct OwnerTotals {
  std::map<std::string, uint64_t> counts;  // resource kind name -> objects
  uint64_t cq_entries = 0;
  uint64_t mr_bytes = 0;
  std::map<std::pair<std::string, std::string>, uint64_t> qps;  // (type, state) -> QPs
  uint64_t objects = 0;

  void Add(const OwnerTotals& other) {
    for (const auto& [kind, n] : other.counts) counts[kind] += n;
    cq_entries += other.cq_entries;
    mr_bytes += other.mr_bytes;
    for (const auto& [key, n] : other.qps) qps[key] += n;
    objects += other.objects;
  }
};

void Count(const RdmaResourceEntry& entry, OwnerTotals& totals) {
  ++totals.counts[std::string(sys::ResourceKindName(entry.kind))];
  ++totals.objects;
  if (entry.kind == RdmaResourceKind::kCq && entry.cq_entries)
    totals.cq_entries += *entry.cq_entries;
  if (entry.kind == RdmaResourceKind::kMr && entry.mr_length) totals.mr_bytes += *entry.mr_length;
  if (entry.kind == RdmaResourceKind::kQp && entry.qp_type && entry.qp_state) {
    ++totals.qps[{sys::QpTypeName(*entry.qp_type), sys::QpStateName(*entry.qp_state)}];
  }
}

void Emit(const std::string& device, const Owner& owner, const OwnerTotals& totals,
          MetricSet& out) {
  const Label dev{"device", device};
  const Label pid{"pid", owner.pid};
  const Label comm{"comm", owner.comm};
  for (const auto& [kind, n] : totals.counts) {
    out.Add(kProcessResources, {dev, pid, comm, {"resource", kind}}, static_cast<double>(n));
  }
  if (totals.counts.contains("cq")) {
    out.Add(kProcessCqEntries, {dev, pid, comm}, static_cast<double>(totals.cq_entries));
  }
  if (totals.counts.contains("mr")) {
    out.Add(kProcessMrBytes, {dev, pid, comm}, static_cast<double>(totals.mr_bytes));
  }
  for (const auto& [key, n] : totals.qps) {
    out.Add(kProcessQps, {dev, pid, comm, {"type", key.first}, {"state", key.second}},
            static_cast<double>(n));
  }
}

}  // namespace

std::expected<std::vector<sys::RdmaDeviceResources>, int> NetlinkResourceSource::Read() const {
  auto netlink = sys::RdmaNetlink::Open();
  if (!netlink) return std::unexpected(netlink.error());
  return netlink->DumpAll(max_raw_cqs_);
}

ResourcesMapping MapResources(const std::vector<sys::RdmaDeviceResources>& devices,
                              const NameFilter& device_filter, size_t max_processes,
                              const std::function<std::string(uint32_t)>& comm_of, MetricSet& out) {
  // Per device and owner; user-space owners keyed by pid until ranked.
  std::map<std::string, std::map<uint32_t, OwnerTotals>> by_pid;
  std::map<std::string, std::map<Owner, OwnerTotals>> fixed_owners;  // kernel, unknown
  std::map<uint32_t, uint64_t> objects_per_pid;
  for (const sys::RdmaDeviceResources& device : devices) {
    if (!device_filter.Allows(device.name)) continue;
    for (const auto& [kind, n] : device.summary) {
      out.Add(kDeviceResources, {{"device", device.name}, {"resource", kind}},
              static_cast<double>(n));
    }
    for (const RdmaResourceEntry& entry : device.entries) {
      if (entry.pid) {
        Count(entry, by_pid[device.name][*entry.pid]);
        ++objects_per_pid[*entry.pid];
      } else {
        // No pid and no kernel name, not even through its PD or context: its process is
        // exiting (or outside this pid namespace).
        const Owner owner = entry.kernel_name.empty()
                                ? Owner{"unknown", "unknown"}
                                : Owner{std::string(kKernelPid), entry.kernel_name};
        Count(entry, fixed_owners[device.name][owner]);
      }
    }
  }

  // Rank processes by objects held across devices (ties: lower pid first, for stable output).
  std::vector<std::pair<uint64_t, uint32_t>> ranked;
  for (const auto& [pid, objects] : objects_per_pid) ranked.emplace_back(objects, pid);
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    return std::tie(b.first, a.second) < std::tie(a.first, b.second);
  });
  std::map<uint32_t, std::string> kept;  // pid -> comm
  for (const auto& [objects, pid] : ranked) {
    if (kept.size() >= max_processes) break;
    std::string comm = comm_of(pid);
    kept[pid] = comm.empty() ? std::string(kUnknownComm) : std::move(comm);
  }

  ResourcesMapping mapping{.processes = ranked.size(),
                           .folded_processes = ranked.size() - kept.size()};
  for (const auto& [device, owners] : by_pid) {
    OwnerTotals other;
    for (const auto& [pid, totals] : owners) {
      if (const auto it = kept.find(pid); it != kept.end()) {
        Emit(device, {std::to_string(pid), it->second}, totals, out);
      } else {
        other.Add(totals);
      }
    }
    if (other.objects > 0) {
      Emit(device, {std::string(kOtherPid), std::string(kOtherPid)}, other, out);
    }
  }
  for (const auto& [device, owners] : fixed_owners) {
    for (const auto& [owner, totals] : owners) Emit(device, owner, totals, out);
  }
  // Per CQ, for the processes with their own series: the device's view of its fill level.
  for (const sys::RdmaDeviceResources& device : devices) {
    if (!device_filter.Allows(device.name)) continue;
    for (const RdmaResourceEntry& entry : device.entries) {
      if (entry.raw.empty() || !entry.pid || !entry.id || !entry.cq_entries) continue;
      const auto kept_comm = kept.find(*entry.pid);
      if (kept_comm == kept.end()) continue;
      const auto state = sys::DecodeMlx5CqDump(entry.raw, *entry.cq_entries);
      if (!state) {
        ++mapping.raw_cqs_undecoded;
        continue;
      }
      ++mapping.raw_cqs_decoded;
      const std::string pid = std::to_string(*entry.pid);
      const std::string cqn = std::to_string(*entry.id);
      const std::vector<Label> labels{
          {"device", device.name}, {"pid", pid}, {"comm", kept_comm->second}, {"cqn", cqn}};
      out.Add(kHardwareOccupancy, labels, static_cast<double>(state->occupancy()));
      out.Add(kHardwareCapacity, labels, *entry.cq_entries);
    }
  }
  return mapping;
}

std::string ProcessComm(const std::filesystem::path& procfs, uint32_t pid) {
  auto comm = sysfs::ReadAttribute(procfs / std::to_string(pid) / "comm");
  if (comm && !comm->empty()) return std::move(*comm);
  log::Debug("comm of an RDMA resource owner cannot be read (exiting?): comm=\"unknown\"",
             {{"pid", std::to_string(pid)}});
  return std::string(kUnknownComm);
}

std::optional<bool> InInitialPidNamespace(const std::filesystem::path& procfs) {
  constexpr std::string_view kInitialPidNamespace = "pid:[4026531836]";  // 0xEFFFFFFC
  std::error_code ec;
  const auto link = std::filesystem::read_symlink(procfs / "self" / "ns" / "pid", ec);
  if (ec) return std::nullopt;
  return link.native() == kInitialPidNamespace;
}

ResourcesCollector::ResourcesCollector(const ResourcesOptions& options,
                                       std::filesystem::path procfs,
                                       std::unique_ptr<ResourceSource> source)
    : devices_(options.device_include, options.device_exclude),
      max_processes_(options.max_processes),
      procfs_(std::move(procfs)),
      source_(std::move(source)) {
  static std::atomic<bool> warned{false};
  if (InInitialPidNamespace(procfs_) == false && !warned.exchange(true)) {
    std::error_code ec;
    const auto pid_namespace = std::filesystem::read_symlink(procfs_ / "self/ns/pid", ec);
    log::Warn(
        "not in the host's initial pid namespace: RDMA objects of processes outside this "
        "namespace are reported under pid=\"unknown\" (the kernel gives no pid for them); run "
        "in the host pid namespace (hostPID) to see them per process",
        {{"pid_namespace", pid_namespace.native()}});
  }
}

CollectResult ResourcesCollector::Collect(MetricSet& out) const {
  auto devices = source_->Read();
  if (!devices) {
    if (devices.error() == EPROTONOSUPPORT) {
      return {.no_data = true,
              .detail = "no RDMA netlink in this kernel (built without InfiniBand)"};
    }
    throw std::runtime_error(std::string("RDMA netlink resource dump failed: ") +
                             std::strerror(devices.error()));
  }
  if (devices->empty()) return {.no_data = true, .detail = "no RDMA device"};
  // The kernel names the creating thread, or nobody once it has exited: by process.
  sys::ResolveOwners(*devices, [this](uint32_t tid) { return sys::ThreadGroupOf(procfs_, tid); });
  const auto comm_of = [this](uint32_t pid) { return ProcessComm(procfs_, pid); };
  const ResourcesMapping mapping = MapResources(*devices, devices_, max_processes_, comm_of, out);
  std::string detail = std::to_string(devices->size()) + " devices, " +
                       std::to_string(mapping.processes) + " processes";
  if (mapping.folded_processes > 0) {
    detail += ", " + std::to_string(mapping.folded_processes) + " summed as pid=\"other\"";
  }
  if (mapping.raw_cqs_decoded + mapping.raw_cqs_undecoded > 0) {
    detail += ", raw CQ state decoded for " + std::to_string(mapping.raw_cqs_decoded) + " of " +
              std::to_string(mapping.raw_cqs_decoded + mapping.raw_cqs_undecoded);
  }
  for (const sys::RdmaDeviceResources& device : *devices) {
    for (const std::string& error : device.errors) detail += "; " + device.name + " " + error;
  }
  return {.detail = detail};
}

}  // namespace rdmascope
