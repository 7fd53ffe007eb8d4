// `doctor --replay` (doctor/replay_report.h) on snapshots built as the collectors build them,
// and what it reads of a capture's index (core/capture_index.h): one capture is that host's
// report with the capture's window, several are a fleet report whose drift names the odd host.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/capture_index.h"
#include "doctor/replay_report.h"
#include "unit/doctor_fixtures.h"

namespace rdmascope {
namespace {

using capture::ParseUtcMillis;
using capture::ReadIndexFacts;
using capture::SecondsSinceFirst;
using doctor::Finding;
using doctor::ReplayedHost;
using doctor::Severity;
using doctor::testing::Families;

TEST(CaptureIndex, TheWritersTimesReadToTheMillisecond) {
  // date -u -d 2026-12-06T15:00:00Z +%s: 1796569200
  EXPECT_EQ(ParseUtcMillis("2026-12-06T15:00:00.123Z"), 1796569200123);
  EXPECT_EQ(ParseUtcMillis("2026-12-06T15:00:00Z"), 1796569200000);
  EXPECT_EQ(ParseUtcMillis("2026-12-06T15:00:00.1234567Z"), 1796569200123);  // finer: dropped
  for (const char* bad : {"", "2026-12-06T15:00:00.123", "2026-13-06T15:00:00Z",
                          "2026-12-06 15:00:00Z", "2026-12-06T15:00:00.Z", "2026-12-06T15:00:0xZ",
                          "2026-12-06T15:00:00.12a3Z", "2026-12-06T24:00:00Z"}) {
    EXPECT_FALSE(ParseUtcMillis(bad)) << bad;
  }
  // Differences are exact to the millisecond, not those of two Unix times near 1.8e9 as doubles.
  EXPECT_EQ(SecondsSinceFirst({"2026-12-06T15:00:00.469Z", "2026-12-06T15:00:01.476Z"}),
            (std::vector<double>{0, 1.007}));
  EXPECT_FALSE(SecondsSinceFirst({"2026-12-06T15:00:00Z", "yesterday"}));
}

TEST(CaptureIndex, FactsOfAHandEditedOrHostileIndex) {
  const auto facts = ReadIndexFacts(R"({"format_version": 1, "hostname": "node17",
      "kernel": {"release": "6.1.0-28-amd64"}, "redacted": true,
      "collectors_replayed": ["rdma", 7, "host"],
      "samples": [{"name": "0001", "time": "2026-12-06T15:00:00.000Z"},
                  {"name": "0002", "time": "2026-12-06T15:00:10.007Z"}]})");
  ASSERT_TRUE(facts) << facts.error();
  EXPECT_EQ(facts->hostname, "node17");
  EXPECT_EQ(facts->kernel_release, "6.1.0-28-amd64");
  EXPECT_TRUE(facts->redacted);
  EXPECT_EQ(facts->collectors, (std::vector<std::string>{"rdma", "host"}));
  EXPECT_EQ(facts->sample_seconds, (std::vector<double>{0, 10.007}));
  // Fields of the wrong type are absent, not a crash; a sample without a time is refused.
  const auto odd = ReadIndexFacts(
      R"({"hostname": 5, "kernel": "x", "redacted": "yes",
          "samples": [{"time": "2026-12-06T15:00:00Z"}]})");
  ASSERT_TRUE(odd) << odd.error();
  EXPECT_EQ(odd->hostname, "");
  EXPECT_FALSE(odd->redacted);
  EXPECT_TRUE(odd->collectors.empty());
  for (const char* bad : {"", "[]", "{", R"({"samples": []})", R"({"samples": [{}]})",
                          R"({"samples": [{"time": 3}]})", R"({"samples": ["0001"]})"}) {
    EXPECT_FALSE(ReadIndexFacts(bad)) << bad;
  }
}

// One captured host: a ConnectX-6 Dx with `firmware`, its IB port's SymbolErrorCounter at
// `symbol` then `symbol + burst` `window` seconds later.
ReplayedHost Captured(const std::string& name, const std::string& firmware, double window,
                      double burst) {
  const auto snapshot = [&](double seconds, double symbol) {
    Families f;
    f.Gauge("rdma_device_info",
            {{"device", "mlx5_0"},
             {"node_type", "CA"},
             {"firmware_version", firmware},
             {"board_id", "MT_0000000359"},
             {"hca_type", "MT4125"},
             {"fw_ver", firmware}},
            1);
    f.Gauge("rdma_port_info", {{"device", "mlx5_0"}, {"port", "1"}, {"link_layer", "InfiniBand"}},
            1);
    f.Counter("rdma_port_symbol_errors_total", {{"device", "mlx5_0"}, {"port", "1"}}, symbol);
    return f.Build(seconds, doctor::testing::AllRan());
  };
  return {.name = name,
          .generated = "2026-12-06T15:00:10.000Z",
          .before = snapshot(0, 5),
          .now = snapshot(window, 5 + burst)};
}

std::vector<const Finding*> Named(const std::vector<Finding>& findings, const std::string& id,
                                  Severity severity) {
  std::vector<const Finding*> out;
  for (const Finding& finding : findings) {
    if (finding.id == id && finding.severity == severity) out.push_back(&finding);
  }
  return out;
}

std::string Instance(const Finding& finding) {
  for (const auto& [key, value] : finding.scope) {
    if (key == "instance") return value;
  }
  return "";
}

TEST(DoctorReplay, OneCaptureIsThatHostsReportOverItsWindow) {
  std::vector<ReplayedHost> hosts;
  hosts.push_back(Captured("node17", "22.36.1010", 10, 300));
  const auto report = doctor::ReportFromReplays(std::move(hosts), doctor::DoctorOptions{});
  const auto symbol = Named(report.findings, "links.symbol_errors", Severity::kWarn);
  ASSERT_EQ(symbol.size(), 1U);
  EXPECT_NE(symbol.front()->observed.find("300 symbol errors in 10 s"), std::string::npos)
      << symbol.front()->observed;
  EXPECT_EQ(Instance(*symbol.front()), "");  // one host: no instance in the scope
  EXPECT_EQ(report.context.host, "node17");
  EXPECT_EQ(report.context.window_seconds, 10);
  EXPECT_EQ(report.context.window_kind, doctor::kWindowCapture);
  EXPECT_TRUE(report.context.fixes_display_only);
  EXPECT_EQ(report.context.instances, 0U);
  // The history checks say why they skip: a capture, not "no exporter running".
  const auto leak = Named(report.findings, "memory.mr_leak", Severity::kSkip);
  ASSERT_EQ(leak.size(), 1U);
  EXPECT_EQ(leak.front()->observed, doctor::kNoHistoryInCapture);
}

TEST(DoctorReplay, SeveralCapturesAreAFleetWithEachHostsOwnWindow) {
  std::vector<ReplayedHost> hosts;
  hosts.push_back(Captured("a", "22.36.1010", 10, 0));
  hosts.push_back(Captured("b", "22.36.1010", 30, 0));
  // c: another firmware, and 600 symbol errors over its own 60 s (10/s).
  hosts.push_back(Captured("c", "22.35.1000", 60, 600));
  const auto report = doctor::ReportFromReplays(std::move(hosts), doctor::DoctorOptions{});
  const auto firmware = Named(report.findings, "fleet.firmware", Severity::kWarn);
  ASSERT_EQ(firmware.size(), 1U);
  EXPECT_EQ(Instance(*firmware.front()), "c");
  const auto outlier = Named(report.findings, "fleet.symbol_errors", Severity::kWarn);
  ASSERT_EQ(outlier.size(), 1U);
  EXPECT_EQ(Instance(*outlier.front()), "c");
  EXPECT_EQ(outlier.front()->observed.rfind("10 symbol errors/s", 0), 0U)
      << outlier.front()->observed;
  const auto own = Named(report.findings, "links.symbol_errors", Severity::kWarn);
  ASSERT_EQ(own.size(), 1U);
  EXPECT_EQ(Instance(*own.front()), "c");
  EXPECT_EQ(own.front()->scope.front().first, "instance");
  EXPECT_EQ(report.context.instances, 3U);
  EXPECT_EQ(report.context.host, "3 captures");
  EXPECT_EQ(report.context.window_seconds, 60);
  EXPECT_TRUE(report.context.fixes_display_only);
  EXPECT_FALSE(report.context.ok_by_check.empty());  // ok findings counted, not listed
}

// Redacted values compare only under one key: a report over captures of several keys says so.
TEST(DoctorReplay, CapturesRedactedWithDifferentKeysAreSaidNotToCompare) {
  const auto warnings = [](std::vector<std::string> keys) {
    std::vector<ReplayedHost> hosts;
    for (size_t i = 0; i < keys.size(); ++i) {
      hosts.push_back(Captured("host" + std::to_string(i), "22.36.1010", 10, 0));
      hosts.back().redaction_key_id = keys[i];
    }
    return doctor::ReportFromReplays(std::move(hosts), doctor::DoctorOptions{}).context.warnings;
  };
  EXPECT_TRUE(warnings({"", ""}).empty());
  EXPECT_TRUE(warnings({"0123abcd", "0123abcd", "0123abcd"}).empty());
  ASSERT_EQ(warnings({"0123abcd", "99999999"}).size(), 1U);
  EXPECT_NE(warnings({"0123abcd", ""}).front().find("not redacted with one key"),
            std::string::npos);
}

}  // namespace
}  // namespace rdmascope
