// Sizing: QP send depth vs the bandwidth-delay product, QPs per core, SRQ depth and limit vs
// the workload, registration churn. Sources: the verbs collector (QP and SRQ caps from
// ibv_create_qp / ibv_create_srq), the resources collector (QPs by state), the host collector
// (online CPUs), the mr collector (registrations) and the preload library (message sizes).
#include "doctor/checks_sizing.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "doctor/check_util.h"
#include "doctor/checks.h"

namespace rdmascope::doctor {
namespace {

double NextPowerOfTwo(double value) {
  double power = 1;
  while (power < value) power *= 2;
  return power;
}

// The fastest active port of the device (its data rate): a QP runs on one port, and the check
// must hold for the port it may use. nullopt when no port is up (the rdma collector exports the
// rate of active ports only).
std::optional<double> DeviceRate(const Snapshot& now, const std::string& device) {
  return FastestPortDataRate(now, device);
}

struct MessageSize {
  double bytes;
  std::string source;
};

// The average send size the preload library measured for the process (bytes posted / send
// WRs posted since it started), else the --doctor.message-size assumption.
MessageSize SendMessageSize(const Snapshot& now, const std::string& pid, const std::string& comm,
                            const DoctorOptions& options) {
  const Matchers who{{"pid", pid}, {"comm", comm}, {"direction", "send"}};
  const auto bytes = now.Value("rdma_process_posted_bytes_total", who);
  const auto wrs = now.Value("rdma_process_posted_work_requests_total", who);
  if (bytes && wrs && *wrs > 0 && *bytes > 0) {
    return {*bytes / *wrs, "measured by the preload library over " + Num(*wrs) + " sends"};
  }
  return {options.message_size_bytes,
          "assumed (--doctor.message-size; the preload library measures it where it runs)"};
}

std::string RateText(double bytes_per_second) { return Num(bytes_per_second * 8 / 1e9) + " Gb/s"; }

}  // namespace

double BdpWorkRequests(double rate_bytes_per_second, double rtt_seconds, double message_bytes) {
  // The small epsilon keeps 1e6 / 4096 = 244.14 at 245, and an exact 256.0000001 at 256.
  return std::ceil(rate_bytes_per_second * rtt_seconds / message_bytes - 1e-9);
}

std::optional<QpDepthNeed> QpDepthNeeded(const Snapshot& now, const std::string& device,
                                         const std::string& pid, const std::string& comm,
                                         const DoctorOptions& options) {
  const auto rate = DeviceRate(now, device);
  if (!rate) return std::nullopt;
  MessageSize message = SendMessageSize(now, pid, comm, options);
  QpDepthNeed need{.rate_bytes_per_second = *rate,
                   .rtt_seconds = options.rtt_seconds,
                   .message_bytes = message.bytes,
                   .message_source = std::move(message.source)};
  need.needed = BdpWorkRequests(*rate, options.rtt_seconds, message.bytes);
  need.recommended = NextPowerOfTwo(need.needed);
  return need;
}

std::vector<Finding> CheckQpDepth(const Snapshot& now, const Snapshot*,
                                  const DoctorOptions& options) {
  const std::string id = "queues.qp_depth";
  const std::string area = "queues";
  const std::string runbook = "rdmaqpdepthbelowbdp";
  std::vector<Finding> findings;
  for (const Sample* depth : now.Find("rdma_process_qp_min_send_wrs")) {
    const std::string device = depth->Label("device");
    const auto need =
        QpDepthNeeded(now, device, depth->Label("pid"), depth->Label("comm"), options);
    if (!need) {
      findings.push_back(Skip(id, area, ProcessScope(*depth), runbook,
                              "no active port of " + device +
                                  " (rdma_port_rate_bytes_per_second): the bandwidth to fill "
                                  "is unknown"));
      continue;
    }
    const std::optional<double> rate = need->rate_bytes_per_second;
    const MessageSize message{need->message_bytes, need->message_source};
    const double needed = need->needed;
    const double recommended = need->recommended;
    const Matchers who{
        {"device", device}, {"pid", depth->Label("pid")}, {"comm", depth->Label("comm")}};
    // Applications spread their traffic over many QPs: the process fills the link when all its
    // RC send queues together hold the bandwidth-delay product. The sum (verbs collector);
    // from an exporter without it, the shallowest queue as before.
    const double total = now.Value("rdma_process_qp_total_send_wrs", who).value_or(depth->value);
    const bool shallow = total < needed;
    // The deepest RC send queue of the same process and device (verbs collector).
    const auto deepest = now.Value("rdma_process_qp_max_send_wrs", who);
    const bool excessive = !shallow && deepest && *deepest > options.qp_depth_excess * recommended;
    Finding finding = Make(id, area,
                           shallow     ? Severity::kWarn
                           : excessive ? Severity::kInfo
                                       : Severity::kOk,
                           ProcessScope(*depth), runbook);
    finding.observed = Num(total) + " send WRs across the RC QPs, smallest send queue " +
                       Num(depth->value) + " WRs; " + RateText(*rate) + " port (data rate), " +
                       Bytes(message.bytes) + " messages, " + message.source;
    if (deepest) finding.observed += "; deepest " + Num(*deepest) + " WRs";
    if (!shallow && depth->value < needed) {
      finding.observed += "; one QP alone keeps " + Percent(depth->value / needed) +
                          " of the link busy: the traffic needs at least " +
                          Num(std::ceil(needed / depth->value)) + " QPs in parallel";
    }
    finding.expected =
        "at least " + Num(needed) + " WRs across the RC QPs (data rate x an assumed " +
        Num(options.rtt_seconds * 1e6) + " us round trip, --doctor.rtt, / message size), at most " +
        Num(options.qp_depth_excess) + " x " + Num(recommended) + " in one QP";
    if (shallow) {
      finding.advice = "the process's RC send queues on " + device + " hold " + Num(total) +
                       " WRs together, at most " + Bytes(total * message.bytes) + " in flight, " +
                       Percent(total / needed) + " of the " + Bytes(*rate * options.rtt_seconds) +
                       " the " + RateText(*rate) + " link carries in " +
                       Num(options.rtt_seconds * 1e6) +
                       " us (an assumed round trip: measure yours and pass --doctor.rtt): it "
                       "cannot fill the link whatever it posts; create RC QPs with max_send_wr "
                       "at least " +
                       Num(needed) + ", " + Num(recommended) +
                       " recommended (ibv_create_qp cap.max_send_wr), or spread the traffic over "
                       "more QPs";
    } else if (excessive) {
      finding.advice = "a send queue of " + Num(*deepest) + " WRs is " +
                       Num(std::round(*deepest / recommended)) + " x the " + Num(recommended) +
                       " the link can keep busy: the extra work-queue entries hold pinned "
                       "memory on every such QP and only add queueing delay; create RC QPs "
                       "with max_send_wr near " +
                       Num(recommended) + " (more only if the application posts in bursts)";
    }
    findings.push_back(std::move(finding));
  }
  if (findings.empty()) {
    findings.push_back(NothingToCheck(
        id, area, runbook,
        "no rdma_process_qp_min_send_wrs series: no RC QP was created while the verbs probes "
        "were attached"));
  }
  return findings;
}

std::vector<Finding> CheckQpsPerCore(const Snapshot& now, const Snapshot*,
                                     const DoctorOptions& options) {
  const std::string id = "queues.qps_per_core";
  const std::string area = "queues";
  const std::string runbook = "queue-pairs-per-core";
  const auto cpus = now.Value("rdma_host_online_cpus");
  std::map<std::pair<std::string, std::string>, double> connected;  // (pid, comm) -> RTS QPs
  for (const Sample* qps : now.Find("rdma_process_qps", {{"state", "RTS"}})) {
    connected[{qps->Label("pid"), qps->Label("comm")}] += qps->value;
  }
  std::vector<Finding> findings;
  for (const auto& [who, qps] : connected) {
    Scope scope{{"pid", who.first}, {"comm", who.second}};
    if (!cpus || *cpus <= 0) {
      findings.push_back(Skip(id, area, std::move(scope), runbook,
                              "no rdma_host_online_cpus (collector host): cores unknown"));
      continue;
    }
    const double per_core = qps / *cpus;
    const bool few = per_core < options.qps_per_core;
    Finding finding = Make(id, area, few ? Severity::kInfo : Severity::kOk, scope, runbook);
    finding.observed = Num(qps) + " connected (RTS) QPs on " + Num(*cpus) +
                       " online CPUs: " + Num(std::round(per_core * 100) / 100) + " per core";
    finding.expected = "about " + Num(options.qps_per_core) +
                       " per core for an application whose threads post in parallel";
    if (few) {
      finding.advice = "if " + who.second + "'s threads drive RDMA I/O in parallel, open about " +
                       Num(options.qps_per_core) + " QPs per core they run on (" +
                       Num(std::ceil(options.qps_per_core * *cpus)) + " for all " + Num(*cpus) +
                       " CPUs), at least one per thread, so that threads do not serialise on a "
                       "shared QP; a single-threaded program needs no more";
    }
    findings.push_back(std::move(finding));
  }
  if (findings.empty()) {
    findings.push_back(NothingToCheck(id, area, runbook,
                                      "no process holds a connected (RTS) QP "
                                      "(rdma_process_qps{state=\"RTS\"})"));
  }
  return findings;
}

std::vector<Finding> CheckSrqSizing(const Snapshot& now, const Snapshot*,
                                    const DoctorOptions& options) {
  const std::string id = "queues.srq_sizing";
  const std::string area = "queues";
  const std::string runbook = "rdmasrqlimitreachedoften";
  std::vector<Finding> findings;
  const bool workload_known = options.nodes > 0 && options.flows > 0;
  const double needed = std::ceil(options.nodes * options.flows * options.srq_margin - 1e-9);
  for (const Sample* depth : now.Find("rdma_srq_max_wrs")) {
    if (!workload_known) {
      findings.push_back(Skip(id, area, ProcessScope(*depth), runbook,
                              "the workload is not given: say what the application does with "
                              "--doctor.nodes and --doctor.flows (concurrent flows per node)"));
      continue;
    }
    const Sample* limit = now.Exact("rdma_srq_limit_wrs", depth->labels);
    // The depth must exceed the limit: an SRQ no deeper than it is at the limit when full.
    const bool shallow = depth->value <= needed;
    const bool low_limit = limit != nullptr && limit->value > 0 && limit->value < needed;
    Finding finding = Make(id, area, shallow || low_limit ? Severity::kWarn : Severity::kOk,
                           ProcessScope(*depth), runbook);
    finding.observed = "SRQ depth " + Num(depth->value) + " WRs" +
                       (limit ? ", limit " + Num(limit->value) : std::string()) + " for " +
                       Num(options.nodes) + " nodes x " + Num(options.flows) + " flows";
    finding.expected = "limit and depth at least nodes x flows x " + Num(options.srq_margin) +
                       " = " + Num(needed) + " (depth above the limit)";
    if (shallow) {
      finding.advice =
          "the SRQ holds " + Num(depth->value) + " receives for up to " +
          Num(options.nodes * options.flows) +
          " concurrent flows: a burst from all of them can empty it, and senders then meet RNR "
          "NAKs; create it with max_wr above " +
          Num(needed) + " (" + Num(NextPowerOfTwo(needed + 1)) +
          " recommended) and arm srq_limit at " + Num(needed);
    } else if (low_limit) {
      finding.advice = "SRQ_LIMIT_REACHED fires with " + Num(limit->value) +
                       " receives left, fewer than one per concurrent flow plus margin: arm "
                       "srq_limit at " +
                       Num(needed) +
                       " (ibv_modify_srq IBV_SRQ_LIMIT) so that the refill starts "
                       "before the flows run it dry";
    }
    findings.push_back(std::move(finding));
  }
  if (findings.empty()) {
    findings.push_back(NothingToCheck(
        id, area, runbook,
        "no rdma_srq_max_wrs series: no SRQ was created while the verbs probes were attached"));
  }
  return findings;
}

std::vector<Finding> CheckRegistrationChurn(const Snapshot& now, const Snapshot* before,
                                            const DoctorOptions& options) {
  const std::string id = "memory.registration_churn";
  const std::string area = "memory";
  const std::string runbook = "rdmamrregistrationchurn";
  std::vector<Finding> findings;
  for (const Sample* registrations : now.Find("rdma_mr_registrations_total")) {
    Scope scope = ProcessScope(*registrations);
    if (before == nullptr) {
      findings.push_back(Skip(id, area, std::move(scope), runbook, kNeedsWindow));
      continue;
    }
    const auto reg_rate = Rate(now, *before, "rdma_mr_registrations_total", *registrations);
    const Sample* deregistrations =
        now.Exact("rdma_mr_deregistrations_total", registrations->labels);
    const auto dereg_rate =
        deregistrations ? Rate(now, *before, "rdma_mr_deregistrations_total", *deregistrations)
                        : std::nullopt;
    if (!reg_rate) {
      findings.push_back(Skip(id, area, std::move(scope), runbook,
                              "the registration counter was reset or appeared during the window"));
      continue;
    }
    const double dereg = dereg_rate.value_or(0);
    const bool churn = *reg_rate > options.registrations_per_second &&
                       dereg > options.churn_deregistration_ratio * *reg_rate;
    Finding finding =
        Make(id, area, churn ? Severity::kWarn : Severity::kOk, std::move(scope), runbook);
    const auto outstanding =
        now.Value("rdma_mr_outstanding_regions",
                  {{"pid", registrations->Label("pid")}, {"comm", registrations->Label("comm")}});
    finding.observed = Num(std::round(*reg_rate * 10) / 10) + " registrations/s, " +
                       Num(std::round(dereg * 10) / 10) + " deregistrations/s over " +
                       Num(std::round((now.seconds() - before->seconds()) * 10) / 10) + " s" +
                       (outstanding ? ", " + Num(*outstanding) + " regions outstanding" : "");
    finding.expected = "at most " + Num(options.registrations_per_second) +
                       " registrations/s, or registrations kept (register once, reuse keys)";
    if (churn) {
      finding.advice = Num(std::round(*reg_rate)) + " registrations/s, " +
                       Percent(dereg / *reg_rate) +
                       " of them deregistered again: the application registers per transfer. "
                       "Register buffers once (a pre-registered pool, or a registration cache "
                       "such as UCX's rcache) and reuse their keys";
    }
    findings.push_back(std::move(finding));
  }
  if (findings.empty()) {
    findings.push_back(NothingToCheck(
        id, area, runbook,
        "no rdma_mr_registrations_total series: no registration seen by the mr probes"));
  }
  return findings;
}

}  // namespace rdmascope::doctor
