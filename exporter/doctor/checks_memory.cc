// Memory registrations: lengths in 4 KiB multiples, 2 MiB alignment, pinned memory against
// RLIMIT_MEMLOCK; leaks and pinned-memory growth over the history a running exporter kept
// (doctor/history.h), skipped when doctor collected itself.
// Sources: the mr collector (eBPF on ibv_reg_mr*/ibv_dereg_mr) and VmPin from /proc.
#include <cmath>
#include <map>
#include <optional>

#include "doctor/check_util.h"
#include "doctor/checks.h"

namespace rdmascope::doctor {
namespace {

constexpr const char* kArea = "memory";

// Growth of one gauge series over the history: from the oldest kept snapshot holding it to now.
struct Growth {
  double from = 0;
  double to = 0;
  double seconds = 0;
};

std::optional<Growth> GrowthOf(const Snapshot& now, std::string_view name, const Sample& series) {
  const Snapshot* earliest = now.history()->Earliest(name, series.labels);
  if (earliest == nullptr || now.seconds() <= earliest->seconds()) return std::nullopt;
  return Growth{earliest->Exact(name, series.labels)->value, series.value,
                now.seconds() - earliest->seconds()};
}

std::string Span(double seconds) { return Num(std::round(seconds / 60 * 10) / 10) + " min"; }

constexpr const char* kTooRecent =
    "seen only since the last kept history snapshot (one a minute): ask again in a minute";

}  // namespace

std::vector<Finding> CheckMrPageMultiple(const Snapshot& now, const Snapshot*,
                                         const DoctorOptions&) {
  std::vector<Finding> findings;
  const std::string id = "memory.mr_page_multiple";
  const std::string runbook = "rdmamrlengthnotpagemultiple";
  for (const Sample* odd : now.Find("rdma_mr_length_not_page_multiple_total")) {
    const Sample* total = now.Exact("rdma_mr_registrations_total", odd->labels);
    if (total == nullptr || total->value == 0) continue;
    const double ratio = odd->value / total->value;
    Finding finding = Make(id, kArea, odd->value > 0 ? Severity::kInfo : Severity::kOk,
                           ProcessScope(*odd), runbook);
    finding.observed = Num(odd->value) + " of " + Num(total->value) + " registrations (" +
                       Percent(ratio) + ") have a length that is not a multiple of 4 KiB";
    finding.expected = "lengths in multiples of 4 KiB";
    if (odd->value > 0) {
      finding.advice =
          "round buffer sizes up to a multiple of 4096 bytes (Intel E810 guidance "
          "for DMA lengths): " +
          Percent(ratio) +
          " of this process's registrations "
          "are not";
    }
    findings.push_back(std::move(finding));
  }
  if (findings.empty()) {
    findings.push_back(NothingToCheck(id, kArea, runbook,
                                      "no registration seen by the mr probes during the window"));
  }
  return findings;
}

std::vector<Finding> CheckMrHugepage(const Snapshot& now, const Snapshot*,
                                     const DoctorOptions& options) {
  std::vector<Finding> findings;
  const std::string id = "memory.mr_hugepage";
  const std::string runbook = "rdmamrnotonhugepages";
  // The rule's ratio: by comm, unaligned bytes over registered bytes.
  std::map<std::string, double> unaligned;
  for (const Sample* series : now.Find("rdma_mr_not_hugepage_aligned_bytes_total")) {
    unaligned[series->Label("comm")] += series->value;
  }
  for (const Sample* registered : now.Find("rdma_mr_registration_size_bytes_sum")) {
    const std::string& comm = registered->Label("comm");
    if (registered->value <= 0) continue;
    const double ratio = unaligned[comm] / registered->value;
    const bool high = ratio > options.hugepage_unaligned_ratio;
    Finding finding =
        Make(id, kArea, high ? Severity::kInfo : Severity::kOk, {{"comm", comm}}, runbook);
    finding.observed = Percent(ratio) + " of " + Bytes(registered->value) +
                       " registered is not 2 MiB-aligned (address or length)";
    finding.expected = "at most " + Percent(options.hugepage_unaligned_ratio);
    if (high) {
      finding.advice =
          "allocate RDMA buffers from 2 MiB huge pages (MAP_HUGETLB, hugetlbfs, or "
          "2 MiB-aligned allocations with transparent huge pages): " +
          Bytes(unaligned[comm]) + " of " + comm +
          "'s registrations are on 4 KiB pages (huge pages gave +12% throughput in "
          "ML training)";
    }
    findings.push_back(std::move(finding));
  }
  if (findings.empty()) {
    findings.push_back(NothingToCheck(id, kArea, runbook,
                                      "no registration seen by the mr probes during the window"));
  }
  return findings;
}

std::vector<Finding> CheckPinnedVsMemlock(const Snapshot& now, const Snapshot*,
                                          const DoctorOptions& options) {
  std::vector<Finding> findings;
  const std::string id = "memory.pinned_vs_memlock";
  const std::string runbook = "rdmapinnedmemoryhitslockedlimitin48h";
  for (const Sample* pinned : now.Find("rdma_process_pinned_bytes")) {
    Scope scope = ProcessScope(*pinned);
    const Sample* limit = now.Exact("rdma_process_locked_memory_limit_bytes", pinned->labels);
    const Sample* exempt = now.Exact("rdma_process_pin_limit_exempt", pinned->labels);
    if (limit != nullptr && exempt != nullptr && exempt->value == 1) {
      // ib_umem_get checks the limit only for tasks without CAP_IPC_LOCK (core/umem.c).
      Finding finding = Make(id, kArea, Severity::kOk, std::move(scope), runbook);
      finding.observed = Bytes(pinned->value) + " pinned; RLIMIT_MEMLOCK " + Bytes(limit->value) +
                         " does not apply: the process holds CAP_IPC_LOCK";
      finding.expected = "pinned below " + Percent(options.memlock_warn_ratio) + " of the limit";
      findings.push_back(std::move(finding));
      continue;
    }
    if (limit == nullptr) {  // absent: RLIMIT_MEMLOCK is unlimited
      Finding finding = Make(id, kArea, Severity::kOk, std::move(scope), runbook);
      finding.observed = Bytes(pinned->value) + " pinned, RLIMIT_MEMLOCK unlimited";
      finding.expected = "pinned below " + Percent(options.memlock_warn_ratio) + " of the limit";
      findings.push_back(std::move(finding));
      continue;
    }
    const double ratio = limit->value > 0 ? pinned->value / limit->value : 1;
    const Severity severity = pinned->value >= limit->value         ? Severity::kCrit
                              : ratio >= options.memlock_warn_ratio ? Severity::kWarn
                                                                    : Severity::kOk;
    Finding finding = Make(id, kArea, severity, std::move(scope), runbook);
    finding.observed = Bytes(pinned->value) + " pinned of an RLIMIT_MEMLOCK of " +
                       Bytes(limit->value) + " (" + Percent(ratio) + ")";
    finding.expected = "pinned below " + Percent(options.memlock_warn_ratio) + " of the limit";
    if (severity != Severity::kOk) {
      const double headroom = limit->value - pinned->value;
      finding.advice =
          (headroom > 0 ? "only " + Bytes(headroom) + " left" : std::string("no headroom left")) +
          " before ibv_reg_mr fails with ENOMEM: check for a leak first, then raise "
          "the limit for the service (LimitMEMLOCK=infinity in its systemd unit, "
          "memlock in /etc/security/limits.conf, or --ulimit memlock=-1 for a "
          "container)";
      finding.fix = FixLine(
          {"prlimit --pid ", HostValue(pinned->Label("pid")), " --memlock=unlimited:unlimited"});
    }
    findings.push_back(std::move(finding));
  }
  if (findings.empty()) {
    findings.push_back(NothingToCheck(
        id, kArea, runbook,
        "no rdma_process_pinned_bytes series: no process holds /dev/infiniband/uverbs* open"));
  }
  return findings;
}

std::vector<Finding> CheckMrLeak(const Snapshot& now, const Snapshot*, const DoctorOptions&) {
  const std::string id = "memory.mr_leak";
  const std::string runbook = "rdmamrleak";
  if (now.history() == nullptr) return {NothingToCheck(id, kArea, runbook, NoHistory(now))};
  std::vector<Finding> findings;
  // RdmaMrLeak: outstanding bytes growing and regions older than --collector.mr.leak-age still
  // held.
  for (const Sample* outstanding : now.Find("rdma_mr_outstanding_bytes")) {
    Scope scope = ProcessScope(*outstanding);
    const auto growth = GrowthOf(now, "rdma_mr_outstanding_bytes", *outstanding);
    if (!growth) {
      findings.push_back(Skip(id, kArea, std::move(scope), runbook, kTooRecent));
      continue;
    }
    const Sample* suspect = now.Exact("rdma_mr_leak_suspect_bytes", outstanding->labels);
    const double old_bytes = suspect == nullptr ? 0 : suspect->value;
    const bool leaking = growth->to > growth->from && old_bytes > 0;
    Finding finding =
        Make(id, kArea, leaking ? Severity::kWarn : Severity::kOk, std::move(scope), runbook);
    finding.observed = "outstanding MR bytes " + Bytes(growth->from) + " -> " + Bytes(growth->to) +
                       " over " + Span(growth->seconds) + ", " + Bytes(old_bytes) +
                       " in regions older than --collector.mr.leak-age";
    finding.expected = "outstanding bytes not growing while old regions stay registered";
    if (leaking) {
      const double rate = (growth->to - growth->from) / growth->seconds;
      finding.advice = outstanding->Label("comm") + " (pid " + outstanding->Label("pid") +
                       ") registers " + Bytes(rate * 3600) +
                       "/h more than it deregisters: find the call site in "
                       "/debug/mr/stacks?pid=" +
                       outstanding->Label("pid") +
                       " and deregister (or cache and reuse) those regions";
    }
    findings.push_back(std::move(finding));
  }
  return findings;
}

std::vector<Finding> CheckPinnedGrowth(const Snapshot& now, const Snapshot*,
                                       const DoctorOptions& options) {
  const std::string id = "memory.pinned_growth";
  const std::string runbook = "rdmapinnedmemorygrowing";
  if (now.history() == nullptr) return {NothingToCheck(id, kArea, runbook, NoHistory(now))};
  std::vector<Finding> findings;
  // RdmaPinnedMemoryGrowing: more than 64 MiB over the hour. A shorter history is held to the
  // same figure: it can only miss a slow growth, never report one that did not happen.
  for (const Sample* pinned : now.Find("rdma_process_pinned_bytes")) {
    Scope scope = ProcessScope(*pinned);
    const auto growth = GrowthOf(now, "rdma_process_pinned_bytes", *pinned);
    if (!growth) {
      findings.push_back(Skip(id, kArea, std::move(scope), runbook, kTooRecent));
      continue;
    }
    const double delta = growth->to - growth->from;
    const bool growing = delta > options.pinned_growth_bytes;
    Finding finding =
        Make(id, kArea, growing ? Severity::kWarn : Severity::kOk, std::move(scope), runbook);
    finding.observed = "pinned " + Bytes(growth->from) + " -> " + Bytes(growth->to) + " over " +
                       Span(growth->seconds);
    finding.expected = "growth at most " + Bytes(options.pinned_growth_bytes) + " per hour";
    if (growing) {
      finding.advice = "VmPin grew by " + Bytes(delta) + " in " + Span(growth->seconds) +
                       ": with the mr probes, memory.mr_leak names the call sites "
                       "(/debug/mr/stacks?pid=" +
                       pinned->Label("pid") + "); else look for buffers registered per request";
    }
    findings.push_back(std::move(finding));
  }
  return findings;
}

}  // namespace rdmascope::doctor
