// The running exporter's debug answers in a capture (cli/capture_exporter.h): a real HTTP
// server (http/server.h, serve's) answering /debug/mr/stacks and /debug/workloads is recorded
// into a sample, then served back byte for byte as JSON by serve --replay's handler; what no
// exporter answered, or a hostile file, is a clear error, never an answer made up.
#include "cli/capture_exporter.h"

#include <gtest/gtest.h>

#include <fstream>

#include "core/capture.h"
#include "core/capture_index.h"
#include "core/collector_runner.h"
#include "http/handler.h"
#include "http/server.h"
#include "unit/fixture_tree.h"
#include "unit/installed_session.h"

namespace rdmascope {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

std::shared_ptr<CollectorRunner> EmptyRunner() {
  return std::make_shared<CollectorRunner>(std::vector<NamedCollector>{}, BuildInfo{"0.1.0", "abc"},
                                           "/proc");
}

// What a serve with the mr collector answers; its workloads answer differs per sample.
constexpr std::string_view kStacks =
    "{\n  \"processes\": [{\"pid\": 42, \"comm\": \"ib_write_bw\", \"regions\": 3}]\n}\n";

using Installed = testing::InstalledSession;

HttpReply Get(const HttpHandler& handler, std::string_view path) {
  return handler.Handle({.method = "GET", .path = path, .accept = "application/json"});
}

std::string ContentType(const HttpReply& reply) {
  for (const auto& [name, value] : reply.headers) {
    if (name == "Content-Type") return value;
  }
  return "";
}

// Records `samples` samples of what a live server answers (workloads: "sample N"), with
// `stacks` false: that server has no /debug/mr/stacks (its mr collector is off).
fs::path Record(const fs::path& dir, int samples, bool stacks) {
  int sample = 0;
  DebugRoutes live;
  if (stacks) live["/debug/mr/stacks"] = [](std::string_view) { return std::string(kStacks); };
  live["/debug/workloads"] = [&sample](std::string_view) {
    return "{\"sample\": " + std::to_string(sample) + "}\n";
  };
  HttpServer server({.listen_address = "127.0.0.1:0", .threads = 1}, EmptyRunner(), live);
  auto writer = capture::Writer::Create(dir, false).value();
  const CaptureExporterOptions options{.exporter =
                                           "http://127.0.0.1:" + std::to_string(server.port())};
  for (sample = 1; sample <= samples; ++sample) {
    EXPECT_TRUE(writer->BeginSample(static_cast<size_t>(sample)).has_value());
    RecordExporterAnswers(options, *writer, /*redactor=*/nullptr);
    EXPECT_TRUE(writer->CommitSample().has_value());
  }
  EXPECT_TRUE(writer->WriteIndex("test", {}).has_value());
  return dir;
}

TEST(CaptureExporter, AnswersRecordedThenServedBackByteForByte) {
  TempDir out;
  const fs::path dir = Record(out.path() / "cap", 2, /*stacks=*/true);
  Installed session(capture::Session::Replaying(capture::Layout("/sys", "/proc"),
                                                capture::Reader::Open(dir).value()));
  DebugRoutes routes;
  AddCapturedExporterRoutes(routes);
  const HttpHandler handler(EmptyRunner(), "/metrics", routes);
  std::vector<std::string> workloads;
  for (int scrape = 0; scrape < 3; ++scrape) {
    session->NextSample();
    const HttpReply stacks = Get(handler, "/debug/mr/stacks");
    EXPECT_EQ(stacks.status, 200U);
    EXPECT_EQ(stacks.body, kStacks);
    EXPECT_EQ(ContentType(stacks), "application/json");
    workloads.push_back(Get(handler, "/debug/workloads").body);
  }
  // One sample per collection, the last repeating, as /metrics.
  EXPECT_EQ(workloads, (std::vector<std::string>{"{\"sample\": 1}\n", "{\"sample\": 2}\n",
                                                 "{\"sample\": 2}\n"}));
}

TEST(CaptureExporter, ACollectorsOwnRouteIsKeptAndNoneWithoutAnAnswer) {
  TempDir out;
  const fs::path dir = Record(out.path() / "cap", 1, /*stacks=*/false);
  Installed session(capture::Session::Replaying(capture::Layout("/sys", "/proc"),
                                                capture::Reader::Open(dir).value()));
  DebugRoutes routes;
  routes["/debug/workloads"] = [](std::string_view) { return std::string("{\"own\": 1}"); };
  AddCapturedExporterRoutes(routes);
  EXPECT_EQ(routes.at("/debug/workloads")(""), "{\"own\": 1}");
  // No sample holds /debug/mr/stacks: no route, a 404 and no link, rather than a 500.
  EXPECT_FALSE(routes.contains("/debug/mr/stacks"));
}

TEST(CaptureExporter, WhatNoExporterAnsweredIsNotRecordedAndSaysWhy) {
  TempDir out;
  const fs::path dir = Record(out.path() / "cap", 1, /*stacks=*/false);
  const auto reader = capture::Reader::Open(dir).value();
  EXPECT_NE(reader.index_text().find("\"exporter /debug/mr/stacks\""), std::string::npos);
  EXPECT_NE(reader.index_text().find("HTTP 404"), std::string::npos) << reader.index_text();
  EXPECT_FALSE(fs::exists(dir / "samples/0001/exporter/debug/mr/stacks.json"));
  EXPECT_TRUE(fs::exists(dir / "samples/0001/exporter/debug/workloads.json"));

  // Nobody listening: both routes not recorded, with the address asked.
  TempDir none;
  auto writer = capture::Writer::Create(none.path() / "cap", false).value();
  ASSERT_TRUE(writer->BeginSample(1).has_value());
  RecordExporterAnswers({.exporter = "http://127.0.0.1:1", .timeout = std::chrono::seconds(2)},
                        *writer, nullptr);
  RecordExporterAnswers({.exporter = "none"}, *writer, nullptr);
  RecordExporterAnswers({.exporter = "ftp://x"}, *writer, nullptr);
  ASSERT_TRUE(writer->CommitSample().has_value());
  const auto missed = writer->missed();
  EXPECT_EQ(missed.size(), 6U);
  for (const capture::NotRecorded& entry : missed) {
    EXPECT_TRUE(entry.source.starts_with("exporter /debug/")) << entry.source;
    EXPECT_FALSE(entry.reason.empty());
  }
}

TEST(CaptureExporter, MissingOrHostileFileIsAClearErrorNotAnAnswer) {
  TempDir out;
  const fs::path dir = Record(out.path() / "cap", 2, /*stacks=*/true);
  fs::remove(dir / "samples/0002/exporter/debug/mr/stacks.json");
  std::ofstream(dir / "samples/0001/exporter/debug/workloads.json") << "{\"cut\": ";
  Installed session(capture::Session::Replaying(capture::Layout("/sys", "/proc"),
                                                capture::Reader::Open(dir).value()));
  DebugRoutes routes;
  AddCapturedExporterRoutes(routes);
  const HttpHandler handler(EmptyRunner(), "/metrics", routes);
  session->NextSample();
  const HttpReply workloads = Get(handler, "/debug/workloads");
  EXPECT_EQ(workloads.status, 500U);
  EXPECT_NE(workloads.body.find("not JSON"), std::string::npos) << workloads.body;
  EXPECT_EQ(Get(handler, "/debug/mr/stacks").body, kStacks);
  session->NextSample();
  const HttpReply stacks = Get(handler, "/debug/mr/stacks");
  EXPECT_EQ(stacks.status, 500U);
  EXPECT_NE(stacks.body.find("sample 2 has no exporter/debug/mr/stacks.json (ENOENT)"),
            std::string::npos)
      << stacks.body;
}

}  // namespace
}  // namespace rdmascope
