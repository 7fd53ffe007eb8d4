// --collector.perf.event values, one per line: "name" or "{a,b,c}" groups with "pmu/terms/" inside
// (sys/perf_events ParseEventGroups), and the first names resolved (sysfs PMU events against
// the Skylake-SP fixture tree's PMUs, anything else through libpfm4).
#include "fuzz_input.h"
#include "fuzz_tree.h"
#include "sys/perf_events.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::filesystem::path sysfs = rdmascope::fuzz::FixtureTree("sysfs/pmu_skx.tree");
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto groups = rdmascope::sys::ParseEventGroups(rdmascope::fuzz::Lines(text));
  if (!groups) return 0;
  size_t resolved = 0;
  for (const auto& group : *groups) {
    for (const auto& name : group) {
      if (++resolved > 4) return 0;  // libpfm4's lookups are slow: a few names are enough
      rdmascope::sys::ResolvePerfEvent(sysfs, name);
    }
  }
  return 0;
}
