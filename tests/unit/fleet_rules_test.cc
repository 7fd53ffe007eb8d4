// Fleet drift and the fleet rules have one judgement (doctor/fleet_rules.h): these tests load
// rules/rdmascope.fleet.rules.yml (and rdmascope.rules.yml, whose congestion counters the fleet
// rule sums) and fail when the rules' errors, floors, factor, rate window, counter lists,
// settings, their alerts' severities and runbook anchors, or which settings only count below
// the majority, differ from doctor's tables: an edit on one side alone.
#include "doctor/fleet_rules.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <map>
#include <regex>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "doctor/fleet_drift_parts.h"

namespace rdmascope::doctor {
namespace {

const std::string kRules = std::string(RDMASCOPE_FIXTURES) + "/../../rules/";

// name (record or alert) -> the rule, of every group of `file`.
std::map<std::string, YAML::Node> Rules(const std::string& file) {
  std::map<std::string, YAML::Node> rules;
  for (const YAML::Node& group : YAML::LoadFile(kRules + file)["groups"]) {
    for (const YAML::Node& rule : group["rules"]) {
      const YAML::Node name = rule["record"] ? rule["record"] : rule["alert"];
      rules.emplace(name.as<std::string>(), rule);
    }
  }
  return rules;
}

std::string Expr(const std::map<std::string, YAML::Node>& rules, const std::string& name) {
  const auto rule = rules.find(name);
  if (rule == rules.end()) {
    ADD_FAILURE() << name << " is not in the rules";
    return "";
  }
  return rule->second["expr"].as<std::string>();
}

// Every first group of `pattern`'s matches in `text`.
std::vector<std::smatch> Matches(const std::string& text, const std::string& pattern) {
  std::vector<std::smatch> all;
  const std::regex re(pattern);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator();
       ++it) {
    all.push_back(*it);
  }
  return all;
}

std::set<std::string> Split(const std::string& alternatives) {
  std::set<std::string> parts;
  size_t at = 0;
  for (size_t bar; (bar = alternatives.find('|', at)) != std::string::npos; at = bar + 1) {
    parts.insert(alternatives.substr(at, bar - at));
  }
  parts.insert(alternatives.substr(at));
  return parts;
}

std::set<std::string> Set(std::span<const char* const> names) {
  return {names.begin(), names.end()};
}

// The group figures doctor reads as the reference (FleetReference) are what the rules record, and
// what the alerts compare with.
TEST(FleetRules, TheGroupFiguresDoctorReadsAreRecorded) {
  const auto rules = Rules("rdmascope.fleet.rules.yml");
  const std::string hosts = std::string(fleet_rules::kSettingHostsSeries);
  const std::string median = std::string(fleet_rules::kErrorMedianSeries);
  EXPECT_NE(Expr(rules, hosts).find(std::string(fleet_rules::kSettingSeries)), std::string::npos);
  EXPECT_NE(Expr(rules, median).find(std::string(fleet_rules::kErrorRateSeries)),
            std::string::npos);
  EXPECT_NE(Expr(rules, "cluster_board_id_setting:rdma_fleet_majority:count").find(hosts),
            std::string::npos);
  EXPECT_NE(Expr(rules, "RdmaFleetErrorRateOutlier").find(median), std::string::npos);
}

TEST(FleetRules, ErrorsFloorsFactorAndWindowAreDoctors) {
  const auto rules = Rules("rdmascope.fleet.rules.yml");
  const std::string alert = Expr(rules, "RdmaFleetErrorRateOutlier");
  // rate > on (...) group_left FACTOR * median
  const auto factor = Matches(
      alert,
      R"re(group_left\s+([0-9.]+)\s*\*\s*cluster_board_id_error:rdma_fleet_error_rate:median5m)re");
  ASSERT_EQ(factor.size(), 1U) << alert;
  EXPECT_EQ(std::stod(factor.front()[1]), fleet_rules::kErrorFactor);
  // rdma:fleet_error_rate:rate5m{error=~"crc|symbol"} > 1
  std::map<std::string, double> rule_floors, doctor_floors;
  for (const auto& floor :
       Matches(alert, R"re(rdma:fleet_error_rate:rate5m\{error=~?"([^"]+)"\}\s*>\s*([0-9.]+))re")) {
    for (const std::string& error : Split(floor[1])) rule_floors[error] = std::stod(floor[2]);
  }
  for (const auto& error : fleet_rules::kErrorRates) doctor_floors[error.error] = error.floor;
  EXPECT_EQ(rule_floors, doctor_floors);
  EXPECT_EQ(rules.at("RdmaFleetErrorRateOutlier")["labels"]["severity"].as<std::string>(),
            "warning")
      << "doctor reports an outlier as warn";

  // The errors the recording rule labels, over the window doctor reads its rates for.
  const std::string rates = Expr(rules, std::string(fleet_rules::kErrorRateSeries));
  std::set<std::string> rule_errors, doctor_errors;
  for (const auto& error : Matches(rates, R"re("error",\s*"(\w+)")re"))
    rule_errors.insert(error[1]);
  for (const auto& error : fleet_rules::kErrorRates) doctor_errors.insert(error.error);
  EXPECT_EQ(rule_errors, doctor_errors);
  for (const auto& range : Matches(rates, R"re(\[(\w+)\])re")) {
    EXPECT_EQ(range[1],
              std::to_string(static_cast<int>(fleet_rules::kRateWindowSeconds) / 60) + "m");
  }
  // The median is Prometheus' quantile 0.5 per cluster and kind, as doctor's.
  EXPECT_NE(Expr(rules, "cluster_board_id_error:rdma_fleet_error_rate:median5m")
                .find("quantile by (cluster, board_id, hca_type, error) (0.5, " +
                      std::string(fleet_rules::kErrorRateSeries) + ")"),
            std::string::npos);
}

TEST(FleetRules, CounterListsAreDoctors) {
  const auto fleet = Rules("rdmascope.fleet.rules.yml");
  const std::string rates = Expr(fleet, std::string(fleet_rules::kErrorRateSeries));
  const auto out_of_sequence = Matches(rates, R"re(counter=~"([^"]+)")re");
  ASSERT_EQ(out_of_sequence.size(), 1U) << rates;
  EXPECT_EQ(Split(out_of_sequence.front()[1]), Set(fleet_rules::kOutOfSequenceCounters));
  // cnp: the per-port recording rule of rdmascope.rules.yml, and its counters.
  EXPECT_NE(rates.find("rdma:port_congestion_notifications:rate5m"), std::string::npos);
  const std::string congestion =
      Expr(Rules("rdmascope.rules.yml"), "rdma:port_congestion_notifications:rate5m");
  const auto counters = Matches(congestion, R"re(counter=~"([^"]+)")re");
  ASSERT_EQ(counters.size(), 1U) << congestion;
  EXPECT_EQ(Split(counters.front()[1]), Set(fleet_rules::kCongestionCounters));
}

// Every setting the rule records is one doctor compares, and every one doctor compares is
// recorded; the DSCPs whose priority is a setting are doctor's.
TEST(FleetRules, SettingsAreDoctors) {
  const auto rules = Rules("rdmascope.fleet.rules.yml");
  const std::string values = Expr(rules, std::string(fleet_rules::kSettingSeries));
  std::set<std::string> doctor_names;
  for (const auto& setting : fleet_drift::Settings()) {
    doctor_names.insert(setting.names.begin(), setting.names.end());
  }
  // label_replace(..., "setting", NAME, SOURCE, REGEX): a name, or a template of SOURCE's
  // value ($1); label_join's ("setting", SEPARATOR, ...) has no regex and is left out.
  std::vector<std::regex> templates;
  for (const auto& found :
       Matches(values, R"re("setting",\s*"([^"]*)",\s*"(\w*)",\s*"(|\(\.\+\))"\))re")) {
    std::string name = found[1];
    if (name == "$1") {
      // The value of SOURCE itself: the values the selector lets through (flag="...").
      const auto selector = Matches(values, found[2].str() + R"re(="(\w+)")re");
      ASSERT_EQ(selector.size(), 1U) << found[2];
      name = selector.front()[1];
    }
    if (name.find('$') == std::string::npos) {
      EXPECT_TRUE(doctor_names.contains(name)) << "recorded, not compared by doctor: " << name;
      templates.emplace_back(name);
      continue;
    }
    const std::string pattern = std::regex_replace(name, std::regex(R"re(\$\{?1\}?)re"), ".+");
    templates.emplace_back(pattern);
    bool compared = false;
    for (const std::string& doctor : doctor_names) {
      compared = compared || std::regex_match(doctor, templates.back());
    }
    EXPECT_TRUE(compared) << "recorded, not compared by doctor: " << name;
  }
  ASSERT_GE(templates.size(), 10U) << values;
  for (const std::string& doctor : doctor_names) {
    bool recorded = false;
    for (const std::regex& pattern : templates) {
      recorded = recorded || std::regex_match(doctor, pattern);
    }
    EXPECT_TRUE(recorded) << "compared by doctor, not recorded: " << doctor;
  }
  const auto dscps = Matches(values, R"re(dscp=~"([^"]+)")re");
  ASSERT_EQ(dscps.size(), 1U);
  EXPECT_EQ(Split(dscps.front()[1]), Set(fleet_rules::kDscps));
}

// Each setting check reports what the drift alert of its runbook anchor pages for: the same
// settings (the alert's selector), the same severity, and below the majority only where the
// alert compares with `<`.
TEST(FleetRules, SettingChecksAreTheirAlerts) {
  struct Alert {
    std::string name;
    std::regex settings;
    std::string severity;
    bool below;
  };
  std::map<std::string, Alert> by_anchor;
  for (const auto& [name, rule] : Rules("rdmascope.fleet.rules.yml")) {
    if (!rule["alert"]) continue;
    const std::string expr = rule["expr"].as<std::string>();
    const auto selector = Matches(
        expr, std::string(fleet_rules::kSettingSeries) + R"re(\{setting(=~?)"([^"]+)"\})re");
    if (selector.empty()) continue;
    const std::string url = rule["annotations"]["runbook_url"].as<std::string>();
    const std::string anchor = url.substr(url.rfind('#') + 1);
    by_anchor.emplace(anchor,
                      Alert{name, std::regex(selector.front()[2].str()),
                            rule["labels"]["severity"].as<std::string>(),
                            std::regex_search(expr, std::regex(R"re(\}\s*<\s*on\s*\()re"))});
  }
  ASSERT_GE(by_anchor.size(), 8U);
  std::set<std::string> used;
  for (const auto& setting : fleet_drift::Settings()) {
    const auto alert = by_anchor.find(setting.runbook);
    ASSERT_NE(alert, by_anchor.end()) << setting.id << ": no alert with #" << setting.runbook;
    used.insert(setting.runbook);
    EXPECT_EQ(alert->second.severity, setting.severity == Severity::kWarn ? "warning" : "info")
        << setting.id;
    EXPECT_EQ(alert->second.below, setting.below_only) << setting.id;
    for (const std::string& name : setting.names) {
      for (const auto& [anchor, other] : by_anchor) {
        EXPECT_EQ(std::regex_match(name, other.settings), anchor == setting.runbook)
            << setting.id << " " << name << " and " << other.name;
      }
    }
  }
  EXPECT_EQ(used.size(), by_anchor.size()) << "a drift alert no doctor check reports";
}

}  // namespace
}  // namespace rdmascope::doctor
