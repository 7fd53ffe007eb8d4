// The preload library's stats file (preload/stats_file.h) as the occupancy collector reads it
// from --occupancy.dir (collectors/occupancy ParseOccupancyFile), then mapped to metrics: the
// file is written by the application's process, so every byte of it is outside input.
#include "collectors/occupancy.h"
#include "core/metric_set.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto process = rdmascope::ParseOccupancyFile({data, size});
  if (!process) return 0;
  rdmascope::MetricSet metrics;
  rdmascope::MapOccupancy({*process}, metrics);
  metrics.Take();
  return 0;
}
