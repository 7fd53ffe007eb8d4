// doctor over a fleet (doctor/prometheus_snapshots.h, cli/doctor_prometheus.h): the series the
// checks read are what the queries ask for; Prometheus' answers become one snapshot per
// instance, with the collectors' outcomes; bad answers are errors, odd samples are skipped.
#include "cli/doctor_prometheus.h"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>

#include "doctor/checks.h"
#include "doctor/prometheus_snapshots.h"
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
  EXPECT_NE(all.find("rdma_ethtool_stat{stat=~\"rx_packets|tx_packets\""), std::string::npos)
      << all;
  EXPECT_EQ(CheckSeriesQueries("").back(), "rdma_ethtool_stat{stat=~\"rx_packets|tx_packets\"}");
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

}  // namespace
}  // namespace rdmascope::doctor

namespace rdmascope {
namespace {

TEST(DoctorPrometheusFlags, MatchersFromSelectorAndJob) {
  EXPECT_EQ(PrometheusMatchers("", ""), "");
  EXPECT_EQ(PrometheusMatchers("{cluster=\"a\"}", ""), "cluster=\"a\"");
  EXPECT_EQ(PrometheusMatchers(" cluster=\"a\" ", "rdma\"scope"),
            "cluster=\"a\",job=\"rdma\\\"scope\"");
  EXPECT_EQ(PrometheusMatchers("", "rdmascope"), "job=\"rdmascope\"");
  EXPECT_THROW(PrometheusMatchers("{cluster=\"a\"", ""), std::invalid_argument);
  EXPECT_EQ(UrlEncode("{a=~\"x|y\"} &"), "%7Ba%3D~%22x%7Cy%22%7D%20%26");
}

}  // namespace
}  // namespace rdmascope
