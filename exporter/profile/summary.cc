#include "profile/summary.h"

#include <cmath>
#include <map>
#include <sstream>

#include "core/terminal_text.h"
#include "doctor/check_util.h"

namespace rdmascope::profile {
namespace {

std::string Histogram(const Log2Histogram& h, double scale, const std::string& unit) {
  if (h.count == 0) return "not measured";
  const auto p50 = h.Quantile(0.5), p99 = h.Quantile(0.99);
  return std::to_string(h.count) + " (mean " +
         doctor::Num(std::round(h.sum / static_cast<double>(h.count) / scale)) + unit +
         ", p50 <= " + doctor::Num(*p50 / scale) + unit + ", p99 <= " + doctor::Num(*p99 / scale) +
         unit + ")";
}

}  // namespace

std::string Summary(const ProfileData& data, const std::filesystem::path& output) {
  const auto safe = [](std::string_view value) { return EscapeControls(value); };
  std::ostringstream out;
  out << "rdmascope profile of pid " << data.pid << " (" << safe(data.comm) << "), "
      << doctor::Num(std::round(data.duration_seconds * 10) / 10)
      << " s, ended: " << data.end_reason;
  if (data.exit_status) out << " (exit status " << *data.exit_status << ")";
  out << "\n";
  if (!data.workload.empty()) {
    out << "  workload:";
    for (const auto& [name, value] : data.workload) out << " " << safe(name) << "=" << safe(value);
    out << "\n";
  }
  const MrSummary& mr = data.mr;
  out << "  memory registrations: " << mr.registrations << " ("
      << doctor::Bytes(static_cast<double>(mr.registered_bytes)) << "), " << mr.deregistrations
      << " deregistered, " << mr.failures << " failed\n";
  out << "  outstanding " << (data.end_reason == "exited" ? "at exit" : "at the end") << ": "
      << mr.outstanding_regions << " regions, "
      << doctor::Bytes(static_cast<double>(mr.outstanding_bytes)) << "\n";
  size_t shown = 0;
  for (const RegistrationStack& stack : data.stacks) {
    if (stack.outstanding_regions == 0 || shown++ == 3) break;
    // The registering code: the innermost named frame outside the RDMA stack. The uprobes'
    // stacks start at the caller of ibv_reg_mr; the kernel path's in the system call (libc's
    // ioctl, then libibverbs and its provider).
    std::string where = "??";
    for (const Frame& frame : stack.frames) {
      const bool rdma_stack =
          frame.function.starts_with("ibv_") || frame.module.starts_with("libibverbs.so") ||
          frame.module.find("-rdmav") != std::string::npos || frame.module.starts_with("libc.so");
      if (frame.function != "??" && !rdma_stack) {
        where = safe(frame.function) + " (" + safe(frame.module) + ")";
        break;
      }
    }
    out << "    " << stack.outstanding_regions << " regions, "
        << doctor::Bytes(static_cast<double>(stack.outstanding_bytes)) << " from " << where << "\n";
  }
  out << "  registration latency: " << Histogram(mr.latency_ns, 1000, " us") << "\n";
  out << "  messages sent: " << Histogram(data.messages.send_bytes, 1, " B") << "\n";
  out << "  messages received: " << Histogram(data.messages.recv_bytes, 1, " B") << "\n";
  out << "  completion latency: " << Histogram(data.messages.completion_latency_ns, 1000, " us")
      << "\n";
  const auto figure = [](const std::optional<uint64_t>& value) {
    return value ? std::to_string(*value) : std::string("?");
  };
  for (const QueueInfo& qp : data.queues) {
    if (qp.kind != "qp") continue;
    out << "  qp " << qp.handle << " (" << safe(qp.type) << ") on "
        << (qp.device.empty() ? "?" : safe(qp.device)) << ": send " << figure(qp.capacity)
        << " WRs x " << figure(qp.max_send_sge) << " SGEs, receive "
        << (qp.uses_srq ? "from an SRQ" : figure(qp.max_recv_wr) + " WRs") << " x "
        << figure(qp.max_recv_sge) << " SGEs";
    if (qp.needed_send_wrs) {
      out << "; needs " << *qp.needed_send_wrs << " send WRs (" << *qp.recommended_send_wrs
          << " recommended)";
    }
    out << "\n";
  }
  for (const QueueInfo& queue : data.queues) {
    if (queue.kind == "qp") continue;
    out << "  " << safe(queue.kind) << " " << queue.handle << " on " << safe(queue.device)
        << ": capacity " << (queue.capacity ? std::to_string(*queue.capacity) : "?") << ", peak "
        << (queue.peak_occupancy ? std::to_string(*queue.peak_occupancy) : "not measured") << "\n";
  }
  const NumaSummary& numa = data.numa;
  if (numa.threads.empty()) {
    out << "  threads' NUMA nodes: not measured\n";
  } else {
    std::map<int, uint64_t> by_node;
    for (const ThreadPlacement& thread : numa.threads) ++by_node[thread.majority_node];
    out << "  threads' NUMA nodes (majority):";
    for (const auto& [node, threads] : by_node) out << " node " << node << " x" << threads;
    if (numa.off_nic_share) {
      out << "; " << doctor::Percent(*numa.off_nic_share) << " of " << numa.samples
          << " samples off " << safe(numa.nic_device) << "'s node " << *numa.nic_node;
    } else {
      out << "; NIC node unknown";
    }
    out << "\n";
  }
  if (numa.memory_bytes_by_node) {
    out << "  resident memory per node:";
    for (const auto& [node, bytes] : *numa.memory_bytes_by_node) {
      out << " node " << node << " " << doctor::Bytes(static_cast<double>(bytes));
    }
    if (numa.memory_bytes_by_node->empty()) out << " none resident";
    out << "\n";
  }
  for (const doctor::Finding& finding : data.advice) {
    out << "  [" << doctor::SeverityName(finding.severity) << "] " << safe(finding.id) << ": "
        << safe(finding.advice.empty() ? finding.observed : finding.advice) << "\n";
  }
  for (const std::string& note : data.notes) out << "  note: " << safe(note) << "\n";
  std::error_code ec;  // profile.pb.gz only if written (WriteOutputs removes a stale one)
  out << "  report: " << safe((output / "profile.html").string()) << " (also profile.json, "
      << (std::filesystem::exists(output / "profile.pb.gz", ec) ? "profile.pb.gz, " : "")
      << "*.folded)\n";
  return out.str();
}

}  // namespace rdmascope::profile
