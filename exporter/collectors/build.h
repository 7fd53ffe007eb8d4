// The enabled collectors, constructed as `serve` runs them (probes attached, counters opened);
// `check`, `doctor` and `profile` build the same ones from the same flags.
#pragma once

#include <vector>

#include "collectors/config.h"
#include "core/collector_runner.h"

namespace rdmascope {

// The collectors `config` enables, in the registry's order (collectors/registry.h), wired to
// each other where one names what another knows (/debug/mr/stacks names each process's
// workload). Throws when --probe.strict and a probe set did not attach.
std::vector<NamedCollector> BuildCollectors(const CollectorsConfig& config);

}  // namespace rdmascope
