// links.flapping: carrier-down edges per port over the window, by the driver's reason
// (rdma_link_down_events_total, the link collector's link-down events; docs/metrics.md "Why a
// link went down"). The alerts' thresholds (RdmaLinkWentDown, RdmaLinkDownRepeatedly): one
// down warns, three are critical; an interface set down (reason admin_down) is not counted.
// The advice and fix follow the last reason (rdma_link_last_down_info).
#include <map>
#include <tuple>

#include "doctor/check_util.h"
#include "doctor/checks.h"

namespace rdmascope::doctor {
namespace {

constexpr const char* kArea = "links";
constexpr const char* kId = "links.flapping";
constexpr double kWarnDowns = 1;
constexpr double kCritDowns = 3;

// What to do for the driver's reason (enum ethtool_link_ext_state, as the counter names it).
std::string AdviceFor(const std::string& reason) {
  if (reason == "no_cable") return "no cable or module detected: plug or reseat it (the latch)";
  if (reason == "bad_signal_integrity" || reason == "link_training_failure" ||
      reason == "link_logical_mismatch") {
    return "the signal does not carry: clean the connectors, replace the optic or cable, compare "
           "the RX power per lane (/debug/links) with the module's thresholds, and check both "
           "ends agree on speed and FEC";
  }
  if (reason == "cable_issue" || reason == "eeprom_issue") {
    return "the NIC does not accept the cable or module: use a supported one";
  }
  if (reason == "overheat") return "the module overheated: check the airflow over the cage";
  if (reason == "power_budget_exceeded") {
    return "the cage cannot power the module: use one of a lower power class";
  }
  if (reason == "module") return "the module is not ready: see its CMIS state and fault cause";
  if (reason == "autoneg_failure") {
    return "autonegotiation failed: check speed and autonegotiation on both ends";
  }
  return "the driver gives no reason (veth, rxe) or one this exporter does not know: check the "
         "peer port and the kernel log (dmesg)";
}

bool ModuleReason(const std::string& reason) {
  return reason == "bad_signal_integrity" || reason == "overheat" || reason == "module" ||
         reason == "power_budget_exceeded" || reason == "eeprom_issue" ||
         reason == "link_training_failure";
}

}  // namespace

std::vector<Finding> CheckLinkFlapping(const Snapshot& now, const Snapshot* before,
                                       const DoctorOptions&) {
  using Key = std::tuple<std::string, std::string, std::string>;
  struct Port {
    double downs = 0;
  };
  std::map<Key, Port> ports;
  // Every port the link collector follows has a source series: a finding each, quiet too.
  for (const Sample* series : now.Find("rdma_link_source_available")) {
    if (series->Label("netdev").empty()) continue;
    ports[{series->Label("device"), series->Label("port"), series->Label("netdev")}];
  }
  for (const Sample* series : now.Find("rdma_link_down_events_total")) {
    Port& port = ports[{series->Label("device"), series->Label("port"), series->Label("netdev")}];
    if (series->Label("reason") == "admin_down" || before == nullptr) continue;
    // A series absent before started at its first down, within the window: counted whole.
    const Sample* old = before->Exact("rdma_link_down_events_total", series->labels);
    const double base = old != nullptr ? old->value : 0;
    if (series->value >= base) port.downs += series->value - base;  // a reset counts nothing
  }
  std::vector<Finding> findings;
  for (const auto& [key, port] : ports) {
    const auto& [device, number, netdev] = key;
    Scope scope;
    if (!device.empty()) scope = {{"device", device}, {"port", number}};
    scope.emplace_back("netdev", netdev);
    const char* runbook = port.downs >= kCritDowns ? "rdmalinkdownrepeatedly" : "rdmalinkwentdown";
    if (before == nullptr) {
      findings.push_back(Skip(kId, kArea, std::move(scope), runbook, kNeedsWindow));
      continue;
    }
    const Severity severity = port.downs >= kCritDowns   ? Severity::kCrit
                              : port.downs >= kWarnDowns ? Severity::kWarn
                                                         : Severity::kOk;
    Finding finding = Make(kId, kArea, severity, std::move(scope), runbook);
    const auto last = now.Find("rdma_link_last_down_info",
                               {{"device", device}, {"port", number}, {"netdev", netdev}});
    const std::string reason = last.empty() ? "" : last.front()->Label("reason");
    const std::string substate = last.empty() ? "" : last.front()->Label("substate");
    const std::string window = Num(now.seconds() - before->seconds()) + " s";
    finding.observed = Num(port.downs) + " carrier downs in " + window +
                       (reason.empty() ? std::string()
                                       : ", the last because the driver said " + reason +
                                             (substate.empty() ? "" : " (" + substate + ")"));
    finding.expected = "no down (warn from " + Num(kWarnDowns) + ", critical from " +
                       Num(kCritDowns) + " in 10 minutes, as the alerts)";
    if (severity != Severity::kOk) {
      finding.advice = Num(port.downs) + " carrier downs in " + window +
                       ", each dropping every connection on the port: " + AdviceFor(reason);
      // What the optic or the link says now: the module's pages, or the link's settings.
      finding.fix = ModuleReason(reason) ? FixLine({"ethtool -m ", HostValue(netdev)})
                                         : FixLine({"ethtool ", HostValue(netdev)});
    }
    findings.push_back(std::move(finding));
  }
  return findings;
}

}  // namespace rdmascope::doctor
