#include "profile/json_writer.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/terminal_text.h"
#include "profile/measured.h"

namespace rdmascope::profile {
namespace {

using Json = nlohmann::ordered_json;

template <typename T>
Json Optional(const std::optional<T>& value) {
  return value ? Json(*value) : Json(nullptr);
}

template <typename T>
Json If(bool measured, const T& value) {
  return measured ? Json(value) : Json(nullptr);
}

// The non-empty buckets with their upper bound ("le", as Prometheus names it), so a reader
// needs no convention; p50/p99 as Log2Histogram::Quantile estimates them (null when empty).
Json Histogram(const Log2Histogram& histogram) {
  Json buckets = Json::array();
  for (size_t b = 0; b < histogram.buckets.size(); ++b) {
    if (histogram.buckets[b] == 0) continue;  // lossless: an absent bucket counts nothing
    const Json le =
        b < 64 ? Json(static_cast<uint64_t>(1) << b) : Json(std::ldexp(1.0, static_cast<int>(b)));
    buckets.push_back({{"le", le}, {"count", histogram.buckets[b]}});
  }
  return {{"count", histogram.count},
          {"sum", histogram.sum},
          {"p50", Optional(histogram.Quantile(0.5))},
          {"p99", Optional(histogram.Quantile(0.99))},
          {"buckets", std::move(buckets)}};
}

Json Mr(const ProfileData& data) {
  const MrSummary& mr = data.mr;
  const bool calls = MrCallsMeasured(data);
  const bool outstanding = MrOutstandingMeasured(data);
  auto field = [&](const char* name, const auto& value) {
    return If(MrFieldMeasured(data, name), value);
  };
  return {
      {"registrations", If(calls, mr.registrations)},
      {"deregistrations", If(calls, mr.deregistrations)},
      {"failures", If(calls, mr.failures)},
      {"registered_bytes", If(calls, mr.registered_bytes)},
      {"outstanding_regions", If(outstanding, mr.outstanding_regions)},
      {"outstanding_bytes", If(outstanding, mr.outstanding_bytes)},
      {"released_at_exit_regions", If(calls, mr.released_at_exit_regions)},
      {"released_at_exit_bytes", If(calls, mr.released_at_exit_bytes)},
      {"aligned_2mib", field("aligned_2mib", mr.aligned_2mib)},
      {"aligned_4kib", field("aligned_4kib", mr.aligned_4kib)},
      {"unaligned", field("unaligned", mr.unaligned)},
      {"churn_registrations", field("churn_registrations", mr.churn_registrations)},
      {"churn_bytes", field("churn_bytes", mr.churn_bytes)},
      {"access_flags", field("access_flags", mr.access_flags)},
      {"size_bytes", calls ? Histogram(mr.size_bytes) : Json(nullptr)},
      {"latency_ns", calls ? Histogram(mr.latency_ns) : Json(nullptr)},
      {"from_restrack_only", mr.from_restrack_only},
      {"not_hugepage_aligned_bytes", Optional(mr.not_hugepage_aligned_bytes)},
      {"length_not_page_multiple", Optional(mr.length_not_page_multiple)},
      {"access_flags_seen", calls ? Json(mr.access_flags_seen) : Json(nullptr)},
      {"restrack_bytes", Optional(mr.restrack_bytes)},
      {"unmeasured", mr.unmeasured},
  };
}

Json Stacks(const std::vector<RegistrationStack>& stacks) {
  Json out = Json::array();
  for (const RegistrationStack& stack : stacks) {
    Json frames = Json::array();
    for (const Frame& frame : stack.frames) {
      frames.push_back(
          {{"function", frame.function}, {"module", frame.module}, {"offset", frame.offset}});
    }
    out.push_back({{"frames", std::move(frames)},
                   {"outstanding_regions", stack.outstanding_regions},
                   {"outstanding_bytes", stack.outstanding_bytes},
                   {"registrations", stack.registrations},
                   {"registered_bytes", stack.registered_bytes}});
  }
  return out;
}

Json Queues(const std::vector<QueueInfo>& queues) {
  Json out = Json::array();
  for (const QueueInfo& queue : queues) {
    out.push_back({{"kind", queue.kind},
                   {"device", queue.device},
                   {"handle", queue.handle},
                   {"type", queue.type},
                   {"capacity", Optional(queue.capacity)},
                   {"feeding_wrs", Optional(queue.feeding_wrs)},
                   {"peak_occupancy", Optional(queue.peak_occupancy)},
                   {"poll_batch_fullness", Optional(queue.poll_batch_fullness)}});
    if (queue.kind != "qp") continue;
    // A QP's depths as created (capacity is max_send_wr); max_recv_wr null on an SRQ.
    Json& qp = out.back();
    qp["max_send_wr"] = Optional(queue.capacity);
    qp["max_recv_wr"] = Optional(queue.max_recv_wr);
    qp["max_send_sge"] = Optional(queue.max_send_sge);
    qp["max_recv_sge"] = Optional(queue.max_recv_sge);
    qp["uses_srq"] = queue.uses_srq;
    qp["needed_send_wrs"] = Optional(queue.needed_send_wrs);
    qp["recommended_send_wrs"] = Optional(queue.recommended_send_wrs);
  }
  return out;
}

Json Messages(const ProfileData& data) {
  if (!MessagesMeasured(data)) {
    return {{"send_bytes", nullptr}, {"recv_bytes", nullptr}, {"completion_latency_ns", nullptr}};
  }
  return {{"send_bytes", Histogram(data.messages.send_bytes)},
          {"recv_bytes", Histogram(data.messages.recv_bytes)},
          {"completion_latency_ns", Histogram(data.messages.completion_latency_ns)}};
}

Json Perf(const PerfSummary& perf) {
  return {{"events", Json(perf.events)},
          {"events_scope", perf.process_own ? "process" : "host"},
          {"unavailable", Json(perf.unavailable)},
          {"ipc", Optional(perf.ipc)},
          {"llc_miss_ratio", Optional(perf.llc_miss_ratio)},
          {"thread_numa_nodes", Json(perf.thread_numa_nodes)},
          {"nic_numa_node", Optional(perf.nic_numa_node)}};
}

// Threads' NUMA nodes against the NIC's; every figure that was not measured is null.
Json Numa(const NumaSummary& numa) {
  Json threads = Json::array();
  for (const ThreadPlacement& thread : numa.threads) {
    Json nodes = Json::object();
    for (const auto& [node, count] : thread.samples_by_node) nodes[std::to_string(node)] = count;
    threads.push_back({{"tid", thread.tid},
                       {"comm", thread.comm},
                       {"samples_by_node", std::move(nodes)},
                       {"majority_node", thread.majority_node}});
  }
  Json memory = nullptr;
  if (numa.memory_bytes_by_node) {
    memory = Json::object();
    for (const auto& [node, bytes] : *numa.memory_bytes_by_node) {
      memory[std::to_string(node)] = bytes;
    }
  }
  return {{"nic_device", numa.nic_node ? Json(numa.nic_device) : Json(nullptr)},
          {"nic_node", Optional(numa.nic_node)},
          {"samples", If(!numa.threads.empty(), numa.samples)},
          {"off_nic_samples", Optional(numa.off_nic_samples)},
          {"off_nic_share", Optional(numa.off_nic_share)},
          {"threads", std::move(threads)},
          {"memory_bytes_by_node", std::move(memory)},
          {"memory_off_nic_share", Optional(numa.memory_off_nic_share)},
          {"malformed_numa_maps_lines", numa.malformed_numa_maps_lines}};
}

Json Counters(const std::vector<CounterDelta>& counters) {
  Json out = Json::array();
  for (const CounterDelta& counter : counters) {
    out.push_back({{"device", counter.device},
                   {"port", counter.port},
                   {"counter", counter.counter},
                   {"delta", counter.delta},
                   {"per_second", counter.per_second}});
  }
  return out;
}

Json Timelines(const std::vector<Timeline>& timelines) {
  Json out = Json::array();
  for (const Timeline& timeline : timelines) {
    Json points = Json::array();
    for (const TimePoint& point : timeline.points) {
      points.push_back(Json::array({point.t_seconds, point.value}));
    }
    out.push_back({{"id", timeline.id},
                   {"title", timeline.title},
                   {"unit", timeline.unit},
                   {"limit", Optional(timeline.limit)},
                   {"points", std::move(points)}});
  }
  return out;
}

// The same shape as one finding of `doctor --format json` (docs/doctor.md).
Json Advice(const std::vector<doctor::Finding>& findings) {
  Json out = Json::array();
  for (const doctor::Finding& finding : findings) {
    Json scope = Json::object();
    for (const auto& [key, value] : finding.scope) scope[key] = value;
    out.push_back({{"id", finding.id},
                   {"area", finding.area},
                   {"severity", std::string(doctor::SeverityName(finding.severity))},
                   {"scope", std::move(scope)},
                   {"observed", finding.observed},
                   {"expected", finding.expected},
                   {"advice", finding.advice},
                   {"fix", finding.fix},
                   {"runbook", finding.runbook}});
  }
  return out;
}

}  // namespace

void WriteProfileJson(const ProfileData& data, std::ostream& out) {
  Json json;
  json["schema_version"] = data.schema_version;
  json["rdmascope_version"] = data.rdmascope_version;
  json["command"] = data.command;
  json["pid"] = data.pid;
  json["comm"] = data.comm;
  json["workload"] = Json::object();
  for (const auto& [name, value] : data.workload) json["workload"][name] = value;
  json["start_unix_seconds"] = data.start_unix_seconds;
  json["duration_seconds"] = data.duration_seconds;
  json["end_reason"] = data.end_reason;
  json["exit_status"] = Optional(data.exit_status);
  json["preload_active"] = data.preload_active;
  json["probes_active"] = data.probes_active;
  json["notes"] = data.notes;
  json["mr"] = Mr(data);
  json["stacks"] = Stacks(data.stacks);
  json["queues"] = Queues(data.queues);
  json["qps_by_type"] = data.qps_by_type;
  json["messages"] = Messages(data);
  json["perf"] = Perf(data.perf);
  json["numa"] = Numa(data.numa);
  json["counters"] = Counters(data.counters);
  json["timelines"] = Timelines(data.timelines);
  json["advice"] = Advice(data.advice);
  // comm, command lines and symbols are the application's bytes: replace what is not UTF-8
  // (U+FFFD) rather than throw and lose the whole report.
  // The encoder escapes C0; DEL and C1 (a comm, a frame name) are escaped too, for whoever
  // prints the file to a terminal (core/terminal_text.h).
  out << EscapeJsonControls(json.dump(2, ' ', false, Json::error_handler_t::replace)) << "\n";
}

}  // namespace rdmascope::profile
