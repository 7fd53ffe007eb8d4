#include "collectors/build.h"

#include <stdexcept>
#include <string>

#include "collectors/mr.h"
#include "collectors/registry.h"
#include "collectors/workload.h"
#include "core/log.h"

namespace rdmascope {

// The enabled collectors, constructed (probes attached, counters opened). With
// --probe.strict, a probe set that could not attach is fatal.
std::vector<NamedCollector> BuildCollectors(const CollectorsConfig& config) {
  std::vector<NamedCollector> collectors;
  for (const CollectorEntry& entry : AllCollectors()) {
    const std::string name(entry.name);
    const bool enabled = config.collector_enabled.at(name);
    log::Info("collector", {{"name", name}, {"enabled", enabled ? "true" : "false"}});
    if (!enabled) continue;
    auto collector = entry.create(config);
    if (const std::string error = collector->ProbeError(); config.probe_strict && !error.empty()) {
      throw std::runtime_error("--probe.strict: the " + name + " probes did not attach: " + error);
    }
    collectors.push_back({name, std::move(collector)});
  }
  // /debug/mr/stacks names each process's workload as rdma_process_workload_info does.
  const WorkloadCollector* workload = nullptr;
  for (const NamedCollector& entry : collectors) {
    if (const auto* found = dynamic_cast<const WorkloadCollector*>(entry.collector.get())) {
      workload = found;
    }
  }
  for (NamedCollector& entry : collectors) {
    if (auto* mr = dynamic_cast<MrCollector*>(entry.collector.get()); mr && workload) {
      mr->SetWorkloadSource([workload](uint32_t pid) { return workload->Describe(pid); });
    }
  }
  return collectors;
}

}  // namespace rdmascope
