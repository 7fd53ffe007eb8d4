// `doctor --prometheus` end to end through the PromQL client's seam (doctor/promql_client.h):
// a fake Prometheus answers each query from a table of series, or with a recorded answer
// (tests/fixtures/prometheus/), and the report is read back. What it proves: a partial answer
// (Thanos' and Mimir's `warnings`) is "could not judge", never a finding; a Prometheus without
// @ skips the history checks, not the run.
#include <gtest/gtest.h>

#include <cctype>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "doctor/fleet_report.h"
#include "doctor/promql_client.h"

namespace rdmascope::doctor {
namespace {

const std::string kFixtures = RDMASCOPE_FIXTURES;

std::string ReadFixture(const std::string& name) {
  std::ifstream in(kFixtures + "/prometheus/" + name);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) throw std::runtime_error("no fixture " + name);
  return text.str();
}

struct Series {
  std::string name;
  std::map<std::string, std::string> labels;  // instance and job included
  std::string value;
};

// Percent-decoding of what QueryTarget encoded.
std::string Decode(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size()) {
      out += static_cast<char>(std::stoi(text.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

// A Prometheus holding `series`: an instant query gets the series whose names it mentions
// (its matchers name them, doctor/prometheus_snapshots.h), rdmascope_build_info's query the
// build_info series, the history queries an empty answer or `history_answer`. `warnings` are
// added to every answer of a query the checks read.
class FakePrometheus final : public PromqlTransport {
 public:
  explicit FakePrometheus(std::vector<Series> series) : series_(std::move(series)) {}

  std::vector<std::string> warnings;
  std::optional<PromqlReply> history_answer;  // for the query with @

  std::expected<PromqlReply, std::string> Get(const std::string& target) override {
    const size_t at = target.find("query=") + 6;
    const std::string promql = Decode(target.substr(at, target.find('&', at) - at));
    {
      std::lock_guard lock(mutex_);
      asked_.push_back(promql);
    }
    const bool range = target.starts_with("/api/v1/query_range");
    if (promql.find(" @ ") != std::string::npos && history_answer) return *history_answer;
    if (range)
      return PromqlReply{200, R"({"status":"success","data":{"resultType":"matrix","result":[]}})"};
    std::set<std::string> words;
    std::string word;
    for (const char c : promql + " ") {
      if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':') {
        word += c;
      } else if (!word.empty()) {
        words.insert(std::exchange(word, ""));
      }
    }
    std::string result;
    for (const Series& one : series_) {
      if (!words.contains(one.name)) continue;
      if (one.name != "rdmascope_build_info" && words.contains("rdmascope_build_info")) continue;
      std::string metric = "\"__name__\":\"" + one.name + "\"";
      for (const auto& [key, value] : one.labels) metric += ",\"" + key + "\":\"" + value + "\"";
      result += (result.empty() ? "" : ",") + std::string("{\"metric\":{") + metric +
                "},\"value\":[1765000000,\"" + one.value + "\"]}";
    }
    std::string extra;
    for (const std::string& warning : warnings)
      extra += (extra.empty() ? "" : ",") + ("\"" + warning + "\"");
    return PromqlReply{200, R"({"status":"success","data":{"resultType":"vector","result":[)" +
                                result + "]}" +
                                (extra.empty() ? "" : ",\"warnings\":[" + extra + "]") + "}"};
  }

 private:
  std::vector<Series> series_;
  std::mutex mutex_;
  std::vector<std::string> asked_;
};

// Three hosts of one cluster scraped as job rdmascope; the third exports no RDMA device (its
// rdma_device_info was not answered, or it has none).
std::vector<Series> ThreeHosts() {
  std::vector<Series> series;
  for (const char* host : {"h1:9879", "h2:9879", "h3:9879"}) {
    const std::map<std::string, std::string> target{
        {"instance", host}, {"job", "rdmascope"}, {"cluster", "c1"}};
    series.push_back({"rdmascope_build_info", target, "1"});
    series.push_back({"up", target, "1"});
    if (std::string(host) == "h3:9879") continue;
    auto device = target;
    device["device"] = "mlx5_0";
    device["board_id"] = "MT_0000000359";
    device["hca_type"] = "MT4125";
    device["fw_ver"] = "22.39.1002";
    series.push_back({"rdma_device_info", device, "1"});
  }
  return series;
}

DoctorOptions Options() {
  DoctorOptions options;
  options.prometheus = "http://prometheus.test:9090";
  options.prometheus_time = 1765000000;
  options.prometheus_concurrency = 2;
  return options;
}

const Finding* FindingOf(const ParsedReport& report, const std::string& id,
                         const std::string& instance) {
  for (const Finding& finding : report.findings) {
    if (finding.id != id) continue;
    for (const auto& [key, value] : finding.scope) {
      if (key == "instance" && value == instance) return &finding;
    }
  }
  return nullptr;
}

TEST(DoctorFleetReport, AHostWithoutRdmaDeviceIsAFindingWhenTheAnswerIsWhole) {
  FakePrometheus prometheus(ThreeHosts());
  const ParsedReport report = ReportFromPrometheus(Options(), prometheus);
  const Finding* missing = FindingOf(report, "fleet.no_rdma_device", "h3:9879");
  ASSERT_NE(missing, nullptr) << RenderJson(report.findings, report.context);
  EXPECT_EQ(missing->severity, Severity::kWarn);
  EXPECT_TRUE(report.context.warnings.empty());
  EXPECT_EQ(report.context.instances, 3U);
}

TEST(DoctorFleetReport, APartialAnswerIsCouldNotJudgeNeverAFinding) {
  FakePrometheus prometheus(ThreeHosts());
  const std::string recorded = ReadFixture("partial_warning.json");
  const size_t open = recorded.find("\"warnings\":[\"") + 13;
  prometheus.warnings = {recorded.substr(open, recorded.find("\"]", open) - open)};
  const ParsedReport report = ReportFromPrometheus(Options(), prometheus);
  const Finding* missing = FindingOf(report, "fleet.no_rdma_device", "h3:9879");
  ASSERT_NE(missing, nullptr);
  EXPECT_EQ(missing->severity, Severity::kSkip) << "a host not answered is not a host without RDMA";
  EXPECT_NE(missing->observed.find("could not judge"), std::string::npos) << missing->observed;
  for (const Finding& finding : report.findings) {
    if (finding.id.starts_with("fleet.")) {
      EXPECT_EQ(finding.severity, Severity::kSkip) << finding.id;
    }
  }
  ASSERT_FALSE(report.context.warnings.empty());
  EXPECT_NE(report.context.warnings.front().find("partial answer: No StoreAPIs matched"),
            std::string::npos)
      << report.context.warnings.front();
  // Every rendering says so.
  EXPECT_NE(RenderJson(report.findings, report.context).find("\"warnings\": ["), std::string::npos);
  EXPECT_NE(RenderText(report.findings, report.context, false).find("WARNING: partial answer"),
            std::string::npos);
  EXPECT_NE(RenderHtml(report.findings, report.context).find("Warning: partial answer"),
            std::string::npos);
  // And a report read back (doctor --exporter of a fleet report) keeps them.
  const auto parsed = ParseJson(RenderJson(report.findings, report.context));
  ASSERT_TRUE(parsed.has_value()) << parsed.error();
  EXPECT_EQ(parsed->context.warnings, report.context.warnings);
}

// Where the fleet rules run, the report judges the hosts it covers against the rules' figures of
// their whole cluster (as the alerts do), read from the rules' own series: one a target exports
// under the same name (it has instance and job) is not read.
TEST(DoctorFleetReport, TheRulesClusterFiguresAreRead) {
  std::vector<Series> series = ThreeHosts();
  const std::map<std::string, std::string> group{{"cluster", "c1"},
                                                 {"board_id", "MT_0000000359"},
                                                 {"hca_type", "MT4125"},
                                                 {"setting", "firmware_version"}};
  for (const char* host : {"h1:9879", "h2:9879"}) {
    auto row = group;
    row.insert({{"instance", host},
                {"job", "rdmascope"},
                {"device", "mlx5_0"},
                {"setting_value", "22.39.1002"}});
    series.push_back({"rdma:fleet_setting:value", row, "1"});
  }
  auto cluster = group;
  cluster["setting_value"] = "22.40.1000";
  series.push_back({"cluster_board_id_setting_value:rdma_fleet_hosts:count", cluster, "50"});
  auto forged = group;
  forged.insert({{"instance", "h1:9879"}, {"job", "rdmascope"}, {"setting_value", "22.39.1002"}});
  series.push_back({"cluster_board_id_setting_value:rdma_fleet_hosts:count", forged, "1000"});
  FakePrometheus prometheus(series);
  const ParsedReport report = ReportFromPrometheus(Options(), prometheus);
  for (const char* host : {"h1:9879", "h2:9879"}) {
    const Finding* firmware = FindingOf(report, "fleet.firmware", host);
    ASSERT_NE(firmware, nullptr) << host << RenderJson(report.findings, report.context);
    EXPECT_EQ(firmware->severity, Severity::kWarn);
    EXPECT_NE(firmware->expected.find("22.40.1000, as 50 hosts"), std::string::npos)
        << firmware->expected;
  }
}

TEST(DoctorFleetReport, WithoutTheAtModifierTheHistoryChecksSkipNotTheRun) {
  FakePrometheus prometheus(ThreeHosts());
  prometheus.history_answer = PromqlReply{400, ReadFixture("at_modifier_disabled.json")};
  const ParsedReport report = ReportFromPrometheus(Options(), prometheus);
  ASSERT_NE(FindingOf(report, "fleet.no_rdma_device", "h3:9879"), nullptr)
      << "the rest of the report is made";
  bool history_skipped = false;
  for (const Finding& finding : report.findings) {
    if (finding.observed.find("could not answer the history query") != std::string::npos) {
      EXPECT_EQ(finding.severity, Severity::kSkip) << finding.id;
      EXPECT_NE(finding.observed.find("@ modifier"), std::string::npos) << finding.observed;
      history_skipped = true;
    }
  }
  EXPECT_TRUE(history_skipped) << RenderJson(report.findings, report.context);
  ASSERT_FALSE(report.context.warnings.empty());
  EXPECT_NE(report.context.warnings.front().find("history checks skipped"), std::string::npos);
}

TEST(DoctorFleetReport, AFailedQueryTheChecksNeedFailsTheRun) {
  class Down final : public PromqlTransport {
   public:
    std::expected<PromqlReply, std::string> Get(const std::string&) override {
      return std::unexpected("connection refused");
    }
  } down;
  EXPECT_THROW(ReportFromPrometheus(Options(), down), std::runtime_error);
}

}  // namespace
}  // namespace rdmascope::doctor
