#include "doctor/replay_report.h"

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

#include "doctor/checks.h"
#include "doctor/fleet_drift.h"

namespace rdmascope::doctor {
namespace {

double WindowOf(const ReplayedHost& host) {
  return host.before ? host.now.seconds() - host.before->seconds() : 0;
}

}  // namespace

ParsedReport ReportFromReplays(std::vector<ReplayedHost> hosts, const DoctorOptions& options) {
  if (hosts.empty()) throw std::invalid_argument("doctor --replay: no capture");
  for (ReplayedHost& host : hosts) {
    host.now.set_no_history_reason(kNoHistoryInCapture);
  }
  ParsedReport report;
  if (hosts.size() == 1) {
    const ReplayedHost& host = hosts.front();
    report.findings = RunChecks(host.now, host.before ? &*host.before : nullptr, options);
    SortFindings(report.findings);
    report.context = {.host = host.name,
                      .generated = host.generated,
                      .window_seconds = WindowOf(host),
                      .window_kind = host.before ? kWindowCapture : kWindowNone};
    // The capture's host is not this one: its fixes are to read, not to paste here.
    report.context.fixes_display_only = true;
    return report;
  }
  std::map<std::string, Snapshot> now, before;
  double window = 0;
  std::string generated;
  std::set<std::string> keys;
  for (ReplayedHost& host : hosts) {
    keys.insert(host.redaction_key_id);
    for (Finding& finding : RunChecks(host.now, host.before ? &*host.before : nullptr, options)) {
      finding.scope.insert(finding.scope.begin(), {"instance", host.name});
      report.findings.push_back(std::move(finding));
    }
    window = std::max(window, WindowOf(host));
    generated = std::max(generated, host.generated);
    if (host.before) before.emplace(host.name, std::move(*host.before));
    now.emplace(host.name, std::move(host.now));
  }
  // No Prometheus, so no rules' figures: each host against the captures given.
  for (Finding& finding : FleetDrift(now, before, options)) {
    report.findings.push_back(std::move(finding));
  }
  SortFindings(report.findings);  // stable: a check's hosts stay in the order they came
  report.context = {.host = std::to_string(hosts.size()) + " captures",
                    .generated = generated,
                    .window_seconds = window,
                    .window_kind = window > 0 ? kWindowCapture : kWindowNone};
  report.context.instances = hosts.size();
  report.context.fixes_display_only = true;
  if (keys.size() > 1) {
    // What redaction keeps (firmware, MTU, PFC, rates) still compares; what it hashes does not.
    report.context.warnings.push_back(
        "the captures were not redacted with one key (" + std::to_string(keys.size()) +
        " keys, or some not redacted): their hashed host names, GUIDs and addresses do not "
        "compare; use one --redact.key-file for a fleet's captures");
  }
  if (!options.show_ok) CountOk(report.findings, report.context);
  return report;
}

}  // namespace rdmascope::doctor
