// Threads' NUMA nodes against the NIC's, sampled during a profile window: at each sample, the
// node of the CPU each thread of the process last ran on (sys::ReadThreadCpus), and the
// process's resident memory per node (sys::ReadNumaMemory, the last reading of the live
// process is kept). Summarize() turns the samples into NumaSummary (profile_data.h);
// NumaPlacementAdvice() into doctor's host.numa_placement finding with the measured figures.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "doctor/finding.h"
#include "profile/profile_data.h"
#include "sys/cpu_topology.h"
#include "sys/numa_placement.h"

namespace rdmascope::profile {

class NumaSampler {
 public:
  NumaSampler(std::filesystem::path procfs, sys::CpuTopology topology, uint32_t pid);

  // One pass over the threads and numa_maps. A process that has gone adds nothing and keeps
  // the last memory reading (an exited process's numa_maps is empty, not "0 bytes").
  void Sample();
  // The samples so far, against the NIC's node (nullopt or negative: unknown).
  NumaSummary Summarize(const std::string& nic_device, std::optional<int> nic_node) const;

 private:
  std::filesystem::path procfs_;
  sys::CpuTopology topology_;
  uint32_t pid_;
  std::map<uint32_t, ThreadPlacement> threads_;
  uint64_t samples_ = 0;
  std::optional<sys::NumaMemory> memory_;
};

// host.numa_placement (doctor's id and runbook) from the sampled figures: kWarn when the share
// of thread samples, or of resident memory, off the NIC's node exceeds `off_node_ratio`
// (doctor's --doctor.remote-numa-ratio), with `numactl --cpunodebind=N --membind=N` as the fix;
// kOk below it. nullopt when nothing can be said (no NIC node, no thread sample).
std::optional<doctor::Finding> NumaPlacementAdvice(const NumaSummary& numa, uint32_t pid,
                                                   const std::string& comm,
                                                   const std::vector<std::string>& command,
                                                   double off_node_ratio);

}  // namespace rdmascope::profile
