// The explicit list of collectors. Adding a collector is one entry here; its
// --collector.NAME / --no-collector.NAME flags and landing-page row derive from it.
// (An explicit list, not static-initialiser self-registration, which static libraries drop.)
#pragma once

#include <memory>
#include <span>
#include <string_view>

#include "collectors/config.h"
#include "core/collector.h"

namespace rdmascope {

struct CollectorEntry {
  std::string_view name;
  std::string_view help;
  bool enabled_by_default;
  std::unique_ptr<Collector> (*create)(const CollectorsConfig& config);
};

std::span<const CollectorEntry> AllCollectors();

}  // namespace rdmascope
