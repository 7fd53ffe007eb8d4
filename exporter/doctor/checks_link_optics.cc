// Optics: each module's readings (the link collector's rdma_link_module_*, per lane) against the
// module's own thresholds while its table is valid, else the defaults of the rdmascope.link
// alerts (RX power -7 / -11 dBm, temperature 70 / 80 C); CMIS module state. The same decisions
// as the alerts: a lane without light is a fault of this link only when its RDMA port is up or
// another lane of the module has light; below the low alarm is critical unless the port is
// already down (links.port_state says that).
#include <cmath>
#include <optional>
#include <string>

#include "doctor/check_util.h"
#include "doctor/checks_link_health.h"

namespace rdmascope::doctor {
namespace {

constexpr const char* kArea = "links";

// The module's labels, as the link collector writes them on every series of one port.
Matchers ModuleKey(const Sample& series) {
  return {{"device", series.Label("device")},
          {"port", series.Label("port")},
          {"netdev", series.Label("netdev")}};
}

Matchers With(Matchers key, const char* label, const std::string& value) {
  key.emplace_back(label, value);
  return key;
}

// The interface first (what a person types), then the RDMA port when there is one.
Scope ModuleScope(const Sample& series) {
  Scope scope{{"netdev", series.Label("netdev")}};
  if (!series.Label("device").empty()) {
    scope.emplace_back("device", series.Label("device"));
    scope.emplace_back("port", series.Label("port"));
  }
  return scope;
}

std::string PortName(const Sample& series) {
  std::string name = series.Label("netdev");
  if (!series.Label("device").empty()) {
    name += " (" + series.Label("device") + "/" + series.Label("port") + ")";
  }
  return name;
}

bool TableValid(const Snapshot& now, const Sample& series, const char* quantity) {
  return now.Value("rdma_link_module_thresholds_valid",
                   With(ModuleKey(series), "quantity", quantity)) == 1.0;
}

// The module's threshold of a valid table (nullopt when the table is valid but has none at that
// level), or the default when its table is not valid.
struct Threshold {
  std::optional<double> value;
  bool from_module = false;
};
Threshold ThresholdOf(const Snapshot& now, const Sample& series, const char* quantity,
                      const char* metric, const char* level, const char* bound,
                      double default_value) {
  if (!TableValid(now, series, quantity)) return {default_value, false};
  Matchers key = With(With(ModuleKey(series), "level", level), "bound", bound);
  return {now.Value(metric, key), true};
}

std::optional<double> Dbm(double watts) {
  if (!(watts > 0)) return std::nullopt;
  return 10 * std::log10(watts) + 30;
}

std::string Fix(const Sample& series) {
  return FixLine({"ethtool -m ", HostValue(series.Label("netdev"))});
}

std::string DbmText(double dbm) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2f dBm", dbm);
  return buffer;
}

// The RDMA port's logical state (4 ACTIVE, 5 ACTIVE_DEFER); nullopt for an interface without
// one or when the rdma collector did not say.
std::optional<double> PortState(const Snapshot& now, const Sample& series) {
  if (series.Label("device").empty()) return std::nullopt;
  return now.Value("rdma_port_state",
                   {{"device", series.Label("device")}, {"port", series.Label("port")}});
}

constexpr const char* kOpticsFix =
    "clean both connectors, check the fiber (bends, MPO polarity, the patch panel) and the far "
    "end's TX power; reseat, then replace the optic or cable";

}  // namespace

std::vector<Finding> CheckOpticsRxPower(const Snapshot& now, const Snapshot*,
                                        const DoctorOptions&) {
  std::vector<Finding> findings;
  for (const Sample* lane : now.Find("rdma_link_module_lane_rx_power_watts")) {
    Scope scope = ModuleScope(*lane);
    scope.emplace_back("lane", lane->Label("lane"));
    const std::string where = PortName(*lane) + " lane " + lane->Label("lane");
    const std::optional<double> state = PortState(now, *lane);
    const std::optional<double> dbm = lane->value > kNoLightWatts ? Dbm(lane->value) : std::nullopt;
    if (!dbm) {
      bool sibling_lit = false;
      for (const Sample* other :
           now.Find("rdma_link_module_lane_rx_power_watts", ModuleKey(*lane))) {
        sibling_lit |= other->value > kNoLightWatts;
      }
      if (!(state && *state >= 4) && !sibling_lit) {
        findings.push_back(Skip("links.optics_rx_power", kArea, std::move(scope),
                                "rdmaopticlanenolight",
                                "no light on any lane and the port is not up: a link down "
                                "(links.port_state), not a low receiver"));
        continue;
      }
      Finding finding = Make("links.optics_rx_power", kArea, Severity::kCrit, std::move(scope),
                             "rdmaopticlanenolight");
      finding.observed = where + " receives no light (" + Num(lane->value * 1e6) + " uW) while " +
                         (sibling_lit ? "another lane of the module has light" : "the port is up");
      finding.expected = "light on every lane of a link that is up (above 1 uW, -30 dBm)";
      finding.advice = "lane " + lane->Label("lane") +
                       " is dark (under 1 uW): one fiber or lane is dead: " + kOpticsFix;
      finding.fix = Fix(*lane);
      findings.push_back(std::move(finding));
      continue;
    }
    const Threshold warning = ThresholdOf(
        now, *lane, "rx_power", "rdma_link_module_rx_power_threshold_watts", "warning", "low", 0);
    const Threshold alarm = ThresholdOf(
        now, *lane, "rx_power", "rdma_link_module_rx_power_threshold_watts", "alarm", "low", 0);
    // Thresholds in dBm: the module's (watts) or the defaults (already dBm).
    const auto to_dbm = [](const Threshold& t, double default_dbm) -> std::optional<double> {
      if (!t.from_module) return default_dbm;
      return t.value ? Dbm(*t.value) : std::nullopt;
    };
    const std::optional<double> warning_dbm = to_dbm(warning, kDefaultRxLowWarningDbm);
    const std::optional<double> alarm_dbm = to_dbm(alarm, kDefaultRxLowAlarmDbm);
    const char* whose =
        warning.from_module ? "the module's" : "the default: its table is not valid";
    const bool port_down = state && *state < 4;
    Severity severity = Severity::kOk;
    std::string threshold;
    double under = 0;  // dB below the threshold crossed
    if (alarm_dbm && *dbm < *alarm_dbm && !port_down) {
      severity = Severity::kCrit;
      threshold = "low alarm " + DbmText(*alarm_dbm);
      under = *alarm_dbm - *dbm;
    } else if (warning_dbm && *dbm < *warning_dbm) {
      severity = Severity::kWarn;
      threshold = "low warning " + DbmText(*warning_dbm);
      under = *warning_dbm - *dbm;
    }
    Finding finding = Make("links.optics_rx_power", kArea, severity, std::move(scope),
                           severity == Severity::kCrit ? "rdmaopticrxpowerbelowalarm"
                                                       : "rdmaopticrxpowerbelowwarning");
    finding.observed = where + " receives " + DbmText(*dbm);
    finding.expected = warning_dbm ? "at least " + DbmText(*warning_dbm) + " (" + whose + ")"
                                   : std::string("no low threshold (the module's table has none)");
    if (severity != Severity::kOk) {
      finding.observed += ", below its " + threshold + " (" + whose + ")";
      finding.advice = Num(std::round(under * 100) / 100) + " dB under its " + threshold +
                       ": low light leaves no margin: " + kOpticsFix;
      finding.fix = Fix(*lane);
    }
    findings.push_back(std::move(finding));
  }
  return findings;
}

std::vector<Finding> CheckOpticsTemperature(const Snapshot& now, const Snapshot*,
                                            const DoctorOptions&) {
  std::vector<Finding> findings;
  for (const Sample* module : now.Find("rdma_link_module_temperature_celsius")) {
    const char* metric = "rdma_link_module_temperature_threshold_celsius";
    const Threshold warning = ThresholdOf(now, *module, "temperature", metric, "warning", "high",
                                          kDefaultTemperatureHighWarning);
    const Threshold alarm = ThresholdOf(now, *module, "temperature", metric, "alarm", "high",
                                        kDefaultTemperatureHighAlarm);
    const char* whose =
        warning.from_module ? "the module's" : "the default: its table is not valid";
    Severity severity = Severity::kOk;
    std::string threshold;
    double over = 0;  // degrees above the threshold crossed
    if (alarm.value && module->value > *alarm.value) {
      severity = Severity::kCrit;
      threshold = "high alarm " + Num(*alarm.value) + " C";
      over = module->value - *alarm.value;
    } else if (warning.value && module->value > *warning.value) {
      severity = Severity::kWarn;
      threshold = "high warning " + Num(*warning.value) + " C";
      over = module->value - *warning.value;
    }
    Finding finding = Make(
        "links.optics_temperature", kArea, severity, ModuleScope(*module),
        severity == Severity::kCrit ? "rdmaoptictemperaturecritical" : "rdmaoptictemperaturehigh");
    finding.observed = "the module of " + PortName(*module) + " is at " + Num(module->value) + " C";
    finding.expected = warning.value
                           ? "at most " + Num(*warning.value) + " C (" + whose + ")"
                           : std::string("no high threshold (the module's table has none)");
    if (severity != Severity::kOk) {
      finding.observed += ", above its " + threshold + " (" + whose + ")";
      finding.advice = Num(std::round(over * 10) / 10) + " C over its " + threshold +
                       ": check the chassis airflow and fans, blanks in empty slots, the "
                       "module's power class against the cage; reseat, then replace the optic";
      finding.fix = Fix(*module);
    }
    findings.push_back(std::move(finding));
  }
  return findings;
}

std::vector<Finding> CheckOpticsModuleState(const Snapshot& now, const Snapshot*,
                                            const DoctorOptions&) {
  std::vector<Finding> findings;
  for (const Sample* module : now.Find("rdma_link_module_state")) {
    const int state = static_cast<int>(module->value);
    Scope scope = ModuleScope(*module);
    std::string fault_cause;
    for (const Sample* info : now.Find("rdma_link_module_state_info", ModuleKey(*module))) {
      fault_cause = info->Label("fault_cause");
    }
    const bool admin_down =
        !module->Label("device").empty() &&
        now.Value("rdma_port_netdev_admin_up",
                  {{"device", module->Label("device")}, {"port", module->Label("port")}}) == 0.0;
    if (state != 3 && state != 5 && admin_down) {
      findings.push_back(Skip("links.optics_module_state", kArea, std::move(scope),
                              "rdmaopticmodulenotready",
                              "the interface is set down: a host powers its module down with it"));
      continue;
    }
    const Severity severity = state == 3   ? Severity::kOk
                              : state == 5 ? Severity::kCrit
                                           : Severity::kWarn;
    Finding finding = Make("links.optics_module_state", kArea, severity, std::move(scope),
                           state == 5 ? "rdmaopticmodulefault" : "rdmaopticmodulenotready");
    finding.observed =
        "the CMIS module of " + PortName(*module) + " is in state " + Num(module->value) +
        (state == 5 ? " (ModuleFault, cause " +
                          (fault_cause.empty() ? std::string("unknown") : fault_cause) + ")"
         : state == 3 ? " (ModuleReady)"
                      : " (1 low power, 2 powering up, 4 powering down)");
    finding.expected = "3 (ModuleReady)";
    if (severity == Severity::kCrit) {
      finding.advice =
          "in state 5 the module shut its data path down: reseat it (a fault clears by a reset "
          "or power cycle); a fault that returns means replace the optic";
      finding.fix = Fix(*module);
    } else if (severity == Severity::kWarn) {
      finding.advice = "state " + Num(module->value) +
                       " (not 3, ready) while its interface is not set down: check its power "
                       "class against the cage and the NIC firmware; reseat, then replace the "
                       "optic";
      finding.fix = FixLine({"ethtool --show-module ", HostValue(module->Label("netdev"))});
    }
    findings.push_back(std::move(finding));
  }
  return findings;
}

}  // namespace rdmascope::doctor
