// `rdmascope doctor --replay CAPTURE [--replay CAPTURE ...]`: doctor's checks on hosts recorded
// by `rdmascope capture` (docs/capture.md), none of them this one. One capture gives that
// host's report, its counter rates between the capture's first and last sample; several give
// the fleet report `doctor --prometheus` makes (doctor/fleet_report.h): every host's findings
// with its name in their scope, and each host against its peers (doctor/fleet_drift.h) without
// a Prometheus: the support case "these 8 hosts, why is this one slow".
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "doctor/options.h"
#include "doctor/report.h"
#include "doctor/samples.h"

namespace rdmascope::doctor {

// One capture as the collectors replayed it.
struct ReplayedHost {
  std::string name;       // the capture's host name (a hash under --redact), unique in a report
  std::string generated;  // the last sample's time (RFC 3339)
  std::optional<Snapshot> before;  // the first sample, with --window other than 0s
  Snapshot now;                    // the last sample
  // Its index's redaction key id (capture_index.h); empty: not redacted.
  std::string redaction_key_id;
};

// Why the history checks skip on a capture: it holds samples, not an exporter's history.
inline constexpr const char* kNoHistoryInCapture =
    "a capture holds its samples, not the exporter's history (MR leaks, pinned-memory growth "
    "need `rdmascope serve`)";

// The report of `hosts` (at least one), in the order given.
ParsedReport ReportFromReplays(std::vector<ReplayedHost> hosts, const DoctorOptions& options);

}  // namespace rdmascope::doctor
