// The resources collector: RDMA objects (PD, CQ, QP, MR, SRQ, context, CM id) per device and
// per owning process, from the kernel's resource tracking over RDMA netlink (`rdma res show`).
//
// Processes are ranked by the number of objects they hold; the top
// --collector.resources.max-processes keep their own series and the rest are summed under
// pid="other", so a host running thousands of short-lived RDMA jobs cannot blow up cardinality.
// Kernel consumers are labelled pid="kernel" with their kernel name as comm (ib_core, rdma_cm...).
#pragma once

#include <cstddef>
#include <expected>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/collector.h"
#include "core/name_filter.h"
#include "sys/rdma_netlink.h"

namespace rdmascope {

struct ResourcesOptions {
  std::string device_include;
  std::string device_exclude;
  size_t max_processes = 50;
  // User CQs whose raw hardware state is queried per scrape (mlx5; one netlink round trip
  // each); 0 turns it off.
  size_t max_raw_cqs = 256;
};

// Test seam: the netlink dump.
class ResourceSource {
 public:
  virtual ~ResourceSource() = default;
  // errno on failure (EPROTONOSUPPORT: no RDMA netlink in this kernel).
  virtual std::expected<std::vector<sys::RdmaDeviceResources>, int> Read() const = 0;
};

class NetlinkResourceSource : public ResourceSource {
 public:
  explicit NetlinkResourceSource(size_t max_raw_cqs = 0) : max_raw_cqs_(max_raw_cqs) {}
  std::expected<std::vector<sys::RdmaDeviceResources>, int> Read() const override;

 private:
  size_t max_raw_cqs_;
};

struct ResourcesMapping {
  size_t processes = 0;         // distinct user-space owners seen
  size_t folded_processes = 0;  // of which summed under pid="other"
  size_t raw_cqs_decoded = 0;
  size_t raw_cqs_undecoded = 0;  // raw dumps in a layout the decoder does not accept
};

// comm_of(pid) returns the process name ("" if it is gone: then comm="unknown", as for the
// objects of an exiting owner, never an empty label).
ResourcesMapping MapResources(const std::vector<sys::RdmaDeviceResources>& devices,
                              const NameFilter& device_filter, size_t max_processes,
                              const std::function<std::string(uint32_t)>& comm_of, MetricSet& out);

// Whether this process is in the host's initial pid namespace, from the inode of
// <procfs>/self/ns/pid: the kernel gives the initial one a fixed inode (PROC_PID_INIT_INO,
// include/linux/proc_ns.h). Unlike NSpid in /proc/self/status (relative to the pid namespace
// that mounted /proc) or /proc/1/ns/pid (the container's own init), this holds inside a
// container. nullopt if the link cannot be read.
std::optional<bool> InInitialPidNamespace(const std::filesystem::path& procfs);

// The comm label of an owner: <procfs>/PID/comm, or "unknown" when it cannot be read (the
// process is exiting, or the read failed), logged at debug level.
inline constexpr std::string_view kUnknownComm = "unknown";
std::string ProcessComm(const std::filesystem::path& procfs, uint32_t pid);

class ResourcesCollector : public Collector {
 public:
  // Warns once when not in the initial pid namespace: nldev reports the pid of a process as
  // task_pid_vnr(), 0 for a process outside the exporter's pid namespace, and omits it then
  // (drivers/infiniband/core/nldev.c, fill_res_name_pid), so all such processes (every host
  // process, for a container without hostPID) are counted under pid="unknown".
  ResourcesCollector(const ResourcesOptions& options, std::filesystem::path procfs,
                     std::unique_ptr<ResourceSource> source);
  CollectResult Collect(MetricSet& out) const override;

 private:
  NameFilter devices_;
  size_t max_processes_;
  std::filesystem::path procfs_;
  std::unique_ptr<ResourceSource> source_;
};

}  // namespace rdmascope
