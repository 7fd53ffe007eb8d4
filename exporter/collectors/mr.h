// The mr collector: RDMA memory registrations per process, from eBPF uprobes on libibverbs
// (probes/mr.bpf.c). Without BPF it still reports rdmascope_probe_attached{probe="mr"} 0 and
// the reason, and the rest of the exporter works.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "bpf/mr_probe.h"
#include "collectors/pinned_memory.h"
#include "core/collector.h"
#include "sys/symbolizer.h"

namespace rdmascope {

void MapMrSnapshot(const MrSnapshot& snapshot, MetricSet& out);
void MapPinned(const std::vector<PinnedProcess>& processes, MetricSet& out);

class MrCollector : public Collector {
 public:
  MrCollector(const MrProbeOptions& options, std::filesystem::path procfs);
  CollectResult Collect(MetricSet& out) const override;
  void AddDebugRoutes(DebugRoutes& routes) override;

  // JSON for /debug/mr/stacks; query: pid=N, top=N (default 5).
  std::string StacksJson(std::string_view query) const;

 private:
  std::unique_ptr<MrProbe> probe_;
  std::unique_ptr<UverbsHolders> pinned_;
  std::unique_ptr<sys::Symbolizer> symbolizer_ = std::make_unique<sys::Symbolizer>();
  std::string attach_error_;
};

}  // namespace rdmascope
