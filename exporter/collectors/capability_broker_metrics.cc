#include "collectors/capability_broker_metrics.h"

namespace rdmascope {
namespace {

using prometheus::MetricType;

constexpr MetricDesc kUp{"rdmascope_capability_broker_up",
                         "Whether the capability broker answers (1), or could not start or "
                         "stopped (0): then no other user's process is read (maps, namespaces, "
                         "uverbs descriptors, ELF files; docs/security.md).",
                         MetricType::Gauge};
constexpr MetricDesc kRequests{"rdmascope_capability_broker_requests_total",
                               "Questions asked of the capability broker, by request.",
                               MetricType::Counter};
constexpr MetricDesc kFailures{"rdmascope_capability_broker_failures_total",
                               "Questions the capability broker did not answer (it was gone, "
                               "overran its deadline or broke the protocol).",
                               MetricType::Counter};
constexpr MetricDesc kConfinement{
    "rdmascope_capability_broker_confinement",
    "Layers of the capability broker's confinement, 1 entered, 0 refused by the host (uid, "
    "capabilities, no_new_privs, dumpable, rlimits, seccomp; docs/security.md).",
    MetricType::Gauge};

}  // namespace

void AddCapabilityBrokerMetrics(const sys::CapabilityBroker* broker, MetricSet& out) {
  if (broker == nullptr) {
    out.Add(kUp, {}, 0);
    return;
  }
  const sys::CapabilityBrokerStats stats = broker->stats();
  out.Add(kUp, {}, stats.up ? 1 : 0);
  for (const char* request :
       {"maps", "open_mapping", "open_in_root", "namespaces", "uverbs_holders"}) {
    const auto it = stats.requests.find(request);
    out.Add(kRequests, {{"request", request}},
            it == stats.requests.end() ? 0.0 : static_cast<double>(it->second));
  }
  out.Add(kFailures, {}, static_cast<double>(stats.failed));
  for (const auto& [layer, entered] : broker->confinement()) {
    out.Add(kConfinement, {{"layer", layer}}, entered ? 1 : 0);
  }
}

}  // namespace rdmascope
