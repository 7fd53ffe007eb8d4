// --collector.perf.event values, one per line: "name" or "{a,b,c}" groups with "pmu/terms/" inside
// (sys/perf_events ParseEventGroups), and the first names resolved (sysfs PMU events against
// the Skylake-SP fixture tree's PMUs, anything else through libpfm4).
#include "fuzz_input.h"
#include "fuzz_tree.h"
#include "sys/perf_events.h"
#include "sys/pmu_libpfm.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::filesystem::path sysfs = rdmascope::fuzz::FixtureTree("sysfs/pmu_skx.tree");
  // As the perf collector does for its list: libpfm4 loaded and initialised once, not dlopen +
  // pfm_initialize + dlclose for every name (that was 79% of this target's time, 467 exec/s).
  static const rdmascope::sys::LibpfmScope libpfm;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto groups = rdmascope::sys::ParseEventGroups(rdmascope::fuzz::Lines(text));
  if (!groups) return 0;
  size_t resolved = 0;
  for (const auto& group : *groups) {
    for (const auto& name : group) {
      if (++resolved > 4) return 0;  // a few names are enough
      rdmascope::sys::ResolvePerfEvent(sysfs, name);
    }
  }
  return 0;
}
