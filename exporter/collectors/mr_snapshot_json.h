// The mr collector's eBPF side as a capture keeps it (docs/capture.md "eBPF probes"):
// samples/NNNN/bpf/mr.json holds whether the probes attached (or why not) and the snapshot the
// collector mapped that collection (MrProbe::Snapshot with the regions seeded from restrack
// added), so that a replay maps the same without loading BPF.
#pragma once

#include <cstdint>
#include <expected>
#include <string>
#include <string_view>

#include "bpf/mr_probe.h"

namespace rdmascope {

// One collection's reading of the MR probes.
struct MrProbeReading {
  bool attached = false;
  std::string error;         // why they are not attached
  std::string failed;        // the collection failed (a restrack dump refused): its message
  bool kernel_path = false;  // fentry/fexit, not uprobes
  uint64_t links = 0;
  uint64_t seeded_regions = 0;  // regions from before the start, in `snapshot`
  MrSnapshot snapshot;          // when attached and not failed
};

// "bpf/mr.json"
inline constexpr std::string_view kMrCaptureFile = "bpf/mr.json";

std::string MrReadingToJson(const MrProbeReading& reading);
// Hostile input: bounded, every value checked (probe_json.h); a message naming the field else.
std::expected<MrProbeReading, std::string> MrReadingFromJson(std::string_view text);

}  // namespace rdmascope
