#include "collectors/pinned_memory.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>

#include "collectors/resources.h"
#include "core/log.h"
#include "core/process_metrics.h"
#include "core/sysfs.h"

namespace rdmascope {

std::optional<uint64_t> ParseVmPinBytes(std::string_view status) {
  const auto at = status.find("\nVmPin:");
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view line = status.substr(at + 7);
  line = line.substr(0, line.find('\n'));
  line = sysfs::Trim(line);
  if (!line.ends_with(" kB")) return std::nullopt;
  const auto kib = sysfs::ParseUnsigned(line.substr(0, line.size() - 3));
  if (!kib || *kib > UINT64_MAX / 1024) return std::nullopt;
  return *kib * 1024;
}

std::optional<uint64_t> ParseLockedMemoryLimit(std::string_view limits) {
  // "Max locked memory         8388608              8388608              bytes"
  const auto at = limits.find("Max locked memory");
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view line = limits.substr(at + 17);
  line = line.substr(0, line.find('\n'));
  line = sysfs::Trim(line);
  const std::string_view soft = line.substr(0, line.find_first_of(" \t"));
  return sysfs::ParseUnsigned(soft);  // "unlimited" does not parse: no limit to reach
}

std::optional<uint64_t> ParseEffectiveCapabilities(std::string_view status) {
  const auto at = status.find("\nCapEff:");
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view line = status.substr(at + 8);
  line = sysfs::Trim(line.substr(0, line.find('\n')));
  // The kernel prints the whole set as 16 hex digits (fs/proc/array.c render_cap_t).
  if (line.size() != 16) return std::nullopt;
  uint64_t caps = 0;
  const auto [end, error] = std::from_chars(line.data(), line.data() + line.size(), caps, 16);
  if (error != std::errc() || end != line.data() + line.size()) return std::nullopt;
  return caps;
}

bool PinLimitExempt(uint64_t effective, std::string_view user_ns) {
  constexpr int kCapIpcLock = 14;  // include/uapi/linux/capability.h
  // PROC_USER_INIT_INO (include/linux/proc_ns.h): the initial user namespace's fixed inode.
  constexpr std::string_view kInitialUserNamespace = "user:[4026531837]";
  return (effective >> kCapIpcLock & 1) != 0 && user_ns == kInitialUserNamespace;
}

std::optional<uint64_t> ParseMemTotalBytes(std::string_view meminfo) {
  if (!meminfo.starts_with("MemTotal:")) return std::nullopt;
  std::string_view line = meminfo.substr(9, meminfo.find('\n') - 9);
  line = sysfs::Trim(line);
  if (!line.ends_with(" kB")) return std::nullopt;
  const auto kib = sysfs::ParseUnsigned(line.substr(0, line.size() - 3));
  if (!kib || *kib > UINT64_MAX / 1024) return std::nullopt;
  return *kib * 1024;
}

UverbsHolders::UverbsHolders(std::filesystem::path procfs, std::filesystem::path sysfs,
                             std::chrono::seconds rescan,
                             std::shared_ptr<sys::PrivilegedProcfs> privileged)
    : procfs_(std::move(procfs)),
      sysfs_(std::move(sysfs)),
      privileged_(privileged ? std::move(privileged)
                             : std::make_shared<sys::DirectProcfs>(procfs_)),
      topology_(sys::ReadCpuTopology(sysfs_)),
      rescan_(rescan) {}

std::map<uint32_t, std::set<std::string>> UverbsHolders::ScanHolders() const {
  auto holders = privileged_->UverbsHolders();
  if (!holders) {
    log::Debug("uverbs holders not scanned", {{"err", holders.error()}});
    return {};
  }
  return std::move(*holders);
}

std::map<std::string, double> UverbsHolders::RemoteThreadRatios(
    uint32_t pid, const std::set<std::string>& uverbs) const {
  std::map<std::string, double> ratios;
  if (uverbs.empty() || topology_.node_of_cpu.empty()) return ratios;
  // The CPU each thread last ran on (field 39 of its stat), as NUMA nodes.
  std::vector<int> thread_nodes;
  const auto tasks = procfs_ / std::to_string(pid) / "task";
  for (const std::string& tid : sysfs::ListDirectory(tasks)) {
    const auto stat = sysfs::ReadFile(tasks / tid / "stat", 4096);
    const auto cpu = stat ? ParseStatField(*stat, 39) : std::nullopt;
    if (cpu) thread_nodes.push_back(topology_.NodeOf(static_cast<int>(*cpu)));
  }
  if (thread_nodes.empty()) return ratios;
  for (const std::string& name : uverbs) {
    const auto device =
        sysfs::ReadAttribute(sysfs_ / "class" / "infiniband_verbs" / name / "ibdev");
    if (!device) continue;
    const auto node =
        sysfs::ReadSigned(sysfs_ / "class" / "infiniband" / *device / "device" / "numa_node");
    if (!node || *node < 0) continue;  // a virtual device, or a platform without NUMA
    const auto remote =
        std::count_if(thread_nodes.begin(), thread_nodes.end(), [&](int n) { return n != *node; });
    ratios[*device] = static_cast<double>(remote) / static_cast<double>(thread_nodes.size());
  }
  return ratios;
}
std::vector<PinnedProcess> UverbsHolders::Read(const std::vector<uint32_t>& known) {
  std::lock_guard lock(mutex_);
  const auto now = std::chrono::steady_clock::now();
  if (!last_scan_ || now - *last_scan_ >= rescan_) {
    holders_ = ScanHolders();
    last_scan_ = now;
  }
  for (const uint32_t pid : known) holders_.try_emplace(pid);
  // ns/user needs PTRACE_MODE_READ (the broker's CAP_SYS_PTRACE): unreadable is "cannot tell".
  std::vector<uint32_t> pids;
  for (const auto& entry : holders_) pids.push_back(entry.first);
  const auto user_namespaces = privileged_->Namespaces(sys::NamespaceKind::kUser, pids);
  size_t index = 0;
  std::vector<PinnedProcess> out;
  std::map<uint32_t, std::set<std::string>> alive;
  for (const auto& [pid, uverbs] : holders_) {
    const std::optional<std::string>& user_ns = user_namespaces[index++];
    const auto dir = procfs_ / std::to_string(pid);
    const auto status = sysfs::ReadFile(dir / "status", 64 << 10);
    if (!status) continue;  // exited since the scan
    alive.emplace(pid, uverbs);
    const auto pinned = ParseVmPinBytes(*status);
    if (!pinned) continue;
    // A comm that cannot be read: the process is exiting (or the read failed): left out this
    // time, said at debug level. One that reads empty (prctl(PR_SET_NAME, "")) is the process's
    // real name: comm="unknown" as in rdma_process_resources, never an empty label.
    auto comm = sysfs::ReadAttribute(dir / "comm");
    if (!comm) {
      log::Debug("pinned memory of a process left out: its comm cannot be read",
                 {{"pid", std::to_string(pid)}});
      continue;
    }
    if (comm->empty()) *comm = kUnknownComm;
    const auto limits = sysfs::ReadFile(dir / "limits", 16 << 10);
    std::optional<bool> exempt;
    const auto caps = ParseEffectiveCapabilities(*status);
    if (caps && user_ns) exempt = PinLimitExempt(*caps, *user_ns);  // "user:[N]"
    out.push_back({.pid = pid,
                   .comm = std::move(*comm),
                   .pinned_bytes = *pinned,
                   .locked_limit_bytes = limits ? ParseLockedMemoryLimit(*limits) : std::nullopt,
                   .pin_limit_exempt = exempt,
                   .remote_numa_thread_ratio = RemoteThreadRatios(pid, uverbs)});
  }
  holders_ = std::move(alive);
  return out;
}

}  // namespace rdmascope
