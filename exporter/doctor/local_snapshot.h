// doctor on this host: the collectors `serve` runs, read into the snapshots the checks judge.
// `doctor` (one run, or two --window apart) and serve's /doctor (doctor/service.h) share it.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/collector_runner.h"
#include "doctor/options.h"
#include "doctor/report.h"
#include "doctor/samples.h"

namespace rdmascope::doctor {

// Seconds of the monotonic clock: what snapshots are stamped with.
double MonotonicSeconds();

// This host's name, "unknown" when it has none.
std::string HostName();

// Now, RFC 3339 UTC to the second: a report's `generated`.
std::string NowRfc3339();

// Why each collector's eBPF probes did not attach (absent: attached, or none), by name.
std::map<std::string, std::string> ProbeErrors(const std::vector<NamedCollector>& collectors);

// One run of every collector, with each one's outcome, stamped now (MonotonicSeconds).
Snapshot CollectSnapshot(const CollectorRunner& runner,
                         const std::map<std::string, std::string>& probe_errors);
// The same stamped `seconds`: a capture's sample, at the time its index gives.
Snapshot CollectSnapshot(const CollectorRunner& runner,
                         const std::map<std::string, std::string>& probe_errors, double seconds);
// What one collection of `runner` gave (`families`), with each collector's outcome then.
Snapshot SnapshotOf(const CollectorRunner& runner,
                    const std::vector<prometheus::MetricFamily>& families,
                    const std::map<std::string, std::string>& probe_errors, double seconds);

// The report of this host: one collection, or two `options.window_ns` apart (counter rates),
// every check over it, sorted.
ParsedReport ReportHere(const CollectorRunner& runner,
                        const std::map<std::string, std::string>& probe_errors,
                        const DoctorOptions& options);

}  // namespace rdmascope::doctor
