// The mr collector: RDMA memory registrations per process, from eBPF uprobes on libibverbs
// (probes/mr.bpf.c). Without BPF it still reports rdmascope_probe_attached{probe="mr"} 0 and
// the reason, and the rest of the exporter works. Under `capture` it runs as live and records
// each collection's reading of the probes (bpf/mr.json); under `--replay` it attaches nothing
// and maps that reading (collectors/probe_capture.h).
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "bpf/mr_probe.h"
#include "collectors/mr_restrack.h"
#include "collectors/mr_snapshot_json.h"
#include "collectors/pinned_memory.h"
#include "core/collector.h"
#include "sys/symbolizer.h"

namespace rdmascope {

void MapMrSnapshot(const MrSnapshot& snapshot, MetricSet& out, bool by_comm = false);
// The `flag` label of IBV_ACCESS_* bit `bit`: "LOCAL_WRITE"... for verbs.h's, else "BIT_n".
std::string AccessFlagName(int bit);
void MapPinned(const std::vector<PinnedProcess>& processes, MetricSet& out, bool by_comm = false);
void MapHostMemory(std::optional<uint64_t> total_bytes, MetricSet& out);

// Sums processes that share a comm (pid 0 in the result), plus the counters of exited
// processes of that comm so that the aggregated counters never go down.
std::vector<MrProcess> AggregateByComm(const std::vector<MrProcess>& processes,
                                       const std::map<std::string, MrProcess>& retired = {});

// One collection's series from the probes' reading, the processes' pinned memory and the
// host's: what Collect adds, live or replayed.
CollectResult MapMrReading(const MrProbeReading& reading, const std::vector<PinnedProcess>& pinned,
                           std::optional<uint64_t> host_memory, bool by_comm, MetricSet& out);

class MrCollector : public Collector {
 public:
  // `restrack` lists the MRs that exist before the probes attach (mr_restrack.h); null for
  // the kernel's own (RDMA netlink), which is read only in the host's initial pid namespace,
  // where its pids are the probes' pids.
  MrCollector(const MrProbeOptions& options, std::filesystem::path procfs,
              const std::filesystem::path& sysfs,
              std::unique_ptr<ResourceSource> restrack = nullptr);
  CollectResult Collect(MetricSet& out) const override;
  void AddDebugRoutes(DebugRoutes& routes) override;
  std::string ProbeError() const override { return attach_error_; }

  // JSON for /debug/mr/stacks; query: pid=N, top=N (default 5, at most 100). Bounded by
  // `limits` (regions walked, time) and kMaxStackFrames; says "truncated" when a bound cut it.
  // Formats what the stack thread symbolized: no ELF or DWARF is read on the HTTP thread.
  std::string StacksJson(std::string_view query) const;
  // Forwards to MrProbe::SetExitObserver (nothing happens without the probes).
  void SetExitObserver(std::function<void(const MrProcess& last)> observer) {
    if (probe_) probe_->SetExitObserver(std::move(observer));
  }
  // Who runs each process (the workload collector's Describe): /debug/mr/stacks names the
  // pod, Slurm job or unit that holds the leak beside its pid.
  using WorkloadSource = std::function<std::vector<std::pair<std::string, std::string>>(uint32_t)>;
  void SetWorkloadSource(WorkloadSource source) { workload_source_ = std::move(source); }
  static constexpr size_t kMaxStackFrames = 4096;

 private:
  std::optional<uint64_t> ReadHostMemory() const;
  // The probes' snapshot (seeded from restrack), written into the sample when recording.
  MrProbeReading LiveReading() const;
  // The capture's bpf/mr.json of the sample replayed now; throws naming the file else.
  MrProbeReading ReplayedReading() const;

  std::unique_ptr<MrProbe> probe_;
  std::unique_ptr<MrSeedTracker> seed_;  // regions registered before the probes attached
  std::unique_ptr<UverbsHolders> pinned_;
  std::string attach_error_;
  WorkloadSource workload_source_;
  MrStacksLimits stacks_limits_;
  std::filesystem::path procfs_;
  bool by_comm_ = false;
  bool replay_ = false;  // built under --replay: no probe, the capture answers
};

}  // namespace rdmascope
