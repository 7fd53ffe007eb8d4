// bpf/mr.json (collectors/mr_snapshot_json.h): what the mr collector maps round-trips through
// the file exactly, and the file is hostile input: every field it needs is checked, a value
// out of its range (negative, past 2^64, past its width), a file too large or too deep, a
// newer version refuse it with a message naming the field; unknown fields are ignored.
#include "collectors/mr_snapshot_json.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "collectors/mr.h"
#include "collectors/probe_json.h"
#include "unit/fixture_tree.h"

namespace rdmascope {
namespace {

using nlohmann::json;

// Every field different from its default, so that a field the file dropped shows.
MrProbeReading Reading() {
  MrProbeReading reading{.attached = true, .kernel_path = true, .links = 14, .seeded_regions = 2};
  MrSnapshot& s = reading.snapshot;
  MrProcess p{.pid = 4242,
              .comm = "trainer",
              .registrations = 10,
              .deregistrations = 4,
              .failures = 1,
              .lost_regions = 5,
              .outstanding_regions = 6,
              .outstanding_bytes = -3,  // a gauge may dip below 0 (mr_probe.h)
              .outstanding_implicit_odp = 1,
              .access_seen = 0x7 | (1ULL << 40),
              .not_huge_aligned_bytes = 4096,
              .length_not_page_multiple = 1,
              .aligned_huge = 9,
              .aligned_page = 3,
              .unaligned = 1,
              .reregistrations = 2,
              .reregistered_bytes = 2 * 2097152,
              .access_registrations = {10, 10, 4},
              .leak_suspect_regions = 2,
              .leak_suspect_bytes = UINT64_MAX};
  s.processes.push_back(p);
  p.pid = 7;
  p.comm = "trainer";  // a second process of that comm: by_comm sums them
  p.outstanding_bytes = 1LL << 40;
  s.processes.push_back(p);
  MrHistograms h;
  h.latency.assign(32, 0);
  h.size.assign(48, 0);
  h.latency[12] = 3;
  h.size[21] = 9;
  h.latency_sum_ns = 9000;
  h.size_sum_bytes = 9 * 2097152;
  s.histograms["trainer"] = h;
  s.released["old-job"] = {.regions = 3, .bytes = 3 * 65536};
  s.released_at_exec["launcher"] = {.regions = 2, .bytes = 8192};
  MrProcess retired{.comm = "gone", .registrations = 99, .lost_regions = 4};
  s.retired_counters["gone"] = retired;
  s.lost_calls = 1;
  s.lost_processes = 2;
  s.lost_exits = 3;
  s.stale_calls = 4;
  s.stack_bytes = 5;
  s.stack_sites = 6;
  s.stacks_dropped_ring = 7;
  s.stacks_dropped_memory = 8;
  s.stacks_dropped_gone = 9;
  s.stacks_copy_failed = 10;
  s.stack_samples = 11;
  s.stack_samples_deduplicated = 12;
  s.stacks_unwound = 13;
  s.stack_unwind_seconds = 0.25;
  s.unwind_worker = true;
  s.unwind_worker_restarts = {{"deadline", 1}, {"died", 2}};
  s.unwind_worker_sandbox = {{"seccomp", true}, {"uid", false}};
  s.unwind_worker_starts = 3;
  return reading;
}

std::string Mapped(const MrProbeReading& reading, bool by_comm) {
  MetricSet out;
  MapMrReading(reading, {}, 1 << 30, by_comm, out);
  return testing::Serialise(out.Take());
}

// The file's refusal, or "accepted".
std::string Error(std::string_view text) {
  const auto reading = MrReadingFromJson(text);
  return reading ? "accepted" : reading.error();
}

std::string Refusal(const json& body) { return Error(body.dump()); }

TEST(MrSnapshotJson, RoundTripGivesTheSameSeries) {
  const MrProbeReading live = Reading();
  const std::string text = MrReadingToJson(live);
  const auto replayed = MrReadingFromJson(text);
  ASSERT_TRUE(replayed.has_value()) << replayed.error();
  // Every field: written again, the file is the same bytes.
  EXPECT_EQ(MrReadingToJson(*replayed), text);
  EXPECT_EQ(replayed->seeded_regions, 2U);
  EXPECT_EQ(replayed->snapshot.processes[0].leak_suspect_bytes, UINT64_MAX);
  EXPECT_EQ(replayed->snapshot.processes[0].outstanding_bytes, -3);
  for (const bool by_comm : {false, true}) {
    EXPECT_EQ(Mapped(*replayed, by_comm), Mapped(live, by_comm));
  }
  EXPECT_NE(Mapped(live, false).find("rdmascope_probe_attached{probe=\"mr_kernel\"} 1"),
            std::string::npos);
}

TEST(MrSnapshotJson, NotAttachedKeepsTheReason) {
  const MrProbeReading live{.error = "loading the BPF object: Operation not permitted"};
  const auto replayed = MrReadingFromJson(MrReadingToJson(live));
  ASSERT_TRUE(replayed.has_value()) << replayed.error();
  EXPECT_FALSE(replayed->attached);
  EXPECT_EQ(replayed->error, live.error);
  EXPECT_EQ(Mapped(*replayed, false), Mapped(live, false));
  // Not attached without a reason is not a reading the collector makes.
  json body = json::parse(MrReadingToJson(live));
  body.erase("error");
  EXPECT_EQ(Refusal(body), "error: missing");
}

TEST(MrSnapshotJson, AFailedCollectionReplaysAsThatFailure) {
  MrProbeReading live{.attached = true, .failed = "restrack dump: EAGAIN"};
  const auto replayed = MrReadingFromJson(MrReadingToJson(live));
  ASSERT_TRUE(replayed.has_value()) << replayed.error();
  EXPECT_EQ(replayed->failed, "restrack dump: EAGAIN");
}

TEST(MrSnapshotJson, EveryFieldIsRequired) {
  const json full = json::parse(MrReadingToJson(Reading()));
  // Each member of the file, of its snapshot and of a process: without it, refused (a counter
  // the file lacks is never served as 0).
  for (const auto& [key, value] : full.items()) {
    json body = full;
    body.erase(key);
    EXPECT_NE(Refusal(body), "accepted") << key;
  }
  for (const auto& [key, value] : full["snapshot"].items()) {
    json body = full;
    body["snapshot"].erase(key);
    EXPECT_NE(Refusal(body), "accepted") << key;
  }
  for (const auto& [key, value] : full["snapshot"]["processes"][0].items()) {
    json body = full;
    body["snapshot"]["processes"][0].erase(key);
    EXPECT_EQ(Refusal(body), key + ": missing");
  }
  json body = full;
  body["snapshot"]["histograms"]["trainer"].erase("size");
  EXPECT_EQ(Refusal(body), "size: missing");
}

TEST(MrSnapshotJson, UnknownFieldsAreIgnored) {
  json body = json::parse(MrReadingToJson(Reading()));
  body["from_a_later_rdmascope"] = {1, 2};
  body["snapshot"]["processes"][0]["numa"] = "x";
  EXPECT_EQ(Refusal(body), "accepted");
}

TEST(MrSnapshotJson, NumbersOutOfRangeAreRefused) {
  const json full = json::parse(MrReadingToJson(Reading()));
  const auto with = [&full](const std::string& key, const json& value) {
    json body = full;
    body["snapshot"]["processes"][0][key] = value;
    return Refusal(body);
  };
  // Negative, fractional, past 2^64 - 1 (parsed as a float), text, null.
  EXPECT_EQ(with("registrations", -1), "registrations: not an integer from 0 to 2^64-1");
  EXPECT_EQ(with("registrations", 1.5), "registrations: not an integer from 0 to 2^64-1");
  EXPECT_EQ(Refusal(json::parse(std::string(R"({"version":1,"probe":"mr","attached":true,)") +
                                R"("kernel_path":false,"links":18446744073709551616})")),
            "links: not an integer from 0 to 2^64-1");
  EXPECT_EQ(with("registrations", "5"), "registrations: not an integer from 0 to 2^64-1");
  EXPECT_EQ(with("registrations", nullptr), "registrations: not an integer from 0 to 2^64-1");
  // Past its width.
  EXPECT_EQ(with("pid", 4294967296ULL), "pid: above 2^32-1");
  // The signed gauges: summed by comm, they must not overflow.
  EXPECT_EQ(with("outstanding_bytes", INT64_MIN), "outstanding_bytes: out of range");
  EXPECT_EQ(with("outstanding_bytes", (1ULL << 46) + 1), "outstanding_bytes: out of range");
  EXPECT_EQ(with("outstanding_regions", UINT64_MAX), "outstanding_regions: out of range");
  EXPECT_EQ(with("outstanding_bytes", -(1LL << 46)), "accepted");
  EXPECT_EQ(with("access_registrations", json::array({1, 2})),
            "access_registrations: not 32 counts");
  EXPECT_EQ(with("comm", std::string(300, 'x')), "comm: longer than 256 bytes");
  json body = full;
  body["snapshot"]["stack_unwind_seconds"] = -0.5;
  EXPECT_EQ(Refusal(body), "stack_unwind_seconds: not a finite number >= 0");
  body = full;
  body["snapshot"]["histograms"]["trainer"]["latency"] = json(std::vector<int>(65, 1));
  EXPECT_EQ(Refusal(body), "latency: more than 64 buckets");
  body = full;
  body["snapshot"]["globals_known"] = 1;
  EXPECT_EQ(Refusal(body), "globals_known: not true or false");
}

TEST(MrSnapshotJson, MalformedFilesAreRefused) {
  EXPECT_EQ(Error(""), "file: not JSON");
  EXPECT_EQ(Error("{\"version\":1,"), "file: not JSON");
  EXPECT_EQ(Error("[1]"), "file: not a JSON object");
  EXPECT_EQ(Error(R"({"version":2,"probe":"mr"})"), "version: 2 (this rdmascope reads 1)");
  EXPECT_EQ(Error(R"({"version":1,"probe":"verbs"})"), "probe: not mr");
  json body = json::parse(MrReadingToJson(Reading()));
  body["snapshot"]["processes"] = json::object();
  EXPECT_EQ(Refusal(body), "processes: not an array");
  // Deeply nested: refused, no stack overflow in the parser or the destructor.
  const std::string deep = R"({"version":1,"probe":"mr","x":)" + std::string(200000, '[') +
                           std::string(200000, ']') + "}";
  EXPECT_EQ(Error(deep), "file: nested deeper than 8 levels");
}

TEST(MrSnapshotJson, HugeFilesAreRefusedBeforeParsing) {
  std::string text = MrReadingToJson(Reading());
  text.insert(1, probe_json::kMaxBytes, ' ');  // valid JSON, but past the bound
  EXPECT_EQ(Error(text), "file: larger than 8 MiB");
  // Within the bound, many processes are read (4096 is the probes' default).
  MrProbeReading many = Reading();
  many.snapshot.processes.resize(4096, many.snapshot.processes[0]);
  const std::string big = MrReadingToJson(many);
  EXPECT_LT(big.size(), 4U << 20);
  ASSERT_TRUE(MrReadingFromJson(big).has_value());
  // But not more entries than any map holds, however small each one.
  json body = json::parse(MrReadingToJson(Reading()));
  body["snapshot"]["processes"] = json(std::vector<int>(probe_json::kMaxEntries + 1, 0));
  EXPECT_EQ(Refusal(body), "processes: too many entries");
}

}  // namespace
}  // namespace rdmascope
