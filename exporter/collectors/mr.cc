#include "collectors/mr.h"

#include "core/log.h"

namespace rdmascope {
namespace {

using prometheus::MetricType;

constexpr MetricDesc kAttached{"rdmascope_probe_attached",
                               "1 if the eBPF probe set is loaded and attached.",
                               MetricType::Gauge};
constexpr MetricDesc kLinks{"rdmascope_probe_links",
                            "Number of uprobes/tracepoints the probe set has attached.",
                            MetricType::Gauge};
constexpr MetricDesc kRegions{"rdma_mr_outstanding_regions",
                              "Memory regions registered and not yet deregistered.",
                              MetricType::Gauge};
constexpr MetricDesc kBytes{"rdma_mr_outstanding_bytes",
                            "Bytes of the memory regions registered and not yet deregistered.",
                            MetricType::Gauge};
constexpr MetricDesc kRegistrations{"rdma_mr_registrations_total",
                                    "Successful memory registrations (ibv_reg_mr and variants).",
                                    MetricType::Counter};
constexpr MetricDesc kDeregistrations{"rdma_mr_deregistrations_total",
                                      "Successful ibv_dereg_mr calls on tracked regions.",
                                      MetricType::Counter};
constexpr MetricDesc kFailures{"rdma_mr_registration_failures_total",
                               "Registration calls that returned no region.", MetricType::Counter};
constexpr MetricDesc kReleasedRegions{"rdma_mr_exit_released_regions_total",
                                      "Regions still registered when their process exited "
                                      "(released by the kernel at exit), by command.",
                                      MetricType::Counter};
constexpr MetricDesc kReleasedBytes{"rdma_mr_exit_released_bytes_total",
                                    "Bytes of the regions still registered at process exit.",
                                    MetricType::Counter};
constexpr MetricDesc kLost{"rdma_mr_lost_total",
                           "Events not tracked because a BPF map or buffer was full, by reason "
                           "(regions: --mr.max-regions; processes: --mr.max-processes).",
                           MetricType::Counter};

}  // namespace

void MapMrSnapshot(const MrSnapshot& snapshot, MetricSet& out) {
  uint64_t lost_regions = 0;
  for (const MrProcess& proc : snapshot.processes) {
    const std::string pid = std::to_string(proc.pid);
    const std::initializer_list<Label> labels{{"pid", pid}, {"comm", proc.comm}};
    out.Add(kRegions, labels, static_cast<double>(proc.outstanding_regions));
    out.Add(kBytes, labels, static_cast<double>(proc.outstanding_bytes));
    out.Add(kRegistrations, labels, static_cast<double>(proc.registrations));
    out.Add(kDeregistrations, labels, static_cast<double>(proc.deregistrations));
    out.Add(kFailures, labels, static_cast<double>(proc.failures));
    lost_regions += proc.lost_regions;
  }
  for (const auto& [comm, released] : snapshot.released) {
    out.Add(kReleasedRegions, {{"comm", comm}}, static_cast<double>(released.regions));
    out.Add(kReleasedBytes, {{"comm", comm}}, static_cast<double>(released.bytes));
  }
  out.Add(kLost, {{"reason", "regions"}}, static_cast<double>(lost_regions));
  out.Add(kLost, {{"reason", "processes"}}, static_cast<double>(snapshot.lost_processes));
  out.Add(kLost, {{"reason", "calls"}}, static_cast<double>(snapshot.lost_calls));
  out.Add(kLost, {{"reason", "exit_events"}}, static_cast<double>(snapshot.lost_exits));
}

MrCollector::MrCollector(const MrProbeOptions& options, std::filesystem::path procfs) {
  auto probe = MrProbe::Attach(options, std::move(procfs));
  if (probe) {
    probe_ = std::move(*probe);
  } else {
    attach_error_ = probe.error();
    log::Warn("mr probes not attached; memory-registration metrics are absent",
              {{"err", attach_error_}});
  }
}

CollectResult MrCollector::Collect(MetricSet& out) const {
  out.Add(kAttached, {{"probe", "mr"}}, probe_ ? 1 : 0);
  if (!probe_) return {.no_data = true, .detail = "eBPF probes not attached: " + attach_error_};
  out.Add(kLinks, {{"probe", "mr"}}, static_cast<double>(probe_->link_count()));
  const MrSnapshot snapshot = probe_->Snapshot();
  MapMrSnapshot(snapshot, out);
  return {.detail = std::to_string(snapshot.processes.size()) + " processes with registrations"};
}

}  // namespace rdmascope
