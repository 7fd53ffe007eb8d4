// bpf/verbs.json (collectors/verbs_snapshot_json.h): the verbs collector's reading round-trips
// exactly, a walk error replays as the collection's failure, and the file is hostile input.
#include "collectors/verbs_snapshot_json.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "collectors/verbs.h"
#include "unit/fixture_tree.h"

namespace rdmascope {
namespace {

using nlohmann::json;

VerbsProbeReading Reading() {
  VerbsProbeReading reading{.attached = true, .links = 22};
  VerbsSnapshot& s = reading.snapshot;
  s.cqs.push_back({.pid = 10,
                   .comm = "ib_write_bw",
                   .device = "rxe0",
                   .handle = 3,
                   .requested_entries = 128,
                   .entries = 255,
                   .feeding_wrs = 256,
                   .feeding_qps = 1});
  s.srqs.push_back({.pid = 10,
                    .comm = "ib_write_bw",
                    .device = "rxe0",
                    .handle = 1,
                    .max_wr = 512,
                    .limit = 16,
                    .limit_events = 2});
  s.qps.push_back({.pid = 10,
                   .comm = "ib_write_bw",
                   .device = "rxe0",
                   .qp_num = 17,
                   .handle = 4,
                   .type = 2,
                   .max_send_wr = 128,
                   .max_recv_wr = 0,
                   .max_send_sge = 1,
                   .max_recv_sge = 1,
                   .srq = true});
  VerbsProcess p{.pid = 10, .comm = "ib_write_bw", .qps = 1};
  p.async_events[0] = 1;   // CQ_ERR
  p.async_events[31] = 4;  // OTHER
  p.rc_send_wrs["rxe0"] = {.min = 64, .max = 128, .total = 192};
  s.processes.push_back(p);
  s.lost_calls = 1;
  s.lost_objects = 2;
  s.lost_processes = 3;
  return reading;
}

std::string Mapped(const VerbsProbeReading& reading) {
  MetricSet out;
  MapVerbsReading(reading, 1000, out);
  return testing::Serialise(out.Take());
}

std::string Refusal(const json& body) {
  const auto reading = VerbsReadingFromJson(body.dump());
  return reading ? "accepted" : reading.error();
}

TEST(VerbsSnapshotJson, RoundTripGivesTheSameSeries) {
  const VerbsProbeReading live = Reading();
  const std::string text = VerbsReadingToJson(live);
  const auto replayed = VerbsReadingFromJson(text);
  ASSERT_TRUE(replayed.has_value()) << replayed.error();
  EXPECT_EQ(VerbsReadingToJson(*replayed), text);
  EXPECT_EQ(Mapped(*replayed), Mapped(live));
  EXPECT_TRUE(replayed->snapshot.qps.at(0).srq);
  EXPECT_NE(Mapped(live).find("rdma_cq_feeding_wrs"), std::string::npos);
}

TEST(VerbsSnapshotJson, NotAttachedAndWalkErrorsReplayAsLive) {
  const VerbsProbeReading off{.error = "no libibverbs.so.1 to attach to"};
  const auto replayed_off = VerbsReadingFromJson(VerbsReadingToJson(off));
  ASSERT_TRUE(replayed_off.has_value()) << replayed_off.error();
  EXPECT_EQ(replayed_off->error, off.error);
  EXPECT_EQ(Mapped(*replayed_off), Mapped(off));
  VerbsProbeReading cut = Reading();
  cut.snapshot = {.walk_error = "cqs map: EINTR"};
  const auto replayed_cut = VerbsReadingFromJson(VerbsReadingToJson(cut));
  ASSERT_TRUE(replayed_cut.has_value()) << replayed_cut.error();
  MetricSet out;
  EXPECT_THROW(MapVerbsReading(*replayed_cut, 1000, out), std::runtime_error);
}

TEST(VerbsSnapshotJson, HostileFieldsAreRefused) {
  const json full = json::parse(VerbsReadingToJson(Reading()));
  for (const auto& [key, value] : full["snapshot"].items()) {
    json body = full;
    body["snapshot"].erase(key);
    EXPECT_EQ(Refusal(body), key + ": missing");
  }
  for (const auto& [key, value] : full["snapshot"]["cqs"][0].items()) {
    json body = full;
    body["snapshot"]["cqs"][0].erase(key);
    EXPECT_EQ(Refusal(body), key + ": missing");
  }
  json body = full;
  body["snapshot"]["cqs"][0]["entries"] = -1;
  EXPECT_EQ(Refusal(body), "entries: not an integer from 0 to 2^64-1");
  body = full;
  body["snapshot"]["cqs"][0]["entries"] = 1ULL << 32;
  EXPECT_EQ(Refusal(body), "entries: above 2^32-1");
  body = full;
  body["snapshot"]["processes"][0]["async_events"] = json::array({1});
  EXPECT_EQ(Refusal(body), "async_events: not 32 counts");
  body = full;
  body["snapshot"]["processes"][0]["rc_send_wrs"]["rxe0"]["total"] = 1e30;
  EXPECT_EQ(Refusal(body), "total: not an integer from 0 to 2^64-1");
  body = full;
  body["snapshot"]["walk_error"] = 5;
  EXPECT_EQ(Refusal(body), "walk_error: not a string of at most 4096 bytes");
  body = full;
  body["probe"] = "mr";
  EXPECT_EQ(Refusal(body), "probe: not verbs");
  body = full;
  body["unknown"] = {{"a", 1}};
  EXPECT_EQ(Refusal(body), "accepted");
}

}  // namespace
}  // namespace rdmascope
