// `rdmascope doctor --replay CAPTURE [--replay CAPTURE ...]`: each capture replayed through the
// collectors `serve` runs, one after the other (the process's host boundary is one capture at a
// time), every sample in order as a replaying `serve` would scrape them; the first and the last
// become that host's snapshots, stamped with their samples' times, for doctor/replay_report.h.
#pragma once

#include "cli/serve_config.h"
#include "doctor/options.h"
#include "doctor/report.h"

namespace rdmascope {

// Throws std::runtime_error naming the capture and what is wrong with it.
doctor::ParsedReport ReportFromCaptures(const ServeConfig& config,
                                        const doctor::DoctorOptions& options);

}  // namespace rdmascope
