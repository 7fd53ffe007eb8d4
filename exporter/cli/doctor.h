// `rdmascope doctor`'s flags and wiring: the report of a running exporter (doctor/query.h), of
// a fleet in Prometheus (doctor/fleet_report.h) or of this host, collected by the collectors
// `serve` runs (same flags, one code path reading the host; doctor/local_snapshot.h), printed
// in --format. docs/doctor.md.
#pragma once

#include <CLI/CLI.hpp>
#include <vector>

#include "cli/serve_config.h"
#include "doctor/options.h"
#include "doctor/report.h"

namespace rdmascope {

// Registers doctor's own flags (--window, --format, --fail-on, --doctor.*) on `doctor`.
void AddDoctorFlags(CLI::App& doctor, doctor::DoctorOptions& options);

// After parsing: checks what CLI11 cannot (the CQ ratios' order). Throws CLI::ValidationError.
void FinishDoctorOptions(const doctor::DoctorOptions& options);

// Text reports in colour: stdout is a terminal and NO_COLOR is unset.
bool DoctorColourWanted();

// Writes the report in --format to stdout (text: every skipped check in full with
// --show-skipped or `show_skipped`) and returns doctor's exit code for it.
int PrintDoctorReport(const std::vector<doctor::Finding>& findings,
                      const doctor::ReportContext& context, const doctor::DoctorOptions& options,
                      bool show_skipped);

// Returns the exit code: 0 ok/info, 1 warn (unless --fail-on=crit), 2 crit, 3 could not run.
int RunDoctor(const ServeConfig& config, const doctor::DoctorOptions& options);

}  // namespace rdmascope
