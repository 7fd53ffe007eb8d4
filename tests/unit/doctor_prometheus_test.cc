// doctor over a fleet (doctor/prometheus_snapshots.h, doctor/promql_client.h): the series the
// checks read are what the queries ask for; Prometheus' answers become one snapshot per
// instance, with the collectors' outcomes; bad answers are errors, odd samples are skipped.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "doctor/checks.h"
#include "doctor/prometheus_snapshots.h"
#include "doctor/promql_client.h"
#include "doctor/report.h"
#include "unit/doctor_fixtures.h"

namespace rdmascope::doctor {
namespace {

// Every check reads only kCheckSeries (and of rdma_ethtool_stat, kCheckEthtoolStats): the
// whole report from snapshots holding only those equals the report from the whole snapshots.
TEST(DoctorPrometheus, CheckSeriesAreWhatTheChecksRead) {
  const SeriesSelector stats[] = {{"rdma_ethtool_stat", "stat", kCheckEthtoolStats}};
  std::vector<std::string_view> names;
  for (std::string_view name : kCheckSeries) {
    if (name != "rdma_ethtool_stat") names.push_back(name);
  }
  for (bool bad : {true, false}) {
    const Snapshot now = testing::Host(bad, true);
    const Snapshot before = testing::Host(bad, false);
    const Snapshot now_only = now.Only(names, stats);
    const Snapshot before_only = before.Only(names, stats);
    // The collectors' outcomes are not series here (Only drops them; from a Prometheus they
    // come from rdmascope_collector_*, AnAnswerBecomesOneSnapshotPerInstance): host.collectors
    // is left out of the comparison.
    const auto report = [](const Snapshot& a, const Snapshot& b) {
      std::vector<Finding> findings = RunChecks(a, &b, {});
      std::erase_if(findings, [](const Finding& f) { return f.id == "host.collectors"; });
      return RenderJson(findings, {});
    };
    EXPECT_EQ(report(now_only, before_only), report(now, before)) << "bad=" << bad;
  }
}

// The ethtool stats the checks read: the IP packets and the drivers' FEC counters.
const std::string kStatSelector =
    "rdma_ethtool_stat{stat=~\"rx_packets|tx_packets|rx_corrected_bits_phy|rx_corrected_bits|"
    "rx_fec_corrected_blocks\"";

TEST(DoctorPrometheus, QueriesAskForEveryCheckSeriesWithTheMatchers) {
  const auto queries = CheckSeriesQueries("cluster=\"a\",job=\"rdmascope\"");
  ASSERT_GE(queries.size(), 2U);
  std::string all;
  for (const std::string& query : queries) {
    EXPECT_NE(query.find(",cluster=\"a\",job=\"rdmascope\"}"), std::string::npos) << query;
    EXPECT_LT(query.size(), 1024U) << "short enough for any proxy's URL limit";
    all += query;
  }
  for (std::string_view name : kCheckSeries) {
    EXPECT_NE(all.find(name), std::string::npos) << name;
  }
  EXPECT_NE(all.find(kStatSelector), std::string::npos) << all;
  EXPECT_EQ(CheckSeriesQueries("").back(), kStatSelector + "}");
}

constexpr const char* kAnswer = R"({"status":"success","data":{"resultType":"vector","result":[
  {"metric":{"__name__":"rdma_port_state","instance":"a:9879","job":"rdmascope","device":"mlx5_0","port":"1"},"value":[1.5,"4"]},
  {"metric":{"__name__":"rdma_port_state","instance":"b:9879","job":"rdmascope","device":"mlx5_0","port":"1"},"value":[1.5,"1"]},
  {"metric":{"__name__":"rdmascope_collector_success","instance":"b:9879","collector":"rdma"},"value":[1.5,"0"]},
  {"metric":{"__name__":"rdmascope_collector_success","instance":"a:9879","collector":"rdma"},"value":[1.5,"1"]},
  {"metric":{"__name__":"rdma_port_state","device":"mlx5_9","port":"1"},"value":[1.5,"4"]},
  {"metric":{"__name__":"rdma_port_state","instance":"a:9879","device":"mlx5_1","port":"1"},"value":[1.5,"four"]},
  {"metric":{"__name__":"rdma_netdev_mtu_bytes","instance":"a:9879","device":"eth2"},"value":[1.5,"NaN"]},
  {"metric":{"__name__":"rdma_netdev_mtu_bytes","instance":"a:9879","device":"eth3"},"value":"1500"}
]}})";

TEST(DoctorPrometheus, AnAnswerBecomesOneSnapshotPerInstance) {
  InstanceSeries series;
  ASSERT_TRUE(AddQueryAnswer(kAnswer, series).has_value());
  const auto snapshots = SnapshotsOf(series, 42);
  ASSERT_EQ(snapshots.size(), 2U) << "a sample without an instance is nobody's";
  const Snapshot& a = snapshots.at("a:9879");
  const Snapshot& b = snapshots.at("b:9879");
  EXPECT_EQ(a.seconds(), 42);
  EXPECT_EQ(a.Value("rdma_port_state", {{"device", "mlx5_0"}}), 4);
  EXPECT_EQ(a.Find("rdma_port_state", {{"device", "mlx5_1"}}).size(), 0U) << "not a number";
  EXPECT_TRUE(std::isnan(*a.Value("rdma_netdev_mtu_bytes", {{"device", "eth2"}})));
  EXPECT_EQ(a.Find("rdma_netdev_mtu_bytes", {{"device", "eth3"}}).size(), 0U) << "malformed";
  EXPECT_EQ(a.Find("rdma_port_state")[0]->Label("instance"), "") << "the scope adds it";
  EXPECT_EQ(a.Find("rdma_port_state")[0]->Label("job"), "rdmascope");
  EXPECT_EQ(b.Value("rdma_port_state"), 1);
  EXPECT_FALSE(a.Unavailable("rdma").has_value());
  ASSERT_TRUE(b.Unavailable("rdma").has_value()) << "its collector failed there";
  EXPECT_NE(b.Unavailable("rdma")->find("rdmascope_collector_success 0"), std::string::npos)
      << *b.Unavailable("rdma");
  EXPECT_TRUE(a.Unavailable("ethtool").has_value()) << "not reported: disabled there";
}

TEST(DoctorPrometheus, TwoAnswersAddToTheSameInstances) {
  InstanceSeries series;
  ASSERT_TRUE(AddQueryAnswer(kAnswer, series).has_value());
  ASSERT_TRUE(AddQueryAnswer(kAnswer, series).has_value());
  const auto snapshots = SnapshotsOf(series, 1);
  EXPECT_EQ(snapshots.at("a:9879").Find("rdma_port_state").size(), 2U)
      << "one family per name and instance: the second answer's samples join it";
}

TEST(DoctorPrometheus, BadAnswersSayWhatTheyAre) {
  InstanceSeries series;
  const auto expect_error = [&series](std::string_view body, const std::string& part) {
    const auto added = AddQueryAnswer(body, series);
    ASSERT_FALSE(added.has_value()) << body;
    EXPECT_NE(added.error().find(part), std::string::npos) << added.error();
  };
  expect_error("<html>502 Bad Gateway</html>", "not a Prometheus API answer");
  expect_error(R"({"status":"error","errorType":"bad_data","error":"invalid regex"})",
               "bad_data: invalid regex");
  expect_error(R"({"status":"success","data":{"resultType":"matrix","result":[]}})",
               "other than an instant vector");
  expect_error(R"({"status":"success"})", "other than an instant vector");
  EXPECT_TRUE(series.empty());
}

// The counters asked at the window's start are the ones the window checks compare: the
// report from a `before` holding only them equals the report from a whole `before`.
TEST(DoctorPrometheus, CounterQueriesHoldWhatTheWindowChecksRead) {
  for (bool bad : {true, false}) {
    const Snapshot now = testing::Host(bad, true);
    const Snapshot before = testing::Host(bad, false);
    std::string all;
    for (const std::string& query : CounterSeriesQueries("")) all += query + "\n";
    std::vector<std::string_view> names;
    for (std::string_view name : kCheckSeries) {
      if (all.find(std::string(name) + "|") != std::string::npos ||
          all.find(std::string(name) + "\"") != std::string::npos) {
        names.push_back(name);
      }
    }
    ASSERT_NE(all.find(kStatSelector), std::string::npos) << all;
    const SeriesSelector stats[] = {{"rdma_ethtool_stat", "stat", kCheckEthtoolStats}};
    const Snapshot before_only = before.Only(names, stats);
    EXPECT_EQ(RenderJson(RunChecks(now, &before, {}), {}),
              RenderJson(RunChecks(now, &before_only, {}), {}))
        << "bad=" << bad;
  }
}

constexpr const char* kRangeAnswer = R"({"status":"success","data":{"resultType":"matrix","result":[
  {"metric":{"__name__":"rdma_mr_outstanding_bytes","instance":"a:9879","pid":"7","comm":"leaky"},
   "values":[[1000,"4096"],[1060,"8192"]]},
  {"metric":{"__name__":"rdma_mr_outstanding_bytes","instance":"a:9879","pid":"8","comm":"odd"},
   "values":[[1000,"x"],[1120,"1"]]},
  {"metric":{"__name__":"rdma_mr_outstanding_bytes","pid":"9"},"values":[[1000,"1"]]},
  {"metric":{"__name__":"rdma_mr_outstanding_bytes","instance":"b:9879","pid":"5"},"values":[]}
]}})";

TEST(DoctorPrometheus, ARangeAnswerGivesEachSeriesItsFirstPoint) {
  TrendPoints points;
  ASSERT_TRUE(AddTrendAnswer(kRangeAnswer, ResultType::kMatrix, 0, points).has_value());
  ASSERT_EQ(points.size(), 1U) << "no instance: nobody's; no points: nothing";
  const auto& a = points.at("a:9879");
  ASSERT_EQ(a.size(), 2U);
  EXPECT_EQ(a.at(1000).at("rdma_mr_outstanding_bytes").at(0).value, 4096);
  EXPECT_EQ(a.at(1120).at("rdma_mr_outstanding_bytes").at(0).Label("comm"), "odd")
      << "a point that is not a number is left out";
  EXPECT_FALSE(AddTrendAnswer(kRangeAnswer, ResultType::kVector, 0, points).has_value())
      << "a matrix is not what an instant query answers";
}

// The history checks run on a fleet: the trend series an hour ago and now make the growth
// memory.mr_leak judges, as a running exporter's history does.
TEST(DoctorPrometheus, HistoryFromTrendAnswersFeedsTheLeakCheck) {
  const std::string then = R"({"status":"success","data":{"resultType":"vector","result":[
    {"metric":{"__name__":"rdma_mr_outstanding_bytes","instance":"a:9879","pid":"7","comm":"leaky"},"value":[400,"4096"]}]}})";
  const std::string now_answer = R"({"status":"success","data":{"resultType":"vector","result":[
    {"metric":{"__name__":"rdma_mr_outstanding_bytes","instance":"a:9879","pid":"7","comm":"leaky"},"value":[4000,"1048576"]},
    {"metric":{"__name__":"rdma_mr_leak_suspect_bytes","instance":"a:9879","pid":"7","comm":"leaky"},"value":[4000,"65536"]},
    {"metric":{"__name__":"rdma_mr_outstanding_bytes","instance":"a:9879","pid":"8","comm":"new"},"value":[4000,"10"]}]}})";
  TrendPoints points;
  ASSERT_TRUE(AddTrendAnswer(then, ResultType::kVector, 400, points).has_value());
  InstanceSeries series;
  ASSERT_TRUE(AddQueryAnswer(now_answer, series).has_value());
  auto snapshots = SnapshotsOf(series, 4000);
  auto histories = HistoriesOf(points);
  Snapshot& a = snapshots.at("a:9879");
  a.set_history(histories.at("a:9879"));
  std::map<std::string, Severity> leak;
  for (const Finding& finding : RunChecks(a, nullptr, {})) {
    if (finding.id != "memory.mr_leak") continue;
    for (const auto& [key, value] : finding.scope) {
      if (key == "pid") leak[value] = finding.severity;
    }
  }
  EXPECT_EQ(leak["7"], Severity::kWarn) << "grew over the hour with old regions held";
  EXPECT_EQ(leak["8"], Severity::kSkip) << "not there an hour ago, not in the range: too recent";
}

TEST(DoctorPrometheus, AnswersTooDeepOrCutShortAreErrors) {
  InstanceSeries series;
  std::string deep = R"({"status":"success","data":{"resultType":"vector","result":[)";
  for (int i = 0; i < 100; ++i) deep += "[";
  EXPECT_FALSE(AddQueryAnswer(deep, series).has_value());
  const std::string whole = R"({"status":"success","data":{"resultType":"vector","result":[
    {"metric":{"__name__":"up","instance":"a:1"},"value":[1,"1"]}]}})";
  EXPECT_FALSE(AddQueryAnswer(whole.substr(0, whole.size() - 3), series).has_value());
  EXPECT_TRUE(series.empty()) << "a failed answer adds nothing";
  ASSERT_TRUE(AddQueryAnswer(whole, series).has_value());
  EXPECT_EQ(series.at("a:1").at("up").at(0).value, 1);
}

TEST(DoctorFleetReport, OkFindingsAreCountedAndQueriesListed) {
  std::vector<Finding> findings = {{.id = "links.port_state",
                                    .area = "links",
                                    .severity = Severity::kOk,
                                    .scope = {{"instance", "a:9879"}}},
                                   {.id = "links.port_state",
                                    .area = "links",
                                    .severity = Severity::kOk,
                                    .scope = {{"instance", "b:9879"}}},
                                   {.id = "links.port_state",
                                    .area = "links",
                                    .severity = Severity::kCrit,
                                    .scope = {{"instance", "c:9879"}},
                                    .runbook = "docs/runbook.md#rdmaportdown"}};
  ReportContext context{.host = "http://prom:9090", .generated = "2026-12-05T10:00:00Z"};
  context.instances = 3;
  context.queries = {{.promql = "up{job=\"r\"}",
                      .time = "2026-12-05T10:00:00Z",
                      .series = 3,
                      .bytes = 1234,
                      .seconds = 0.05}};
  CountOk(findings, context);
  ASSERT_EQ(findings.size(), 1U);
  EXPECT_EQ(context.ok_by_check.at("links.port_state"), 2U);
  const std::string json = RenderJson(findings, context);
  EXPECT_NE(json.find("\"ok\": 2"), std::string::npos) << json;
  EXPECT_NE(json.find("\"links.port_state\": 2"), std::string::npos) << json;
  EXPECT_NE(json.find("\"promql\": \"up{job=\\\"r\\\"}\""), std::string::npos) << json;
  const std::string text = RenderText(findings, context, false);
  EXPECT_NE(text.find("3 hosts"), std::string::npos) << text;
  EXPECT_NE(text.find("2 ok, counted (1 checks; --show-ok lists them): links.port_state 2"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("1 queries:\n  up{job=\"r\"}\n      at 2026-12-05T10:00:00Z, 3 series, "
                      "1,234 bytes, 50 ms"),
            std::string::npos)
      << text;
  const std::string html = RenderHtml(findings, context);
  EXPECT_NE(html.find("href=\"http://c:9879/runbook#rdmaportdown\""), std::string::npos)
      << "a fleet finding's runbook is its host's";
  EXPECT_NE(html.find("<code>up{job=&quot;r&quot;}</code>"), std::string::npos) << html;
}

TEST(DoctorPrometheusFlags, MatchersFromSelectorAndJob) {
  EXPECT_EQ(PrometheusMatchers("", ""), "");
  EXPECT_EQ(PrometheusMatchers("{cluster=\"a\"}", ""), "cluster=\"a\"");
  EXPECT_EQ(PrometheusMatchers(" cluster=\"a\" ", "rdma\"scope"),
            "cluster=\"a\",job=\"rdma\\\"scope\"");
  EXPECT_EQ(PrometheusMatchers("", "rdmascope"), "job=\"rdmascope\"");
  EXPECT_THROW(PrometheusMatchers("{cluster=\"a\"", ""), std::invalid_argument);
  EXPECT_EQ(UrlEncode("{a=~\"x|y\"} &"), "%7Ba%3D~%22x%7Cy%22%7D%20%26");
}

TEST(DoctorPrometheusFlags, EvaluationTimeAsPrometheusTakesIt) {
  EXPECT_EQ(ParseEvaluationTime("1733392800"), 1733392800.0);
  EXPECT_EQ(ParseEvaluationTime("1733392800.25"), 1733392800.25);
  EXPECT_EQ(ParseEvaluationTime("2024-12-05T10:00:00Z"), 1733392800.0);
  EXPECT_EQ(ParseEvaluationTime("2024-12-05T11:00:00.5+01:00"), 1733392800.5);
  EXPECT_EQ(ParseEvaluationTime("2024-12-05T09:30:00-00:30"), 1733392800.0);
  for (const char* bad : {"", "now", "2024-12-05T10:00:00", "2024-12-05 10:00:00Z",
                          "2024-12-05T10:00:00Zx", "2024-12-05T10:00:00+25:00", "-5", "1.2.3"}) {
    EXPECT_FALSE(ParseEvaluationTime(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace rdmascope::doctor
