// Metric families every eBPF-backed collector reports under its own `probe` label, so that
// "is the probe set attached" is one family across collectors (RdmascopeProbeDetached).
#pragma once

#include "core/metric_set.h"

namespace rdmascope {

inline constexpr MetricDesc kProbeAttached{"rdmascope_probe_attached",
                                           "1 if the eBPF probe set is loaded and attached.",
                                           prometheus::MetricType::Gauge};
inline constexpr MetricDesc kProbeLinks{"rdmascope_probe_links",
                                        "Number of uprobes/tracepoints the probe set has attached.",
                                        prometheus::MetricType::Gauge};

}  // namespace rdmascope
