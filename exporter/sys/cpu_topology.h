// Which CPUs are online and where they sit: NUMA node and socket, from
// <sysfs>/devices/system/{cpu,node}. A host without NUMA nodes in sysfs is one node, 0.
#pragma once

#include <filesystem>
#include <map>
#include <vector>

namespace rdmascope::sys {

struct CpuTopology {
  std::vector<int> online;
  std::map<int, int> node_of_cpu;
  std::map<int, int> socket_of_cpu;
  int NodeOf(int cpu) const;
  int SocketOf(int cpu) const;
};

CpuTopology ReadCpuTopology(const std::filesystem::path& sysfs);

}  // namespace rdmascope::sys
