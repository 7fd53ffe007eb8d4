// The verbs collector's eBPF side as a capture keeps it (docs/capture.md "eBPF probes"):
// samples/NNNN/bpf/verbs.json holds whether the probes attached (or why not) and the
// VerbsProbe::Snapshot the collector mapped that collection, so that a replay maps the same
// without loading BPF.
#pragma once

#include <cstdint>
#include <expected>
#include <string>
#include <string_view>

#include "bpf/verbs_probe.h"

namespace rdmascope {

struct VerbsProbeReading {
  bool attached = false;
  std::string error;  // why they are not attached
  uint64_t links = 0;
  VerbsSnapshot snapshot;  // when attached (its walk_error included)
};

inline constexpr std::string_view kVerbsCaptureFile = "bpf/verbs.json";

std::string VerbsReadingToJson(const VerbsProbeReading& reading);
// Hostile input: bounded, every value checked (probe_json.h); a message naming the field else.
std::expected<VerbsProbeReading, std::string> VerbsReadingFromJson(std::string_view text);

}  // namespace rdmascope
