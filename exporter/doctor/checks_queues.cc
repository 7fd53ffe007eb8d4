// Queues: CQ capacity against the work that can complete into it, SRQ limits, receivers out
// of posted buffers. Sources: the verbs collector (eBPF on the libibverbs control path), the
// occupancy collector (preload library) and the ports' hw_counters.
#include <cmath>

#include "doctor/check_util.h"
#include "doctor/checks.h"

namespace rdmascope::doctor {
namespace {

constexpr const char* kArea = "queues";

double NextPowerOfTwo(double value) {
  double power = 1;
  while (power < value) power *= 2;
  return power;
}

}  // namespace

std::vector<Finding> CheckCqCapacity(const Snapshot& now, const Snapshot*,
                                     const DoctorOptions& options) {
  std::vector<Finding> findings;
  const std::string id = "queues.cq_capacity";
  const std::string runbook = "rdmacqundersized";
  for (const Sample* feeding : now.Find("rdma_cq_feeding_wrs")) {
    const Sample* capacity = now.Exact("rdma_cq_capacity_entries", feeding->labels);
    if (capacity == nullptr) {
      findings.push_back(Skip(id, kArea, ProcessScope(*feeding), runbook,
                              "no rdma_cq_capacity_entries for this CQ"));
      continue;
    }
    const double cqe = capacity->value;
    const double wrs = feeding->value;
    const Severity severity = wrs == 0                            ? Severity::kOk
                              : cqe < options.cq_ratio_crit * wrs ? Severity::kCrit
                              : cqe < options.cq_ratio_warn * wrs ? Severity::kWarn
                                                                  : Severity::kOk;
    Finding finding = Make(id, kArea, severity, ProcessScope(*feeding), runbook);
    finding.observed = "CQ of " + Num(cqe) + " entries fed by " + Num(wrs) + " WRs" +
                       (wrs > 0 ? " (" + Num(std::round(cqe / wrs * 100) / 100) + "x)" : "");
    finding.expected = "at least " + Num(options.cq_ratio_warn) + "x the feeding WRs (below " +
                       Num(options.cq_ratio_crit) + "x it can overflow)";
    if (severity != Severity::kOk) {
      const double at_least = std::ceil(options.cq_ratio_warn * wrs);
      finding.advice = "CQ " + Num(cqe) + " entries is fed by " + Num(wrs) +
                       " WRs: create it with at least " + Num(at_least) + " (" +
                       Num(options.cq_ratio_warn) + "x), " + Num(NextPowerOfTwo(at_least)) +
                       " recommended (ibv_create_cq cqe, or ibv_resize_cq)";
    }
    findings.push_back(std::move(finding));
  }
  if (findings.empty()) {
    findings.push_back(NothingToCheck(
        id, kArea, runbook,
        "no rdma_cq_feeding_wrs series: no CQ was created while the verbs probes were attached "
        "(doctor sees only CQs created during its window; a running exporter's history is a "
        "later slice)"));
  }
  return findings;
}

std::vector<Finding> CheckSrqLimit(const Snapshot& now, const Snapshot*, const DoctorOptions&) {
  std::vector<Finding> findings;
  const std::string id = "queues.srq_limit";
  for (const Sample* limit : now.Find("rdma_srq_limit_wrs")) {
    const Sample* depth = now.Exact("rdma_srq_max_wrs", limit->labels);
    const Sample* posted = now.Exact("rdma_srq_posted_wrs", limit->labels);
    const std::string depth_text = depth ? " (depth " + Num(depth->value) + " WRs)" : "";
    if (limit->value == 0) {
      Finding finding =
          Make(id, kArea, Severity::kInfo, ProcessScope(*limit), "rdmasrqlimitreachedoften");
      finding.observed = "SRQ limit not armed" + depth_text;
      finding.expected = "a limit armed with ibv_modify_srq";
      finding.advice = "no SRQ_LIMIT_REACHED event will warn before the SRQ" + depth_text +
                       " runs dry: arm srq_limit at nodes x concurrent flows per node x 1.2, "
                       "below the depth, and re-arm it after each event";
      findings.push_back(std::move(finding));
      continue;
    }
    const bool below = posted != nullptr && posted->value < limit->value;
    Finding finding = Make(id, kArea, below ? Severity::kWarn : Severity::kOk, ProcessScope(*limit),
                           below ? "rdmasrqbelowlimit" : "rdmasrqlimitreachedoften");
    finding.observed = "SRQ limit " + Num(limit->value) + depth_text +
                       (posted ? ", " + Num(posted->value) + " receives posted" : "");
    finding.expected = "limit armed, posted receives above it";
    if (below) {
      finding.advice =
          "only " + Num(posted->value) + " receives are posted, " +
          Num(limit->value - posted->value) +
          " below the limit the application armed as its low-water mark: should the SRQ "
          "empty, messages arriving on its RC QPs meet RNR NAKs and their senders "
          "stall; replenish the SRQ faster (a thread reacting to SRQ_LIMIT_REACHED) "
          "or deepen it";
    }
    findings.push_back(std::move(finding));
  }
  if (findings.empty()) {
    findings.push_back(NothingToCheck(
        id, kArea, "rdmasrqlimitreachedoften",
        "no rdma_srq_limit_wrs series: no SRQ was created while the verbs probes were attached "
        "and no application runs with the preload library"));
  }
  return findings;
}

// The counters of the rdma:port_receive_starvation:rate5m recording rule.
// Local evidence only: mlx5 out_of_buffer (packets dropped for want of a receive WQE), rxe
// send_rnr_err and mana responder_rnr_nak (RNR NAKs this port sent; hw/mana/counters.c).
// RNR NAKs *received* mean the peer starves
// (CheckPeerReceiveStarvation), as in the rules rdma:port_{,peer_}receive_starvation:rate5m.
std::vector<Finding> CheckReceiveStarvation(const Snapshot& now, const Snapshot* before,
                                            const DoctorOptions&) {
  static constexpr const char* kCounters[] = {"out_of_buffer", "send_rnr_err", "responder_rnr_nak"};
  return HwCounterRateCheck(
      now, before, kCounters,
      {.id = "queues.receive_starvation",
       .area = kArea,
       .runbook = "rdmareceivestarvation",
       .what = "no-receive-posted drops and RNR NAKs sent",
       .threshold = 0,
       .advice = "this host's applications post receives too late or too few: post receives "
                 "deeper and earlier, use an SRQ with an armed limit, raise the RNR timer its "
                 "QPs advertise (min_rnr_timer)"});
}

// RNR NAKs received: mlx5 rnr_nak_retry_err, rxe rcvd_rnr_err, bnxt_re rnr_naks_rcvd, mana
// requester_rnr_nak.
std::vector<Finding> CheckPeerReceiveStarvation(const Snapshot& now, const Snapshot* before,
                                                const DoctorOptions&) {
  static constexpr const char* kCounters[] = {"rnr_nak_retry_err", "rcvd_rnr_err", "rnr_naks_rcvd",
                                              "requester_rnr_nak"};
  return HwCounterRateCheck(
      now, before, kCounters,
      {.id = "queues.peer_receive_starvation",
       .area = kArea,
       .runbook = "rdmapeerreceivestarvation",
       .what = "RNR NAKs received from peers",
       .threshold = 0,
       .advice = "the hosts this port sends to had no receive posted: the starving receivers are "
                 "on those peers (the remote ends of this host's QPs), fix them there; here, "
                 "rnr_retry 7 rides out short gaps"});
}

}  // namespace rdmascope::doctor
