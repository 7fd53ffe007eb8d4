#include "profile/numa_sampler.h"

#include "doctor/check_util.h"

namespace rdmascope::profile {

NumaSampler::NumaSampler(std::filesystem::path procfs, sys::CpuTopology topology, uint32_t pid)
    : procfs_(std::move(procfs)), topology_(std::move(topology)), pid_(pid) {}

void NumaSampler::Sample() {
  for (const sys::ThreadCpu& thread : sys::ReadThreadCpus(procfs_, pid_, topology_)) {
    ThreadPlacement& placement = threads_[thread.tid];
    placement.tid = thread.tid;
    if (!thread.comm.empty()) placement.comm = thread.comm;
    ++placement.samples_by_node[thread.node];
    ++samples_;
  }
  auto memory = sys::ReadNumaMemory(procfs_, pid_);
  // An exited (zombie) process's numa_maps reads empty: keep the reading of the live one.
  if (memory && (!memory->bytes_by_node.empty() || !memory_)) memory_ = std::move(memory);
}

NumaSummary NumaSampler::Summarize(const std::string& nic_device,
                                   std::optional<int> nic_node) const {
  NumaSummary summary;
  summary.samples = samples_;
  if (nic_node && *nic_node >= 0) {
    summary.nic_device = nic_device;
    summary.nic_node = nic_node;
  }
  uint64_t off = 0;
  for (const auto& [tid, thread] : threads_) {
    ThreadPlacement placement = thread;
    uint64_t most = 0;
    for (const auto& [node, count] : placement.samples_by_node) {
      if (count > most) {  // ascending nodes: a tie keeps the lowest
        most = count;
        placement.majority_node = node;
      }
      if (summary.nic_node && node != *summary.nic_node) off += count;
    }
    summary.threads.push_back(std::move(placement));
  }
  if (summary.nic_node && samples_ > 0) {
    summary.off_nic_samples = off;
    summary.off_nic_share = static_cast<double>(off) / static_cast<double>(samples_);
  }
  if (memory_) {
    summary.memory_bytes_by_node = memory_->bytes_by_node;
    summary.malformed_numa_maps_lines = memory_->malformed_lines;
    uint64_t total = 0, off_bytes = 0;
    for (const auto& [node, bytes] : memory_->bytes_by_node) {
      total += bytes;
      if (summary.nic_node && node != *summary.nic_node) off_bytes += bytes;
    }
    if (summary.nic_node && total > 0) {
      summary.memory_off_nic_share = static_cast<double>(off_bytes) / static_cast<double>(total);
    }
  }
  return summary;
}

std::optional<doctor::Finding> NumaPlacementAdvice(const NumaSummary& numa, uint32_t pid,
                                                   const std::string& comm,
                                                   const std::vector<std::string>& command,
                                                   double off_node_ratio) {
  using doctor::Num;
  using doctor::Percent;
  if (!numa.nic_node || !numa.off_nic_share) return std::nullopt;
  const double threads_off = *numa.off_nic_share;
  const double memory_off = numa.memory_off_nic_share.value_or(0);
  const bool off = threads_off > off_node_ratio || memory_off > off_node_ratio;
  doctor::Scope scope{{"device", numa.nic_device}, {"pid", std::to_string(pid)}, {"comm", comm}};
  doctor::Finding finding = doctor::Make("host.numa_placement", "host",
                                         off ? doctor::Severity::kWarn : doctor::Severity::kOk,
                                         std::move(scope), "rdmaprocessoffnicnumanode");
  const std::string node = Num(*numa.nic_node);
  finding.observed = Percent(threads_off) + " of " + Num(static_cast<double>(numa.samples)) +
                     " thread samples (" + Num(static_cast<double>(numa.threads.size())) +
                     " threads) ran on another NUMA node than " + numa.nic_device + " (node " +
                     node + ")";
  if (numa.memory_off_nic_share) {
    finding.observed += "; " + Percent(memory_off) + " of its resident memory is off node " + node;
  }
  finding.expected = "at most " + Percent(off_node_ratio) + " of samples and of memory";
  if (off) {
    std::string program;
    for (const std::string& word : command) program += (program.empty() ? "" : " ") + word;
    if (program.empty()) program = comm;
    finding.advice =
        "every DMA and doorbell crosses the socket interconnect (local placement cut access "
        "latency by about 30%): run " +
        (comm.empty() ? std::string("the program") : comm) + " on node " + node +
        ", CPUs and memory";
    finding.fix = "numactl --cpunodebind=" + node + " --membind=" + node + " -- " + program;
  }
  return finding;
}

}  // namespace rdmascope::profile
