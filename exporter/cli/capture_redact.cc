#include "cli/capture_redact.h"

#include <nlohmann/json.hpp>

#include "sys/grpc_capture.h"

namespace rdmascope {
namespace {

using nlohmann::json;

// Numbers and booleans of `in` named in `names`, as they are.
void KeepCounts(const json& in, json& out, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    const auto it = in.find(name);
    if (it != in.end() && (it->is_number() || it->is_boolean())) out[name] = *it;
  }
}

// Text members of `in` named in `names`, with their paths hashed.
void KeepText(const redact::Redactor& redactor, const json& in, json& out,
              std::initializer_list<const char*> names) {
  for (const char* name : names) {
    const auto it = in.find(name);
    if (it != in.end() && it->is_string()) {
      out[name] = redact::FreeText(redactor, it->get_ref<const std::string&>());
    }
  }
}

json Workload(const redact::Redactor& redactor, const json& in) {
  json out = json::object();
  if (!in.is_object()) return out;
  for (const auto& [label, value] : in.items()) {
    if (value.is_string()) {
      out[label] = redact::WorkloadLabel(redactor, label, value.get_ref<const std::string&>());
    }
  }
  return out;
}

// The container runtime's or the kubelet's state in /debug/workloads.
json Source(const redact::Redactor& redactor, const json& in) {
  json out = json::object();
  if (!in.is_object()) return out;
  if (const auto it = in.find("endpoint"); it != in.end() && it->is_string()) {
    out["endpoint"] = sys::RedactEndpoint(redactor, it->get_ref<const std::string&>());
  }
  KeepCounts(in, out,
             {"attempts", "last_success_age_seconds", "containers", "container_resources"});
  KeepText(redactor, in, out, {"last_error"});
  return out;
}

json Workloads(const redact::Redactor& redactor, const json& in) {
  json processes = json::array();
  if (const auto it = in.find("processes"); it != in.end() && it->is_array()) {
    for (const json& process : *it) {
      if (!process.is_object()) continue;
      json entry = json::object();
      KeepCounts(process, entry, {"pid"});
      if (const auto w = process.find("workload"); w != process.end()) {
        entry["workload"] = Workload(redactor, *w);
      }
      processes.push_back(std::move(entry));
    }
  }
  json out = {{"processes", std::move(processes)}};
  for (const char* source : {"kubelet", "container_runtime"}) {
    if (const auto it = in.find(source); it != in.end()) out[source] = Source(redactor, *it);
  }
  return out;
}

json Stacks(const redact::Redactor& redactor, const json& in) {
  json out = json::object();
  KeepText(redactor, in, out, {"error", "truncated_reason"});
  KeepCounts(in, out, {"regions_walked", "truncated"});
  const auto processes = in.find("processes");
  if (processes == in.end() || !processes->is_array()) return out;
  json kept_processes = json::array();
  for (const json& process : *processes) {
    if (!process.is_object()) continue;
    json entry = json::object();
    KeepCounts(process, entry, {"pid", "exec_id", "outstanding_regions", "outstanding_bytes"});
    // comm stays, as the resources collector's netlink replies and /proc files keep it.
    if (const auto comm = process.find("comm"); comm != process.end() && comm->is_string()) {
      entry["comm"] = *comm;
    }
    if (const auto w = process.find("workload"); w != process.end()) {
      entry["workload"] = Workload(redactor, *w);
    }
    json stacks = json::array();
    if (const auto it = process.find("stacks"); it != process.end() && it->is_array()) {
      for (const json& stack : *it) {
        if (!stack.is_object()) continue;
        json site = json::object();
        KeepCounts(stack, site, {"outstanding_regions", "outstanding_bytes", "oldest_age_seconds"});
        // "dwarf", "frame-pointer"...: a method, kept as the exporter names it.
        if (const auto unwind = stack.find("unwind");
            unwind != stack.end() && unwind->is_string()) {
          site["unwind"] = *unwind;
        }
        KeepText(redactor, stack, site, {"unwind_stop", "symbols_missing"});
        json frames = json::array();
        if (const auto f = stack.find("frames"); f != stack.end() && f->is_array()) {
          for (const json& frame : *f) {
            if (!frame.is_object()) continue;
            json kept = json::object();
            // A function is a symbol (kept: the call site is the point of the stacks), or
            // MODULE+offset where it has none (the module's path hashed).
            KeepText(redactor, frame, kept, {"function", "module"});
            KeepCounts(frame, kept, {"inlined"});
            frames.push_back(std::move(kept));
          }
        }
        site["frames"] = std::move(frames);
        stacks.push_back(std::move(site));
      }
    }
    entry["stacks"] = std::move(stacks);
    kept_processes.push_back(std::move(entry));
  }
  out["processes"] = std::move(kept_processes);
  return out;
}

}  // namespace

std::expected<std::string, std::string> RedactExporterAnswer(const redact::Redactor& redactor,
                                                             std::string_view route,
                                                             std::string_view body) {
  const json in = json::parse(body, nullptr, false);
  if (in.is_discarded() || !in.is_object()) return std::unexpected("not a JSON object");
  json out;
  if (route == "/debug/workloads") {
    out = Workloads(redactor, in);
  } else if (route == "/debug/mr/stacks") {
    out = Stacks(redactor, in);
  } else {
    return std::unexpected("no redaction rules for " + std::string(route));
  }
  return out.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace rdmascope
