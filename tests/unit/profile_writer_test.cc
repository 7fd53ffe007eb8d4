// The outputs of `rdmascope profile` other than pprof (pprof_writer_test.cc): profile.json
// (golden file, nulls for what was not measured), folded stacks (sums equal the totals), the
// HTML report (every hostile string escaped, the plots present), and Log2Histogram::Quantile.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "profile/folded_writer.h"
#include "profile/html_report.h"
#include "profile/json_writer.h"
#include "unit/profile_writer_fixture.h"

namespace rdmascope::profile {
namespace {

using testing::kHostileComm;
using testing::kHostileFunction;
using testing::kMiB;
using testing::SampleProfile;

const std::string kFixtures = RDMASCOPE_FIXTURES;

std::string Json(const ProfileData& data) {
  std::ostringstream out;
  WriteProfileJson(data, out);
  return out.str();
}

size_t Occurrences(const std::string& text, const std::string& what) {
  size_t count = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) {
    ++count;
  }
  return count;
}

TEST(Log2Histogram, QuantileIsTheUpperBoundOfTheBucketHoldingIt) {
  // Bucket b counts values in (2^(b-1), 2^b]; bucket 0 values 0 and 1.
  Log2Histogram histogram{.buckets = {1, 0, 0, 96, 0, 3}, .count = 100, .sum = 0};
  EXPECT_EQ(histogram.Quantile(0.0), 1.0);   // the smallest value: bucket 0
  EXPECT_EQ(histogram.Quantile(0.01), 1.0);  // rank 1
  EXPECT_EQ(histogram.Quantile(0.02), 8.0);  // rank 2: bucket 3, (4, 8]
  EXPECT_EQ(histogram.Quantile(0.5), 8.0);
  EXPECT_EQ(histogram.Quantile(0.97), 8.0);  // rank 97: the last of bucket 3
  EXPECT_EQ(histogram.Quantile(0.98), 32.0);
  EXPECT_EQ(histogram.Quantile(1.0), 32.0);
}

// Issue 26 item 6: the RTT from post-to-poll latencies was the bucket's upper bound, up to 2x
// the truth; interpolated as histogram_quantile does it is within the bucket, unbiased.
TEST(Log2Histogram, InterpolatedQuantileLiesInsideTheBucket) {
  Log2Histogram histogram{.buckets = {1, 0, 0, 96, 0, 3}, .count = 100, .sum = 0};
  EXPECT_DOUBLE_EQ(*histogram.Interpolated(0.0), 0.0);
  EXPECT_DOUBLE_EQ(*histogram.Interpolated(0.01), 1.0);               // rank 1: all of bucket 0
  EXPECT_DOUBLE_EQ(*histogram.Interpolated(0.5), 4 + 4 * 49.0 / 96);  // rank 50 in (4, 8]
  EXPECT_DOUBLE_EQ(*histogram.Interpolated(0.97), 8.0);
  EXPECT_DOUBLE_EQ(*histogram.Interpolated(0.98), 16 + 16 / 3.0);  // rank 98 in (16, 32]
  EXPECT_DOUBLE_EQ(*histogram.Interpolated(1.0), 32.0);
  // Latencies spread evenly over (4096, 8192] ns: the median is about 6 us, not 8.
  Log2Histogram latency{.buckets = std::vector<uint64_t>(14, 0), .count = 1000, .sum = 0};
  latency.buckets[13] = 1000;
  EXPECT_DOUBLE_EQ(*latency.Interpolated(0.5), 6144.0);
  EXPECT_DOUBLE_EQ(*latency.Quantile(0.5), 8192.0);
  EXPECT_EQ(Log2Histogram{}.Interpolated(0.5), std::nullopt);
  EXPECT_EQ(histogram.Interpolated(1.5), std::nullopt);
  EXPECT_EQ(histogram.Interpolated(std::nan("")), std::nullopt);
}

TEST(Log2Histogram, QuantileOfNothingIsNotMeasured) {
  EXPECT_EQ(Log2Histogram{}.Quantile(0.5), std::nullopt);
  EXPECT_EQ((Log2Histogram{.buckets = {0, 0, 0}, .count = 0, .sum = 0}).Quantile(0.5),
            std::nullopt);
  Log2Histogram histogram{.buckets = {0, 2}, .count = 2, .sum = 4};
  EXPECT_EQ(histogram.Quantile(-0.1), std::nullopt);
  EXPECT_EQ(histogram.Quantile(1.5), std::nullopt);
  EXPECT_EQ(histogram.Quantile(std::nan("")), std::nullopt);
}

TEST(ProfileJson, MatchesTheGoldenFile) {
  const std::string json = Json(SampleProfile());
  const std::string golden = kFixtures + "/golden/profile.json";
  if (const char* update = std::getenv("RDMASCOPE_UPDATE_GOLDEN"); update && *update == '1') {
    std::ofstream(golden) << json;
  }
  std::ifstream in(golden);
  std::stringstream expected;
  expected << in.rdbuf();
  EXPECT_EQ(json, expected.str()) << "RDMASCOPE_UPDATE_GOLDEN=1 rewrites " << golden;
}

TEST(ProfileJson, HoldsEveryFigureAndNullForWhatWasNotMeasured) {
  const auto doc = nlohmann::json::parse(Json(SampleProfile()));
  EXPECT_EQ(doc["schema_version"], kProfileSchemaVersion);
  EXPECT_EQ(doc["pid"], 4242);
  EXPECT_EQ(doc["mr"]["registrations"], 105);
  EXPECT_EQ(doc["mr"]["outstanding_bytes"], 13 * kMiB + 4096 + 8192);
  EXPECT_EQ(doc["mr"]["size_bytes"]["p50"], 4.0 * kMiB);
  // Non-empty buckets only: 4 KiB, 8 KiB, 4 MiB.
  ASSERT_EQ(doc["mr"]["size_bytes"]["buckets"].size(), 3U);
  EXPECT_EQ(doc["mr"]["size_bytes"]["buckets"][0]["le"], 4096);
  EXPECT_EQ(doc["mr"]["size_bytes"]["buckets"][2]["le"], 4 * kMiB);
  EXPECT_EQ(doc["mr"]["size_bytes"]["buckets"][2]["count"], 103);
  EXPECT_EQ(doc["stacks"][0]["frames"][0]["function"], "leak_buffers");
  EXPECT_EQ(doc["stacks"][0]["frames"][0]["offset"], 0x2c);
  EXPECT_EQ(doc["queues"][1]["peak_occupancy"], nullptr);  // QP: no occupancy
  EXPECT_EQ(doc["queues"][0]["feeding_wrs"], 384);
  EXPECT_EQ(doc["messages"]["send_bytes"]["p99"], 2048.0);
  EXPECT_EQ(doc["messages"]["recv_bytes"]["p50"], nullptr);  // measured, none seen
  EXPECT_EQ(doc["messages"]["recv_bytes"]["count"], 0);
  EXPECT_EQ(doc["perf"]["ipc"], nullptr);
  EXPECT_EQ(doc["perf"]["llc_miss_ratio"], 0.125);
  EXPECT_EQ(doc["timelines"][1]["limit"], 256.0);
  EXPECT_EQ(doc["timelines"][0]["limit"], nullptr);
  EXPECT_EQ(doc["timelines"][2]["points"][1][1], 4.3e8);
  EXPECT_EQ(doc["advice"][0]["id"], "queues.cq_undersized");
  EXPECT_EQ(doc["advice"][0]["severity"], "warn");
  EXPECT_EQ(doc["advice"][0]["scope"]["cq"], "3");
  // The application's bytes that are not UTF-8 are replaced, not a thrown exception.
  EXPECT_EQ(doc["comm"], "<script>alert(1)</script>\xef\xbf\xbd'\"&");
}

TEST(ProfileJson, SourcesThatWereNotActiveAreNullNotZero) {
  ProfileData data = SampleProfile();
  data.probes_active = false;
  data.preload_active = false;
  data.exit_status = std::nullopt;
  auto doc = nlohmann::json::parse(Json(data));
  for (const char* field : {"registrations", "deregistrations", "failures", "registered_bytes",
                            "aligned_2mib", "churn_registrations", "access_flags", "size_bytes",
                            "latency_ns", "outstanding_regions", "outstanding_bytes"}) {
    EXPECT_EQ(doc["mr"][field], nullptr) << field;
  }
  for (const char* field : {"send_bytes", "recv_bytes", "completion_latency_ns"}) {
    EXPECT_EQ(doc["messages"][field], nullptr) << field;
  }
  EXPECT_EQ(doc["exit_status"], nullptr);
  // --pid without probes: restrack still counts what is registered.
  data.mr.from_restrack_only = true;
  doc = nlohmann::json::parse(Json(data));
  EXPECT_EQ(doc["mr"]["outstanding_regions"], 6);
  EXPECT_EQ(doc["mr"]["registrations"], nullptr);
}

TEST(ProfileJson, FieldsTheSessionCouldNotMeasureAreNull) {
  ProfileData data = SampleProfile();
  data.mr.unmeasured = {"aligned_2mib",        "aligned_4kib", "unaligned",
                        "churn_registrations", "churn_bytes",  "access_flags"};
  data.mr.not_hugepage_aligned_bytes = std::nullopt;
  const auto doc = nlohmann::json::parse(Json(data));
  for (const char* field : {"aligned_2mib", "aligned_4kib", "unaligned", "churn_registrations",
                            "churn_bytes", "access_flags", "not_hugepage_aligned_bytes"}) {
    EXPECT_EQ(doc["mr"][field], nullptr) << field;
  }
  EXPECT_EQ(doc["mr"]["registrations"], 105);
  EXPECT_EQ(doc["mr"]["length_not_page_multiple"], 0);  // measured: a real 0
  EXPECT_EQ(doc["mr"]["access_flags_seen"][1], "REMOTE_READ");
  EXPECT_EQ(doc["mr"]["unmeasured"].size(), 6U);
  const std::string html = HtmlReport(data);
  EXPECT_NE(html.find("<th>same range registered again</th><td class=\"num\"><span "
                      "class=\"missing\">not measured</span>"),
            std::string::npos);
  EXPECT_NE(html.find("<th>access flags</th><td class=\"num\">LOCAL_WRITE, REMOTE_READ</td>"),
            std::string::npos);
}

// "outermost;...;innermost value" lines -> value per line, and the sum.
std::map<std::string, uint64_t> ParseFolded(const std::string& folded, uint64_t& sum) {
  std::map<std::string, uint64_t> lines;
  std::istringstream in(folded);
  std::string line;
  sum = 0;
  while (std::getline(in, line)) {
    const size_t space = line.rfind(' ');
    EXPECT_NE(space, std::string::npos) << line;
    const uint64_t value = std::stoull(line.substr(space + 1));
    EXPECT_GT(value, 0U) << line;
    EXPECT_TRUE(lines.emplace(line.substr(0, space), value).second) << "twice: " << line;
    sum += value;
  }
  return lines;
}

TEST(FoldedStacks, SumsEqualTheTotals) {
  const ProfileData data = SampleProfile();
  const std::pair<FoldedValue, uint64_t> cases[] = {
      {FoldedValue::kOutstandingBytes, data.mr.outstanding_bytes},
      {FoldedValue::kRegisteredBytes, data.mr.registered_bytes},
      {FoldedValue::kOutstandingRegions, data.mr.outstanding_regions},
      {FoldedValue::kRegistrations, data.mr.registrations}};
  for (const auto& [value, total] : cases) {
    uint64_t sum = 0;
    ParseFolded(FoldedStacks(data, value), sum);
    EXPECT_EQ(sum, total) << FoldedValueName(value);
  }
}

TEST(FoldedStacks, OutermostFirstOneLinePerStackWithTheRemainder) {
  uint64_t sum = 0;
  const auto lines =
      ParseFolded(FoldedStacks(SampleProfile(), FoldedValue::kOutstandingBytes), sum);
  EXPECT_EQ(lines.at("__libc_start_call_main;main;leak_buffers"), 12 * kMiB);
  EXPECT_EQ(lines.at("main;[libfoo.so.1]"), 8192U);  // an unknown function named by module
  EXPECT_EQ(lines.at("[no call stack]"), kMiB);      // in the totals, in no recorded stack
  EXPECT_FALSE(lines.contains("start_thread;worker_loop;post_buffers"));  // 0: left out
  // ';' and the newline of the hostile name cannot split the stack or the line; the byte
  // that is not UTF-8 is U+FFFD.
  EXPECT_EQ(lines.at("main;<img src=x onerror=alert(2)>_evil_\"q\"\xef\xbf\xbd"), 4096U);
  EXPECT_EQ(lines.size(), 4U);
}

TEST(FoldedStacks, NoRemainderWhenTheStacksHoldEverything) {
  ProfileData data = SampleProfile();
  data.mr.outstanding_bytes -= kMiB;
  data.mr.outstanding_regions -= 1;
  const std::string folded = FoldedStacks(data, FoldedValue::kOutstandingBytes);
  EXPECT_EQ(folded.find("[no call stack]"), std::string::npos) << folded;
}

TEST(HtmlReport, EscapesEveryStringOfTheProcess) {
  const std::string html = HtmlReport(SampleProfile());
  // Nothing the process named became markup: the only tags are the report's own.
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_EQ(html.find("<b>"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;\xef\xbf\xbd&#39;&quot;&amp;"),
            std::string::npos);
  EXPECT_NE(html.find("&lt;img src=x onerror=alert(2)&gt;;evil"), std::string::npos);
  EXPECT_NE(html.find("lib&quot;odd&#39;.so"), std::string::npos);  // quotes in attributes too
  EXPECT_NE(html.find("&lt;b&gt;bold&lt;/b&gt;"), std::string::npos);
  EXPECT_NE(html.find("&lt;see docs&gt;"), std::string::npos);
  EXPECT_NE(html.find("pod <code>llm-0 &lt;script&gt;</code>"), std::string::npos)
      << "the workload is shown, escaped";
  // Every byte that is not UTF-8 was replaced: the document is valid UTF-8.
  EXPECT_EQ(html.find('\xfe'), std::string::npos);
  EXPECT_EQ(html.find('\xff'), std::string::npos);
}

TEST(HtmlReport, IsSelfContainedWithThePlots) {
  const std::string html = HtmlReport(SampleProfile());
  EXPECT_TRUE(html.starts_with("<!DOCTYPE html>"));
  // No script, no fetch: nothing external is referenced.
  for (const char* external : {"<script", "<link", "<iframe", "<object", "@import", "url("}) {
    EXPECT_EQ(html.find(external), std::string::npos) << external;
  }
  EXPECT_FALSE(std::regex_search(html, std::regex(R"(<[^>]*\s(src|href)\s*=)")));
  EXPECT_NE(html.find("Content-Security-Policy"), std::string::npos);
  // Two flame graphs (outstanding, registered) and the three timelines.
  EXPECT_EQ(Occurrences(html, "<svg class=\"flame\""), 2U);
  EXPECT_EQ(Occurrences(html, "<svg class=\"plot\""), 3U);
  // The CQ plot draws its capacity as a limit line.
  EXPECT_EQ(Occurrences(html, "<line class=\"limit\""), 1U);
  EXPECT_NE(html.find("limit 256"), std::string::npos);
  // The leak is named in the graph, with its share, and in the table.
  EXPECT_NE(html.find("leak_buffers (mr_leaker+0x2c)\n12 MiB (92.22%)"), std::string::npos);
  EXPECT_NE(html.find("<code>leak_buffers (mr_leaker+0x2c)</code>"), std::string::npos);
  // What was not measured says so.
  EXPECT_NE(html.find("<th>instructions per cycle</th><td class=\"num\"><span "
                      "class=\"missing\">not measured</span>"),
            std::string::npos);
}

// The process's own perf counters: an event it could not count is unavailable with the
// reason, never a 0 among the counts.
TEST(ProfileJson, UnavailablePerfEventsCarryTheirReason) {
  ProfileData data = SampleProfile();
  data.perf.process_own = true;
  data.perf.unavailable = {{"cycles", "not supported by this CPU or kernel"}};
  const auto doc = nlohmann::json::parse(Json(data));
  EXPECT_EQ(doc["perf"]["events_scope"], "process");
  EXPECT_FALSE(doc["perf"]["events"].contains("cycles"));
  EXPECT_EQ(doc["perf"]["unavailable"]["cycles"], "not supported by this CPU or kernel");
  const std::string html = HtmlReport(data);
  EXPECT_NE(html.find("<th>cycles</th><td class=\"num\"><span class=\"missing\">unavailable: "
                      "not supported by this CPU or kernel</span>"),
            std::string::npos);
  EXPECT_NE(html.find("<th>task-clock (the process)</th>"), std::string::npos);
}

// The per-registration figures of the MR probe: three alignment classes, churn, flag counts.
TEST(HtmlReport, ShowsRegistrationDetails) {
  const std::string html = HtmlReport(SampleProfile());
  EXPECT_NE(html.find("<th>aligned to 2 MiB / 4 KiB only / unaligned</th><td class=\"num\">"
                      "103 / 2 / 0 of 105</td>"),
            std::string::npos);
  EXPECT_NE(html.find("<th>same range registered again</th><td class=\"num\">99 times, "),
            std::string::npos);
  EXPECT_NE(html.find("<th>access flags</th><td class=\"num\">LOCAL_WRITE 105, REMOTE_READ 3"),
            std::string::npos);
}

TEST(HtmlReport, MissingSourcesAreNotMeasuredNotZero) {
  ProfileData data = SampleProfile();
  data.probes_active = false;
  data.preload_active = false;
  data.timelines.clear();
  data.queues.clear();
  const std::string html = HtmlReport(data);
  EXPECT_NE(html.find("<th>registrations</th><td class=\"num\"><span class=\"missing\">not "
                      "measured</span>"),
            std::string::npos);
  EXPECT_NE(html.find("<th>send message size</th><td class=\"num\"><span "
                      "class=\"missing\">not measured</span>"),
            std::string::npos);
  EXPECT_EQ(Occurrences(html, "<svg class=\"plot\""), 0U);
  const std::regex missing_plot(
      "Outstanding MR bytes over time</h2>\n<p><span "
      "class=\"missing\">not measured");
  EXPECT_TRUE(std::regex_search(html, missing_plot));
}

}  // namespace
}  // namespace rdmascope::profile
