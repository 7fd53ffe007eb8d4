// PMU descriptions and event specs (sys/pmu_sysfs): format/<term> lines ("config:0-7,32-35"),
// events/<name> definitions ("event=0x04,umask=0x03"), their .scale, and "pmu/terms/" specs.
// Lines of the input: a spec; the text of events/fuzz, events/fuzz.scale and format/term of a
// "fuzz" PMU added to the Skylake-SP fixture tree; a format line scattered a value into.
#include <cmath>
#include <cstdlib>

#include "fuzz_input.h"
#include "fuzz_tree.h"
#include "sys/pmu_sysfs.h"

using namespace rdmascope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::filesystem::path sysfs = fuzz::FixtureTree("sysfs/pmu_skx.tree");
  static const std::filesystem::path pmu = sysfs / "bus/event_source/devices/fuzz";
  fuzz::Input input(data, size);
  const uint64_t value = input.U64();
  auto lines = fuzz::Lines(input.RestText());
  lines.resize(5);
  fuzz::WriteFile(pmu / "type", "7\n");
  fuzz::WriteFile(pmu / "events/fuzz", lines[1]);
  fuzz::WriteFile(pmu / "events/fuzz.scale", lines[2]);
  fuzz::WriteFile(pmu / "format/term", lines[3]);
  if (const auto event = sys::ResolvePmuEvent(sysfs, lines[0])) {
    // A scale is positive and finite or the default 1 (never a made-up 0 or NaN).
    if (!(event->scale > 0) || !std::isfinite(event->scale)) std::abort();
  }
  if (const auto format = sys::ParsePmuFormat(lines[4])) {
    uint64_t config[3] = {0, 0, 0};
    sys::ApplyPmuFormat(*format, value, config);
  }
  return 0;
}
