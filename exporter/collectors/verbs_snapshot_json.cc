#include "collectors/verbs_snapshot_json.h"

#include <vector>

#include "collectors/probe_json.h"

namespace rdmascope {
namespace {

using nlohmann::json;
using namespace probe_json;

json CqJson(const VerbsCq& cq) {
  return {{"pid", cq.pid},
          {"comm", cq.comm},
          {"device", cq.device},
          {"handle", cq.handle},
          {"requested_entries", cq.requested_entries},
          {"entries", cq.entries},
          {"feeding_wrs", cq.feeding_wrs},
          {"feeding_qps", cq.feeding_qps}};
}

VerbsCq CqOf(const json& in) {
  return {.pid = U32At(in, "pid"),
          .comm = String(Member(in, "comm"), "comm"),
          .device = String(Member(in, "device"), "device"),
          .handle = U32At(in, "handle"),
          .requested_entries = U32At(in, "requested_entries"),
          .entries = U32At(in, "entries"),
          .feeding_wrs = U64At(in, "feeding_wrs"),
          .feeding_qps = U32At(in, "feeding_qps")};
}

json SrqJson(const VerbsSrq& srq) {
  return {{"pid", srq.pid},
          {"comm", srq.comm},
          {"device", srq.device},
          {"handle", srq.handle},
          {"max_wr", srq.max_wr},
          {"limit", srq.limit},
          {"limit_events", srq.limit_events}};
}

VerbsSrq SrqOf(const json& in) {
  return {.pid = U32At(in, "pid"),
          .comm = String(Member(in, "comm"), "comm"),
          .device = String(Member(in, "device"), "device"),
          .handle = U32At(in, "handle"),
          .max_wr = U32At(in, "max_wr"),
          .limit = U32At(in, "limit"),
          .limit_events = U64At(in, "limit_events")};
}

json QpJson(const VerbsQp& qp) {
  return {{"pid", qp.pid},
          {"comm", qp.comm},
          {"device", qp.device},
          {"qp_num", qp.qp_num},
          {"handle", qp.handle},
          {"type", qp.type},
          {"max_send_wr", qp.max_send_wr},
          {"max_recv_wr", qp.max_recv_wr},
          {"max_send_sge", qp.max_send_sge},
          {"max_recv_sge", qp.max_recv_sge},
          {"srq", qp.srq}};
}

VerbsQp QpOf(const json& in) {
  return {.pid = U32At(in, "pid"),
          .comm = String(Member(in, "comm"), "comm"),
          .device = String(Member(in, "device"), "device"),
          .qp_num = U32At(in, "qp_num"),
          .handle = U32At(in, "handle"),
          .type = U32At(in, "type"),
          .max_send_wr = U32At(in, "max_send_wr"),
          .max_recv_wr = U32At(in, "max_recv_wr"),
          .max_send_sge = U32At(in, "max_send_sge"),
          .max_recv_sge = U32At(in, "max_recv_sge"),
          .srq = Bool(Member(in, "srq"), "srq")};
}

json ProcessJson(const VerbsProcess& p) {
  json ranges = json::object();
  for (const auto& [device, r] : p.rc_send_wrs) {
    ranges[device] = {{"min", r.min}, {"max", r.max}, {"total", r.total}};
  }
  return {{"pid", p.pid},
          {"comm", p.comm},
          {"qps", p.qps},
          {"async_events", p.async_events},
          {"rc_send_wrs", ranges}};
}

VerbsProcess ProcessOf(const json& in) {
  VerbsProcess p{
      .pid = U32At(in, "pid"), .comm = String(Member(in, "comm"), "comm"), .qps = U32At(in, "qps")};
  const json& events = Array(in, "async_events");
  if (events.size() != p.async_events.size()) throw Malformed("async_events: not 32 counts");
  for (size_t type = 0; type < events.size(); ++type) {
    p.async_events[type] = U64(events[type], "async_events");
  }
  for (const auto& [device, r] : Object(in, "rc_send_wrs").items()) {
    p.rc_send_wrs[Key(device, "device")] = {
        .min = U32At(r, "min"), .max = U32At(r, "max"), .total = U64At(r, "total")};
  }
  return p;
}

// Each entry as its own; duplicates are not refused: the probes key objects by pointer, so
// two contexts' queues may share a (pid, device, handle), and MetricSet keeps the first.
template <typename T>
std::vector<T> Entries(const json& list, T (*of)(const json&)) {
  std::vector<T> out;
  for (const json& entry : list) out.push_back(of(entry));
  return out;
}

}  // namespace

std::string VerbsReadingToJson(const VerbsProbeReading& reading) {
  json body = {{"version", kVersion},
               {"probe", "verbs"},
               {"attached", reading.attached},
               {"links", reading.links}};
  if (!reading.attached) {
    body["error"] = reading.error.substr(0, kMaxMessage);
    return Dump(body);
  }
  const VerbsSnapshot& s = reading.snapshot;
  json cqs = json::array(), srqs = json::array(), qps = json::array(), procs = json::array();
  for (const VerbsCq& cq : s.cqs) cqs.push_back(CqJson(cq));
  for (const VerbsSrq& srq : s.srqs) srqs.push_back(SrqJson(srq));
  for (const VerbsQp& qp : s.qps) qps.push_back(QpJson(qp));
  for (const VerbsProcess& p : s.processes) procs.push_back(ProcessJson(p));
  body["snapshot"] = {{"cqs", cqs},
                      {"srqs", srqs},
                      {"qps", qps},
                      {"processes", procs},
                      {"lost_calls", s.lost_calls},
                      {"lost_objects", s.lost_objects},
                      {"lost_processes", s.lost_processes},
                      {"globals_known", s.globals_known},
                      {"walk_error", s.walk_error.substr(0, kMaxMessage)}};
  return Dump(body);
}

std::expected<VerbsProbeReading, std::string> VerbsReadingFromJson(std::string_view text) {
  return Refusing([text] {
    const json body = Parse(text, "verbs");
    VerbsProbeReading reading;
    reading.attached = Bool(Member(body, "attached"), "attached");
    reading.links = U64At(body, "links");
    if (!reading.attached) {
      reading.error = Message(Member(body, "error"), "error");
      return reading;
    }
    const json& in = Object(body, "snapshot");
    VerbsSnapshot& s = reading.snapshot;
    s.cqs = Entries(Array(in, "cqs"), &CqOf);
    s.srqs = Entries(Array(in, "srqs"), &SrqOf);
    s.qps = Entries(Array(in, "qps"), &QpOf);
    s.processes = Entries(Array(in, "processes"), &ProcessOf);
    s.lost_calls = U64At(in, "lost_calls");
    s.lost_objects = U64At(in, "lost_objects");
    s.lost_processes = U64At(in, "lost_processes");
    s.globals_known = Bool(Member(in, "globals_known"), "globals_known");
    const json& walk_error = Member(in, "walk_error");
    if (!walk_error.is_string() || walk_error.get_ref<const std::string&>().size() > kMaxMessage) {
      throw Malformed("walk_error: not a string of at most 4096 bytes");
    }
    s.walk_error = walk_error.get<std::string>();
    return reading;
  });
}

}  // namespace rdmascope
