// Pinned memory of RDMA processes without eBPF: VmPin from <procfs>/PID/status for the
// processes that hold a /dev/infiniband/uverbs* device open. Hosts where the MR probes cannot
// load still see pinned-memory growth.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "sys/cpu_topology.h"
#include "sys/privileged_procfs.h"

namespace rdmascope {

struct PinnedProcess {
  uint32_t pid = 0;
  std::string comm;
  uint64_t pinned_bytes = 0;
  // RLIMIT_MEMLOCK soft limit ("Max locked memory" in /proc/PID/limits); nullopt: unlimited or
  // unreadable. Registrations fail once pinned memory reaches it.
  std::optional<uint64_t> locked_limit_bytes;
  // ib_umem_get refuses a registration only when pinned memory would exceed RLIMIT_MEMLOCK
  // *and* the task is not capable(CAP_IPC_LOCK) (drivers/infiniband/core/umem.c), i.e. holds
  // it in the initial user namespace: true then (root, most privileged containers), false when
  // it does not, nullopt when CapEff or the user namespace cannot be read.
  std::optional<bool> pin_limit_exempt;
  // Per RDMA device the process has open (/dev/infiniband/uverbsN), the share of its threads
  // that last ran on a CPU of another NUMA node than the device's (devices without a NUMA
  // node, such as rxe, are left out).
  std::map<std::string, double> remote_numa_thread_ratio;
};

// "VmPin:\t   30720 kB" in a status file -> bytes.
std::optional<uint64_t> ParseVmPinBytes(std::string_view status);

// The soft "Max locked memory" of a /proc/PID/limits file, in bytes; nullopt if unlimited.
std::optional<uint64_t> ParseLockedMemoryLimit(std::string_view limits);

// "CapEff:\t000001ffffffffff" in a status file -> the effective capability set.
std::optional<uint64_t> ParseEffectiveCapabilities(std::string_view status);

// Whether a process with this CapEff, in a user namespace whose /proc/PID/ns/user link reads
// `user_ns`, passes capable(CAP_IPC_LOCK): the bit in the initial user namespace only
// (capable() asks init_user_ns; a rootless container's CAP_IPC_LOCK does not count).
bool PinLimitExempt(uint64_t effective, std::string_view user_ns);

// MemTotal of /proc/meminfo, in bytes.
std::optional<uint64_t> ParseMemTotalBytes(std::string_view meminfo);

class UverbsHolders {
 public:
  // Holders are found by reading every process's fd table, which is costly on big hosts, so
  // that scan runs at most once per `rescan`; VmPin of known holders is read on every call.
  // `privileged`: where the fd tables and ns/user links are read (serve: the capability
  // broker); null: this process reads `procfs`.
  UverbsHolders(std::filesystem::path procfs, std::filesystem::path sysfs,
                std::chrono::seconds rescan,
                std::shared_ptr<sys::PrivilegedProcfs> privileged = nullptr);

  // `known`: pids already known to use RDMA (the MR probes saw them register), read at once
  // rather than after the next fd-table scan.
  std::vector<PinnedProcess> Read(const std::vector<uint32_t>& known = {});

 private:
  // pid -> the uverbs character devices it holds open ("uverbs0").
  std::map<uint32_t, std::set<std::string>> ScanHolders() const;
  std::map<std::string, double> RemoteThreadRatios(uint32_t pid,
                                                   const std::set<std::string>& uverbs) const;

  std::filesystem::path procfs_;
  std::filesystem::path sysfs_;
  std::shared_ptr<sys::PrivilegedProcfs> privileged_;
  sys::CpuTopology topology_;
  std::chrono::seconds rescan_;
  std::mutex mutex_;
  std::map<uint32_t, std::set<std::string>> holders_;
  std::optional<std::chrono::steady_clock::time_point> last_scan_;
};

}  // namespace rdmascope
