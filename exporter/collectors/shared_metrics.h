// Metric families more than one collector reports: defined once, so that their help text and
// type cannot drift apart (the runner merges a family several collectors fill, and keeps the
// first collector's copy of a series both report).
#pragma once

#include "core/metric_set.h"

namespace rdmascope {

// Every eBPF-backed collector, under its own `probe` label (RdmascopeProbeDetached).
inline constexpr MetricDesc kProbeAttached{"rdmascope_probe_attached",
                                           "1 if the eBPF probe set is loaded and attached.",
                                           prometheus::MetricType::Gauge};
inline constexpr MetricDesc kProbeLinks{"rdmascope_probe_links",
                                        "Number of uprobes/tracepoints the probe set has attached.",
                                        prometheus::MetricType::Gauge};

// Queue sizes, known to the verbs probes and to the preload library alike.
inline constexpr MetricDesc kCqCapacity{
    "rdma_cq_capacity_entries",
    "Completion queue capacity (actual cqe, after rounding by the provider and ibv_resize_cq).",
    prometheus::MetricType::Gauge};
inline constexpr MetricDesc kSrqMax{"rdma_srq_max_wrs", "Shared receive queue depth.",
                                    prometheus::MetricType::Gauge};
inline constexpr MetricDesc kSrqLimit{"rdma_srq_limit_wrs",
                                      "SRQ limit armed with ibv_modify_srq (0: not armed; the "
                                      "device disarms it when SRQ_LIMIT_REACHED fires).",
                                      prometheus::MetricType::Gauge};

}  // namespace rdmascope
