// The capability broker's own series (sys/capability_broker.h): whether it answers, what it
// was asked, and the confinement it entered. Added to /metrics by the collector runner, not by
// a collector: the broker serves several of them (mr, occupancy).
#pragma once

#include "core/metric_set.h"
#include "sys/capability_broker.h"

namespace rdmascope {

// `broker`: null when it was configured but could not start (up 0, nothing else).
void AddCapabilityBrokerMetrics(const sys::CapabilityBroker* broker, MetricSet& out);

}  // namespace rdmascope
