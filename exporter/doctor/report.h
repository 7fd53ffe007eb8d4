// Doctor's output: text for a person (grouped by area, worst first, colour on a terminal only)
// or JSON for a fleet tool (docs/doctor.md), on stdout; logs go to stderr. The exit code
// follows the Nagios convention.
#pragma once

#include <expected>
#include <map>
#include <string>
#include <vector>

#include "doctor/finding.h"
#include "doctor/options.h"

namespace rdmascope::doctor {

// What counter rates were judged over (JSON window_kind): a window observed live (doctor's
// --window, /doctor?window=D), the exporter's last --doctor.lookback, everything since the
// exporter started (younger than its lookback), between a capture's first and last sample
// (`doctor --replay`), or nothing (a window of 0).
inline constexpr const char* kWindowLive = "live";
inline constexpr const char* kWindowLookback = "lookback";
inline constexpr const char* kWindowSinceStart = "since_start";
inline constexpr const char* kWindowCapture = "capture";
inline constexpr const char* kWindowNone = "none";

// One query a fleet report was built from (doctor --prometheus), as the report lists it.
struct ReportQuery {
  std::string promql;
  std::string time;   // RFC 3339: the evaluation time, or a range's end
  std::string start;  // a range query's start; empty for an instant query
  double step_seconds = 0;
  size_t series = 0;  // series (of a range: first points) read from the answer
  size_t bytes = 0;   // the answer's JSON, decoded
  double seconds = 0;
};

struct ReportContext {
  std::string host;
  std::string generated;  // RFC 3339 UTC
  double window_seconds = 0;
  // One of the kWindow* above; empty in a report of an exporter older than the field.
  std::string window_kind;
  // A fleet report's: the hosts, the queries, and the ok findings counted per check rather
  // than listed (CountOk; --show-ok lists them). Empty for one host.
  size_t instances = 0;
  std::vector<ReportQuery> queries;
  std::map<std::string, size_t> ok_by_check;
  // Fixes are another host's (a report read from `doctor --exporter`, a fleet report): shown
  // for reading, never to paste here as they are. Text prints each as a shell comment naming
  // where it applies, HTML says so, JSON adds "fixes_display_only": true.
  bool fixes_display_only = false;
  // What the sources said was incomplete (Prometheus' `warnings`: a Thanos or Mimir partial
  // answer), or a part of the report that could not be made (history checks without @). What
  // they touch is "could not judge" in the findings; these say why.
  std::vector<std::string> warnings;
};

// Moves the ok findings out of `findings` into context.ok_by_check (check id -> how many): at
// 1,000 hosts they are two thirds of the report and say only "fine".
void CountOk(std::vector<Finding>& findings, ReportContext& context);

inline constexpr int kExitCannotRun = 3;  // Nagios UNKNOWN: doctor itself could not run

// Findings in report order: by area (links, roce, queues, memory, host), then crit, warn,
// info, ok, skip, then id; stable otherwise (collection order). JSON keeps this order; text
// and HTML print the areas worst first (an area's worst finding, then the areas' order) and
// fold the skipped checks into one line or block at the end.
void SortFindings(std::vector<Finding>& findings);

std::string RenderJson(const std::vector<Finding>& findings, const ReportContext& context);
// A document RenderJson made (schema_version 1), read back: what `doctor --exporter` gets from
// /doctor. The error says what is wrong with it (not JSON, another schema, a missing field).
struct ParsedReport {
  std::vector<Finding> findings;
  ReportContext context;
};
std::expected<ParsedReport, std::string> ParseJson(const std::string& text);

// Skipped findings are summarised in one line of check ids unless `show_skipped`.
// The report as an HTML page (what /doctor answers a browser): a table of findings per area,
// each check linked to its runbook section, every string escaped.
std::string RenderHtml(const std::vector<Finding>& findings, const ReportContext& context);
std::string RenderText(const std::vector<Finding>& findings, const ReportContext& context,
                       bool colour, bool show_skipped = false);

// 0 ok/info (and skip), 1 warn (0 with --fail-on=crit), 2 crit.
int ExitCode(const std::vector<Finding>& findings, const DoctorOptions& options);

}  // namespace rdmascope::doctor
