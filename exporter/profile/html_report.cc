#include "profile/html_report.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <map>
#include <string_view>

#include "profile/flame_graph.h"
#include "profile/html_text.h"
#include "profile/measured.h"
#include "profile/stacks.h"
#include "profile/svg_plot.h"

namespace rdmascope::profile {
namespace {

constexpr std::string_view kStyle = R"(
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: .5em 0; }
th, td { border: 1px solid #ddd; padding: 2px 8px; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.missing { color: #888; font-style: italic; }
.sev-crit { color: #b00; font-weight: bold; } .sev-warn { color: #a60; } .sev-info { color: #06a; }
svg { width: 100%; height: auto; display: block; margin: .5em 0; }
svg text { font: 12px monospace; fill: #222; }
svg .plot-title { font: bold 13px system-ui, sans-serif; }
svg .grid { stroke: #eee; } svg .axis { stroke: #444; }
svg .series { fill: none; stroke: #1f77b4; stroke-width: 1.5; } svg .point { fill: #1f77b4; }
svg .limit { stroke: #d62728; stroke-dasharray: 6 4; stroke-width: 1.5; }
svg .limit-label { fill: #d62728; }
svg .frame rect { stroke: #fff; stroke-width: .5; } svg .frame:hover rect { stroke: #000; }
)";

const std::string kNotMeasured = "<span class=\"missing\">not measured</span>";

std::string Td(const std::string& html, bool number = false) {
  return number ? "<td class=\"num\">" + html + "</td>" : "<td>" + html + "</td>";
}

// A summary row: figures are already escaped HTML (FormatValue output is escaped here).
std::string Row(std::string_view label, const std::string& value_html) {
  return "<tr><th>" + HtmlEscape(label) + "</th>" + Td(value_html, true) + "</tr>\n";
}

std::string Figure(std::optional<double> value, std::string_view unit) {
  return value ? HtmlEscape(FormatValue(*value, unit)) : kNotMeasured;
}

std::optional<double> Double(const std::optional<uint64_t>& value) {
  return value ? std::optional<double>(static_cast<double>(*value)) : std::nullopt;
}

std::string Count(bool measured, uint64_t value, std::string_view unit = "count") {
  return measured ? HtmlEscape(FormatValue(static_cast<double>(value), unit)) : kNotMeasured;
}

std::string Utc(double unix_seconds) {
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buffer;
}

// "p50 4 KiB, p99 64 KiB (1200 values)", or "not measured".
std::string Quantiles(bool measured, const Log2Histogram& histogram, std::string_view unit) {
  if (!measured) return kNotMeasured;
  const auto p50 = histogram.Quantile(0.5), p99 = histogram.Quantile(0.99);
  if (!p50 || !p99) return "none seen";
  return HtmlEscape("p50 ≤ " + FormatValue(*p50, unit) + ", p99 ≤ " + FormatValue(*p99, unit) +
                    " (" + std::to_string(histogram.count) + " values)");
}

std::string Header(const ProfileData& data) {
  std::string command;
  for (const std::string& arg : data.command) command += (command.empty() ? "" : " ") + arg;
  std::string html = "<h1>rdmascope profile: " + HtmlEscape(data.comm) + " (pid " +
                     std::to_string(data.pid) + ")</h1>\n<table class=\"summary\">\n";
  html += Row("command", command.empty() ? "<span class=\"missing\">attached with --pid</span>"
                                         : "<code>" + HtmlEscape(command) + "</code>");
  std::string workload;
  for (const auto& [name, value] : data.workload) {
    workload += (workload.empty() ? "" : ", ") + HtmlEscape(name) + " <code>" + HtmlEscape(value) +
                "</code>";
  }
  html += Row("workload", workload.empty() ? "<span class=\"missing\">none found (not in a "
                                             "container, Slurm job or systemd unit)</span>"
                                           : workload);
  html += Row("window", HtmlEscape(Utc(data.start_unix_seconds) + ", " +
                                   FormatValue(data.duration_seconds, "seconds")));
  std::string end = HtmlEscape(data.end_reason);
  if (data.exit_status) end += ", exit status " + std::to_string(*data.exit_status);
  html += Row("ended", end);
  html += Row("MR probes", data.probes_active ? "attached" : "not attached");
  html += Row("preload library", data.preload_active ? "active" : "not active");
  html += Row("rdmascope", HtmlEscape(data.rdmascope_version));
  return html + "</table>\n";
}

std::string MemorySummary(const ProfileData& data) {
  const MrSummary& mr = data.mr;
  const bool calls = MrCallsMeasured(data), outstanding = MrOutstandingMeasured(data);
  std::string html = "<h2>Memory registrations</h2>\n<table class=\"summary\">\n";
  html += Row("registrations", Count(calls, mr.registrations));
  html += Row("registered", Count(calls, mr.registered_bytes, "bytes"));
  html += Row("deregistrations", Count(calls, mr.deregistrations));
  html += Row("failed registrations", Count(calls, mr.failures));
  html += Row("still registered at the end",
              outstanding ? Count(true, mr.outstanding_regions) + " regions, " +
                                Count(true, mr.outstanding_bytes, "bytes")
                          : kNotMeasured);
  html += Row("released at exit", calls ? Count(true, mr.released_at_exit_regions) + " regions, " +
                                              Count(true, mr.released_at_exit_bytes, "bytes")
                                        : kNotMeasured);
  const bool aligned = MrFieldMeasured(data, "aligned_2mib") &&
                       MrFieldMeasured(data, "aligned_4kib") && MrFieldMeasured(data, "unaligned");
  html +=
      Row("aligned to 2 MiB / 4 KiB only / unaligned",
          aligned ? Count(true, mr.aligned_2mib) + " / " + Count(true, mr.aligned_4kib) + " / " +
                        Count(true, mr.unaligned) + " of " + Count(true, mr.registrations)
                  : kNotMeasured);
  html += Row("bytes not 2 MiB-aligned", Figure(Double(mr.not_hugepage_aligned_bytes), "bytes"));
  html += Row("lengths not a multiple of 4 KiB", Figure(Double(mr.length_not_page_multiple), ""));
  html +=
      Row("same range registered again", MrFieldMeasured(data, "churn_registrations")
                                             ? Count(true, mr.churn_registrations) + " times, " +
                                                   Count(true, mr.churn_bytes, "bytes")
                                             : kNotMeasured);
  std::string flags;
  if (MrFieldMeasured(data, "access_flags")) {
    for (const auto& [flag, count] : mr.access_flags) {
      flags += (flags.empty() ? "" : ", ") + HtmlEscape(flag) + " " + std::to_string(count);
    }
  } else {
    for (const std::string& flag : mr.access_flags_seen) {
      flags += (flags.empty() ? "" : ", ") + HtmlEscape(flag);
    }
  }
  html += Row("access flags", calls ? (flags.empty() ? "none" : flags) : kNotMeasured);
  if (mr.restrack_bytes) {
    html += Row("registered per restrack", Figure(Double(mr.restrack_bytes), "bytes"));
  }
  html += Row("region size", Quantiles(calls, mr.size_bytes, "bytes"));
  html += Row("registration latency", Quantiles(calls, mr.latency_ns, "ns"));
  if (mr.from_restrack_only) {
    html += Row("note",
                "regions registered before the attach are seen through restrack only, "
                "without call stacks");
  }
  return html + "</table>\n";
}

std::string WorkSummary(const ProfileData& data) {
  const bool messages = MessagesMeasured(data);
  const PerfSummary& perf = data.perf;
  std::string html = "<h2>Messages and CPU</h2>\n<table class=\"summary\">\n";
  html += Row("send message size", Quantiles(messages, data.messages.send_bytes, "bytes"));
  html += Row("receive message size", Quantiles(messages, data.messages.recv_bytes, "bytes"));
  html += Row("completion latency (sampled)",
              Quantiles(messages, data.messages.completion_latency_ns, "ns"));
  html += Row("instructions per cycle", Figure(perf.ipc, ""));
  html += Row("LLC miss ratio", Figure(perf.llc_miss_ratio, ""));
  std::string nodes;
  for (int node : perf.thread_numa_nodes)
    nodes += (nodes.empty() ? "" : ", ") + std::to_string(node);
  html += Row("threads' NUMA nodes", nodes.empty() ? kNotMeasured : nodes);
  html += Row("NIC's NUMA node",
              perf.nic_numa_node ? std::to_string(*perf.nic_numa_node) : kNotMeasured);
  const std::string scope = perf.process_own ? " (the process)" : " (host-wide)";
  for (const auto& [event, count] : perf.events) {
    html += Row(event + scope, HtmlEscape(FormatValue(count, "")));
  }
  for (const auto& [event, reason] : perf.unavailable) {
    html += Row(event, "<span class=\"missing\">unavailable: " + HtmlEscape(reason) + "</span>");
  }
  return html + "</table>\n";
}

// Where the threads ran and the memory sits, against the NIC's node.
std::string NumaPlacement(const NumaSummary& numa) {
  std::string html = "<h2>NUMA placement</h2>\n<table class=\"summary\">\n";
  html += Row("NIC's NUMA node", numa.nic_node ? HtmlEscape(numa.nic_device) + " on node " +
                                                     std::to_string(*numa.nic_node)
                                               : kNotMeasured);
  html += Row("thread samples off the NIC's node",
              numa.off_nic_share ? HtmlEscape(FormatValue(*numa.off_nic_share * 100, "")) +
                                       "% of " + std::to_string(numa.samples)
                                 : kNotMeasured);
  std::string memory;
  if (numa.memory_bytes_by_node) {
    for (const auto& [node, bytes] : *numa.memory_bytes_by_node) {
      memory += (memory.empty() ? "" : ", ") + std::string("node ") + std::to_string(node) + " " +
                HtmlEscape(FormatValue(static_cast<double>(bytes), "bytes"));
    }
    if (memory.empty()) memory = "none resident";
  }
  html += Row("resident memory per node", memory.empty() ? kNotMeasured : memory);
  html += "</table>\n";
  if (numa.threads.empty()) return html;
  html +=
      "<table class=\"stacks\"><tr><th>thread</th><th>comm</th><th>samples by node</th>"
      "<th>majority node</th></tr>\n";
  for (const ThreadPlacement& thread : numa.threads) {
    std::string nodes;
    for (const auto& [node, count] : thread.samples_by_node) {
      nodes += (nodes.empty() ? "" : ", ") + std::string("node ") + std::to_string(node) + ": " +
               std::to_string(count);
    }
    html += "<tr>" + Td(std::to_string(thread.tid), true) + Td(HtmlEscape(thread.comm)) +
            Td(nodes) + Td(std::to_string(thread.majority_node), true) + "</tr>\n";
  }
  return html + "</table>\n";
}

// The stacks holding the most outstanding bytes: who leaks, in words, before the graphs.
std::string TopStacks(const std::vector<RegistrationStack>& stacks) {
  std::string html =
      "<table class=\"stacks\"><tr><th>registering function</th><th>called from</th>"
      "<th>outstanding</th><th>regions</th><th>registered</th><th>registrations</th></tr>\n";
  size_t shown = 0;
  for (const RegistrationStack& stack : stacks) {
    if (++shown > 20) break;
    std::string leaf = stack.frames.empty() ? "??" : FrameTitle(stack.frames.front());
    std::string callers;
    for (size_t i = 1; i < stack.frames.size() && i < 4; ++i) {
      callers += (callers.empty() ? "" : " ← ") + FrameName(stack.frames[i]);
    }
    html += "<tr>" + Td("<code>" + HtmlEscape(leaf) + "</code>") + Td(HtmlEscape(callers)) +
            Td(Count(true, stack.outstanding_bytes, "bytes"), true) +
            Td(Count(true, stack.outstanding_regions), true) +
            Td(Count(true, stack.registered_bytes, "bytes"), true) +
            Td(Count(true, stack.registrations), true) + "</tr>\n";
  }
  return html + "</table>\n";
}

std::string FlameGraphs(const ProfileData& data) {
  std::string html = "<h2>Registered memory by call stack</h2>\n";
  const auto stacks = StacksWithRemainder(data);
  if (stacks.empty()) return html + "<p>" + kNotMeasured + ": no registration stacks</p>\n";
  html += TopStacks(stacks);
  html +=
      "<p>Callers above callees; hover a frame for its function, module, offset and "
      "share.</p>\n";
  for (const auto& [value, title] :
       {std::pair{FoldedValue::kOutstandingBytes, "Outstanding bytes (still registered)"},
        {FoldedValue::kRegisteredBytes, "Bytes registered during the window"}}) {
    const std::string svg = FlameGraphSvg(stacks, value, title);
    html += svg.empty() ? "<p>" + HtmlEscape(title) + ": none</p>\n" : svg;
  }
  return html;
}

// One section per kind of timeline; a kind with no timeline (or no point) says so.
std::string Timelines(const ProfileData& data) {
  std::string html;
  const std::pair<std::string_view, std::string_view> kinds[] = {
      {"mr_outstanding_bytes", "Outstanding MR bytes over time"},
      {"cq_occupancy", "CQ occupancy over time, against capacity"},
      {"nic_throughput", "NIC throughput over time"}};
  for (const auto& [id, heading] : kinds) {
    html += "<h2>" + HtmlEscape(heading) + "</h2>\n";
    bool any = false;
    for (const Timeline& timeline : data.timelines) {
      if (timeline.id != id || timeline.points.empty()) continue;
      html += LinePlotSvg(timeline);
      any = true;
    }
    if (!any) html += "<p>" + kNotMeasured + "</p>\n";
  }
  bool other_heading = false;
  for (const Timeline& timeline : data.timelines) {
    bool known = false;
    for (const auto& [id, heading] : kinds) known = known || timeline.id == id;
    if (known || timeline.points.empty()) continue;
    if (!other_heading) html += "<h2>Other timelines</h2>\n";
    other_heading = true;
    html += LinePlotSvg(timeline);
  }
  return html;
}

// Each QP's depths as created, and the send depth queues.qp_depth says an RC QP needs.
std::string QpTable(const std::vector<QueueInfo>& queues) {
  auto number = [](const std::optional<uint64_t>& v) {
    return v ? HtmlEscape(FormatValue(static_cast<double>(*v), "")) : kNotMeasured;
  };
  std::string rows;
  for (const QueueInfo& qp : queues) {
    if (qp.kind != "qp") continue;
    rows += "<tr>" + Td(HtmlEscape(qp.handle), true) + Td(HtmlEscape(qp.device)) +
            Td(HtmlEscape(qp.type)) + Td(number(qp.capacity), true) +
            Td(qp.uses_srq ? std::string("SRQ") : number(qp.max_recv_wr), true) +
            Td(number(qp.max_send_sge), true) + Td(number(qp.max_recv_sge), true) +
            Td(number(qp.needed_send_wrs), true) + Td(number(qp.recommended_send_wrs), true) +
            "</tr>\n";
  }
  if (rows.empty()) return "";
  return "<table class=\"queues\"><tr><th>QP</th><th>device</th><th>type</th><th>send WRs</th>"
         "<th>receive WRs</th><th>send SGEs</th><th>receive SGEs</th><th>send WRs needed "
         "(queues.qp_depth)</th><th>recommended</th></tr>\n" +
         rows + "</table>\n";
}

std::string Queues(const std::vector<QueueInfo>& queues,
                   const std::map<std::string, uint64_t>& qps_by_type) {
  std::string html = "<h2>Queues</h2>\n";
  if (!qps_by_type.empty()) {
    std::string qps;
    for (const auto& [type, count] : qps_by_type) {
      qps += (qps.empty() ? "" : ", ") + std::to_string(count) + " " + HtmlEscape(type);
    }
    html += "<p>QPs by type (restrack): " + qps + "</p>\n";
  }
  if (queues.empty()) return html + "<p>" + kNotMeasured + "</p>\n";
  html += QpTable(queues);
  if (std::all_of(queues.begin(), queues.end(),
                  [](const QueueInfo& q) { return q.kind == "qp"; })) {
    return html;
  }
  html +=
      "<table class=\"queues\"><tr><th>kind</th><th>device</th><th>handle</th><th>type</th>"
      "<th>capacity</th><th>feeding WRs</th><th>peak occupancy</th><th>poll batch "
      "fullness</th></tr>\n";
  auto number = [](const std::optional<uint64_t>& v) {
    return v ? HtmlEscape(FormatValue(static_cast<double>(*v), "")) : kNotMeasured;
  };
  for (const QueueInfo& queue : queues) {
    if (queue.kind == "qp") continue;  // in QpTable
    html +=
        "<tr>" + Td(HtmlEscape(queue.kind)) + Td(HtmlEscape(queue.device)) +
        Td(HtmlEscape(queue.handle)) + Td(HtmlEscape(queue.type)) +
        Td(number(queue.capacity), true) + Td(number(queue.feeding_wrs), true) +
        Td(number(queue.peak_occupancy), true) +
        Td(queue.poll_batch_fullness
               ? HtmlEscape(FormatValue(std::round(*queue.poll_batch_fullness * 1000) / 10, "%"))
               : kNotMeasured,
           true) +
        "</tr>\n";
  }
  return html + "</table>\n";
}

std::string Counters(const std::vector<CounterDelta>& counters) {
  std::string html = "<h2>NIC and port counters over the window</h2>\n";
  if (counters.empty()) return html + "<p>" + kNotMeasured + "</p>\n";
  html +=
      "<table class=\"counters\"><tr><th>device</th><th>port</th><th>counter</th>"
      "<th>delta</th><th>per second</th></tr>\n";
  for (const CounterDelta& counter : counters) {
    html += "<tr>" + Td(HtmlEscape(counter.device)) + Td(HtmlEscape(counter.port)) +
            Td(HtmlEscape(counter.counter)) + Td(HtmlEscape(FormatValue(counter.delta, "")), true) +
            Td(HtmlEscape(FormatValue(counter.per_second, "")), true) + "</tr>\n";
  }
  return html + "</table>\n";
}

std::string Advice(const std::vector<doctor::Finding>& findings) {
  std::string html = "<h2>Advice</h2>\n";
  if (findings.empty()) return html + "<p>No finding.</p>\n";
  html +=
      "<table class=\"advice\"><tr><th>severity</th><th>check</th><th>scope</th>"
      "<th>observed</th><th>advice</th><th>fix</th></tr>\n";
  for (const doctor::Finding& finding : findings) {
    const std::string severity(doctor::SeverityName(finding.severity));
    std::string scope;
    for (const auto& [key, value] : finding.scope) {
      scope += (scope.empty() ? "" : " ") + key + "=" + value;
    }
    std::string id = HtmlEscape(finding.id);
    if (!finding.runbook.empty()) id += "<br><small>" + HtmlEscape(finding.runbook) + "</small>";
    html +=
        "<tr><td class=\"sev-" + severity + "\">" + severity + "</td>" + Td(id) +
        Td(HtmlEscape(scope)) + Td(HtmlEscape(finding.observed)) + Td(HtmlEscape(finding.advice)) +
        Td(finding.fix.empty() ? "" : "<code>" + HtmlEscape(finding.fix) + "</code>") + "</tr>\n";
  }
  return html + "</table>\n";
}

std::string Notes(const std::vector<std::string>& notes) {
  if (notes.empty()) return "";
  std::string html = "<h2>Not measured, and why</h2>\n<ul class=\"notes\">\n";
  for (const std::string& note : notes) html += "<li>" + HtmlEscape(note) + "</li>\n";
  return html + "</ul>\n";
}

}  // namespace

std::string HtmlReport(const ProfileData& data) {
  std::string html =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      // Defence in depth under the escaping: no script, no fetch, whatever a name holds.
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
      "style-src 'unsafe-inline'\">\n"
      "<title>rdmascope profile: " +
      HtmlEscape(data.comm) + " (pid " + std::to_string(data.pid) + ")</title>\n<style>" +
      std::string(kStyle) + "</style>\n</head>\n<body>\n";
  html += Header(data);
  html += Advice(data.advice);
  html += MemorySummary(data);
  html += FlameGraphs(data);
  html += Timelines(data);
  html += Queues(data.queues, data.qps_by_type);
  html += WorkSummary(data);
  html += NumaPlacement(data.numa);
  html += Counters(data.counters);
  html += Notes(data.notes);
  html += "</body>\n</html>\n";
  return html;
}

}  // namespace rdmascope::profile
