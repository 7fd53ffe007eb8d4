// The verbs collector: completion and shared receive queues per process and the asynchronous
// events applications receive, from eBPF uprobes on the libibverbs control path
// (probes/verbs.bpf.c). Per CQ its capacity and the depth of the queues completing into it,
// so that rules can test "CQ entries >= 1.5-2x the summed depth feeding it"; per SRQ its depth
// and limit. Without BPF: rdmascope_probe_attached{probe="verbs"} 0 and the reason. Under
// `capture` it runs as live and records each collection's reading of the probes
// (bpf/verbs.json); under `--replay` it attaches nothing and maps that reading.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "bpf/verbs_probe.h"
#include "collectors/verbs_snapshot_json.h"
#include "core/collector.h"

namespace rdmascope {

struct VerbsOptions {
  VerbsProbeOptions probe;
  // Per-queue series exported at most (CQs first, the worst-sized first, then SRQs); the
  // rest are counted in rdmascope_verbs_queues_omitted.
  size_t max_queue_series = 1000;
};

// enum ibv_event_type names without the IBV_EVENT_ prefix ("SRQ_LIMIT_REACHED").
std::string AsyncEventName(size_t type);
// enum ibv_qp_type names without the IBV_QPT_ prefix ("RC", "UD", "XRC_SEND"), "TYPE_<n>" else.
std::string QpTypeName(uint32_t type);

void MapVerbsSnapshot(const VerbsSnapshot& snapshot, size_t max_queue_series, MetricSet& out);
// What Collect adds from one reading, live or replayed.
CollectResult MapVerbsReading(const VerbsProbeReading& reading, size_t max_queue_series,
                              MetricSet& out);

class VerbsCollector : public Collector {
 public:
  VerbsCollector(const VerbsOptions& options, std::filesystem::path procfs);
  CollectResult Collect(MetricSet& out) const override;
  std::string ProbeError() const override { return attach_error_; }
  // The QPs of `pid` the probes saw created, with their capacities (`rdmascope profile`);
  // empty without the probes.
  std::vector<VerbsQp> Qps(uint32_t pid) const;

 private:
  // The probes' snapshot, written into the sample when recording.
  VerbsProbeReading LiveReading() const;
  // The capture's bpf/verbs.json of the sample replayed now; throws naming the file else.
  static VerbsProbeReading ReplayedReading();

  std::unique_ptr<VerbsProbe> probe_;
  std::string attach_error_;
  size_t max_queue_series_;
  bool replay_ = false;  // built under --replay: no probe, the capture answers
};

}  // namespace rdmascope
