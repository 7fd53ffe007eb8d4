#include "sys/cpu_topology.h"

#include "core/sysfs.h"
#include "sys/pmu_sysfs.h"

namespace rdmascope::sys {

int CpuTopology::NodeOf(int cpu) const {
  const auto it = node_of_cpu.find(cpu);
  return it == node_of_cpu.end() ? 0 : it->second;
}

int CpuTopology::SocketOf(int cpu) const {
  const auto it = socket_of_cpu.find(cpu);
  return it == socket_of_cpu.end() ? 0 : it->second;
}

CpuTopology ReadCpuTopology(const std::filesystem::path& sysfs) {
  CpuTopology topology;
  const auto system = sysfs / "devices" / "system";
  if (const auto online = sysfs::ReadAttribute(system / "cpu" / "online")) {
    topology.online = ParseCpuList(*online);
  }
  for (const std::string& entry : sysfs::ListDirectory(system / "node")) {
    if (!entry.starts_with("node")) continue;
    const auto node = sysfs::ParseUnsigned(std::string_view(entry).substr(4));
    const auto cpulist = sysfs::ReadAttribute(system / "node" / entry / "cpulist");
    if (!node || !cpulist) continue;
    for (const int cpu : ParseCpuList(*cpulist))
      topology.node_of_cpu[cpu] = static_cast<int>(*node);
  }
  for (const int cpu : topology.online) {
    const auto package = sysfs::ReadSigned(system / "cpu" / ("cpu" + std::to_string(cpu)) /
                                           "topology" / "physical_package_id");
    if (package && *package >= 0) topology.socket_of_cpu[cpu] = static_cast<int>(*package);
  }
  return topology;
}

}  // namespace rdmascope::sys
