// PMU descriptions and event specs (sys/pmu_sysfs): format/<term> lines ("config:0-7,32-35"),
// events/<name> definitions ("event=0x04,umask=0x03"), their .scale, and "pmu/terms/" specs.
// Lines of the input: a spec; the text of events/fuzz, events/fuzz.scale and format/term of a
// "fuzz" PMU added to the Skylake-SP fixture tree; a format line scattered a value into.
// The tree is served from memory through ResolvePmuEvent's PmuFiles seam: writing the three
// files on every input held this target to a few hundred inputs a second.
#include <cmath>
#include <cstdlib>

#include "fuzz_input.h"
#include "fuzz_tree.h"
#include "sys/pmu_sysfs.h"

using namespace rdmascope;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::filesystem::path sysfs = "/fuzz-sysfs";
  static const std::filesystem::path pmu = sysfs / "bus/event_source/devices/fuzz";
  static auto files = [] {
    auto tree = fuzz::FixtureFiles("sysfs/pmu_skx.tree", sysfs);
    tree[(pmu / "type").string()] = "7\n";
    return tree;
  }();
  static const std::string event_file = (pmu / "events/fuzz").string();
  static const std::string scale_file = (pmu / "events/fuzz.scale").string();
  static const std::string term_file = (pmu / "format/term").string();
  fuzz::Input input(data, size);
  const uint64_t value = input.U64();
  auto lines = fuzz::Lines(input.RestText());
  lines.resize(5);
  files[event_file] = lines[1];
  files[scale_file] = lines[2];
  files[term_file] = lines[3];
  const sys::PmuFiles read = [](const std::filesystem::path& path) -> std::optional<std::string> {
    // As the kernel's tree resolves "format/../events/fuzz" (no links in the fixture).
    const auto file = files.find(path.lexically_normal().string());
    if (file == files.end()) return std::nullopt;
    return fuzz::AttributeText(file->second);
  };
  if (const auto event = sys::ResolvePmuEvent(sysfs, lines[0], read)) {
    // A scale is positive and finite or the default 1 (never a made-up 0 or NaN).
    if (!(event->scale > 0) || !std::isfinite(event->scale)) std::abort();
  }
  if (const auto format = sys::ParsePmuFormat(lines[4])) {
    uint64_t config[3] = {0, 0, 0};
    sys::ApplyPmuFormat(*format, value, config);
  }
  return 0;
}
