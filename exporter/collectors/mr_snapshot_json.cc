#include "collectors/mr_snapshot_json.h"

#include "collectors/probe_json.h"

namespace rdmascope {
namespace {

using nlohmann::json;
using namespace probe_json;

// The counters of MrProcess, in one place for both directions.
template <typename Process, typename Visit>
void Counters(Process& p, Visit&& visit) {
  visit("registrations", p.registrations);
  visit("deregistrations", p.deregistrations);
  visit("failures", p.failures);
  visit("lost_regions", p.lost_regions);
  visit("access_seen", p.access_seen);
  visit("not_huge_aligned_bytes", p.not_huge_aligned_bytes);
  visit("length_not_page_multiple", p.length_not_page_multiple);
  visit("aligned_huge", p.aligned_huge);
  visit("aligned_page", p.aligned_page);
  visit("unaligned", p.unaligned);
  visit("reregistrations", p.reregistrations);
  visit("reregistered_bytes", p.reregistered_bytes);
  visit("leak_suspect_regions", p.leak_suspect_regions);
  visit("leak_suspect_bytes", p.leak_suspect_bytes);
}

template <typename Snapshot, typename Visit>
void Globals(Snapshot& s, Visit&& visit) {
  visit("lost_calls", s.lost_calls);
  visit("lost_processes", s.lost_processes);
  visit("lost_exits", s.lost_exits);
  visit("stale_calls", s.stale_calls);
  visit("stack_bytes", s.stack_bytes);
  visit("stack_sites", s.stack_sites);
  visit("stacks_dropped_ring", s.stacks_dropped_ring);
  visit("stacks_dropped_memory", s.stacks_dropped_memory);
  visit("stacks_dropped_gone", s.stacks_dropped_gone);
  visit("stacks_copy_failed", s.stacks_copy_failed);
  visit("stack_samples", s.stack_samples);
  visit("stack_samples_deduplicated", s.stack_samples_deduplicated);
  visit("stacks_unwound", s.stacks_unwound);
  visit("unwind_worker_starts", s.unwind_worker_starts);
}

json ProcessJson(const MrProcess& p) {
  json out = {{"pid", p.pid},
              {"comm", p.comm},
              {"outstanding_regions", p.outstanding_regions},
              {"outstanding_bytes", p.outstanding_bytes},
              {"outstanding_implicit_odp", p.outstanding_implicit_odp},
              {"access_registrations", p.access_registrations}};
  Counters(p, [&out](const char* key, uint64_t value) { out[key] = value; });
  return out;
}

MrProcess ProcessOf(const json& in) {
  MrProcess p;
  p.pid = U32At(in, "pid");
  p.comm = String(Member(in, "comm"), "comm");
  p.outstanding_regions = Gauge(Member(in, "outstanding_regions"), "outstanding_regions");
  p.outstanding_bytes = Gauge(Member(in, "outstanding_bytes"), "outstanding_bytes");
  p.outstanding_implicit_odp =
      Gauge(Member(in, "outstanding_implicit_odp"), "outstanding_implicit_odp");
  const json& access = Array(in, "access_registrations");
  if (access.size() != p.access_registrations.size()) {
    throw Malformed("access_registrations: not 32 counts");
  }
  for (size_t bit = 0; bit < access.size(); ++bit) {
    p.access_registrations[bit] = U64(access[bit], "access_registrations");
  }
  Counters(p, [&in](const char* key, uint64_t& value) { value = U64At(in, key); });
  return p;
}

json ReleasedJson(const std::map<std::string, MrReleasedAtExit>& released) {
  json out = json::object();
  for (const auto& [comm, r] : released) out[comm] = {{"regions", r.regions}, {"bytes", r.bytes}};
  return out;
}

std::map<std::string, MrReleasedAtExit> ReleasedOf(const json& in) {
  std::map<std::string, MrReleasedAtExit> out;
  for (const auto& [comm, r] : in.items()) {
    out[Key(comm, "comm")] = {.regions = U64At(r, "regions"), .bytes = U64At(r, "bytes")};
  }
  return out;
}

std::vector<uint64_t> Buckets(const json& in, const char* key) {
  const json& counts = Array(in, key);
  // The probe's arrays are 32 (latency) and 48 (size) buckets: bucket b is 2^b.
  if (counts.size() > 64) throw Malformed(std::string(key) + ": more than 64 buckets");
  std::vector<uint64_t> out;
  for (const json& count : counts) out.push_back(U64(count, key));
  return out;
}

json SnapshotJson(const MrSnapshot& s) {
  json processes = json::array();
  for (const MrProcess& p : s.processes) processes.push_back(ProcessJson(p));
  json histograms = json::object();
  for (const auto& [comm, h] : s.histograms) {
    histograms[comm] = {{"latency", h.latency},
                        {"size", h.size},
                        {"latency_sum_ns", h.latency_sum_ns},
                        {"size_sum_bytes", h.size_sum_bytes}};
  }
  json retired = json::object();
  for (const auto& [comm, p] : s.retired_counters) retired[comm] = ProcessJson(p);
  json out = {{"processes", processes},
              {"released", ReleasedJson(s.released)},
              {"released_at_exec", ReleasedJson(s.released_at_exec)},
              {"histograms", histograms},
              {"retired_counters", retired},
              {"globals_known", s.globals_known},
              {"stack_unwind_seconds", s.stack_unwind_seconds},
              {"unwind_worker", s.unwind_worker},
              {"unwind_worker_restarts", s.unwind_worker_restarts},
              {"unwind_worker_sandbox", s.unwind_worker_sandbox}};
  Globals(s, [&out](const char* key, uint64_t value) { out[key] = value; });
  return out;
}

MrSnapshot SnapshotOf(const json& in) {
  MrSnapshot s;
  // A pid twice is not refused (an image replaced by an exec may be listed beside the new one
  // for a scrape): MetricSet keeps the first series of a name and labels, as it does live.
  for (const json& p : Array(in, "processes")) s.processes.push_back(ProcessOf(p));
  s.released = ReleasedOf(Object(in, "released"));
  s.released_at_exec = ReleasedOf(Object(in, "released_at_exec"));
  for (const auto& [comm, h] : Object(in, "histograms").items()) {
    MrHistograms& out = s.histograms[Key(comm, "comm")];
    out.latency = Buckets(h, "latency");
    out.size = Buckets(h, "size");
    out.latency_sum_ns = U64At(h, "latency_sum_ns");
    out.size_sum_bytes = U64At(h, "size_sum_bytes");
  }
  for (const auto& [comm, p] : Object(in, "retired_counters").items()) {
    s.retired_counters[Key(comm, "comm")] = ProcessOf(p);
  }
  s.globals_known = Bool(Member(in, "globals_known"), "globals_known");
  s.stack_unwind_seconds = NonNegative(Member(in, "stack_unwind_seconds"), "stack_unwind_seconds");
  s.unwind_worker = Bool(Member(in, "unwind_worker"), "unwind_worker");
  for (const auto& [reason, n] : Object(in, "unwind_worker_restarts").items()) {
    s.unwind_worker_restarts[Key(reason, "reason")] = U64(n, "unwind_worker_restarts");
  }
  for (const auto& [layer, entered] : Object(in, "unwind_worker_sandbox").items()) {
    s.unwind_worker_sandbox[Key(layer, "layer")] = Bool(entered, "unwind_worker_sandbox");
  }
  Globals(s, [&in](const char* key, uint64_t& value) { value = U64At(in, key); });
  return s;
}

}  // namespace

std::string MrReadingToJson(const MrProbeReading& reading) {
  json body = {{"version", kVersion},
               {"probe", "mr"},
               {"attached", reading.attached},
               {"kernel_path", reading.kernel_path},
               {"links", reading.links}};
  if (!reading.attached) body["error"] = reading.error.substr(0, kMaxMessage);
  if (!reading.failed.empty()) {
    body["failed"] = reading.failed.substr(0, kMaxMessage);
  } else if (reading.attached) {
    body["seeded_regions"] = reading.seeded_regions;
    body["snapshot"] = SnapshotJson(reading.snapshot);
  }
  return Dump(body);
}

std::expected<MrProbeReading, std::string> MrReadingFromJson(std::string_view text) {
  return Refusing([text] {
    const json body = Parse(text, "mr");
    MrProbeReading reading;
    reading.attached = Bool(Member(body, "attached"), "attached");
    reading.kernel_path = Bool(Member(body, "kernel_path"), "kernel_path");
    reading.links = U64At(body, "links");
    if (!reading.attached) {
      reading.error = Message(Member(body, "error"), "error");
    }
    if (body.contains("failed")) {
      reading.failed = Message(Member(body, "failed"), "failed");
    } else if (reading.attached) {
      reading.seeded_regions = U64At(body, "seeded_regions");
      reading.snapshot = SnapshotOf(Object(body, "snapshot"));
    }
    return reading;
  });
}

}  // namespace rdmascope
