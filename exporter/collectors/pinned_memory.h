// Pinned memory of RDMA processes without eBPF: VmPin from <procfs>/PID/status for the
// processes that hold a /dev/infiniband/uverbs* device open. Hosts where the MR probes cannot
// load still see pinned-memory growth.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rdmascope {

struct PinnedProcess {
  uint32_t pid = 0;
  std::string comm;
  uint64_t pinned_bytes = 0;
  // RLIMIT_MEMLOCK soft limit ("Max locked memory" in /proc/PID/limits); nullopt: unlimited or
  // unreadable. Registrations fail once pinned memory reaches it.
  std::optional<uint64_t> locked_limit_bytes;
};

// "VmPin:\t   30720 kB" in a status file -> bytes.
std::optional<uint64_t> ParseVmPinBytes(std::string_view status);

// The soft "Max locked memory" of a /proc/PID/limits file, in bytes; nullopt if unlimited.
std::optional<uint64_t> ParseLockedMemoryLimit(std::string_view limits);

// MemTotal of /proc/meminfo, in bytes.
std::optional<uint64_t> ParseMemTotalBytes(std::string_view meminfo);

class UverbsHolders {
 public:
  // Holders are found by reading every process's fd table, which is costly on big hosts, so
  // that scan runs at most once per `rescan`; VmPin of known holders is read on every call.
  UverbsHolders(std::filesystem::path procfs, std::chrono::seconds rescan)
      : procfs_(std::move(procfs)), rescan_(rescan) {}

  // `known`: pids already known to use RDMA (the MR probes saw them register), read at once
  // rather than after the next fd-table scan.
  std::vector<PinnedProcess> Read(const std::vector<uint32_t>& known = {});

 private:
  std::vector<uint32_t> ScanHolders() const;

  std::filesystem::path procfs_;
  std::chrono::seconds rescan_;
  std::mutex mutex_;
  std::vector<uint32_t> holders_;
  std::optional<std::chrono::steady_clock::time_point> last_scan_;
};

}  // namespace rdmascope
