// One result of `rdmascope doctor`: what a check saw on one subject (a port, a netdev, a CQ, a
// process) and what to do about it. The fields are the JSON schema (docs/doctor.md).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rdmascope::doctor {

// In increasing order of concern; skip (not checked) sorts apart, see report.cc.
enum class Severity { kOk, kInfo, kWarn, kCrit, kSkip };

inline std::string_view SeverityName(Severity severity) {
  switch (severity) {
    case Severity::kOk:
      return "ok";
    case Severity::kInfo:
      return "info";
    case Severity::kWarn:
      return "warn";
    case Severity::kCrit:
      return "crit";
    case Severity::kSkip:
      return "skip";
  }
  return "unknown";
}

// Ordered (device before port before netdev...): the order a person reads a scope in.
using Scope = std::vector<std::pair<std::string, std::string>>;

struct Finding {
  std::string id;    // stable, "area.check": roce.netdev_mtu
  std::string area;  // links, roce, queues, memory, host
  Severity severity = Severity::kOk;
  Scope scope;
  std::string observed;  // what was seen; for skip, why the check could not run
  std::string expected;  // what a healthy host shows
  std::string advice;    // what to do, with the computed figure
  std::string fix;       // a command to run (printed, never applied); empty when none exists
  std::string runbook;   // docs/runbook.md#anchor, shared with the alert of the same pitfall
};

}  // namespace rdmascope::doctor
