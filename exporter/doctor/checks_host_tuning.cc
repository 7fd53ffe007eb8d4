// Host tuning: transparent huge pages, the huge page pool, kernel.numa_balancing, the CPU
// frequency governor and RLIMIT_MEMLOCK of RDMA processes. Series from the host collector
// (collectors/host_tuning.cc) and the mr collector's per-process limits.
#include "doctor/checks_host_tuning.h"

#include <map>

#include "doctor/check_util.h"

namespace rdmascope::doctor {
namespace {

constexpr const char* kArea = "host";
// The kernel's default RLIMIT_MEMLOCK: MLOCK_LIMIT in include/uapi/linux/resource.h, 8 MiB
// since Linux 5.16 (64 KiB before). A limit at or below it is one nobody raised for RDMA, and
// an RDMA application fails its first sizeable registrations under it; vendors and MPI
// documentation set memlock unlimited. How close pinned memory comes to a raised limit is
// memory.pinned_vs_memlock's finding.
constexpr double kKernelDefaultMemlockBytes = 8.0 * 1024 * 1024;

}  // namespace

std::vector<Finding> CheckQpTypes(const Snapshot& now, const Snapshot*, const DoctorOptions&) {
  // Per process: its UC and RC QPs (any state but RESET/ERR: the ones that carry traffic).
  struct Count {
    double rc = 0, uc = 0;
    Scope scope;
  };
  std::map<std::pair<std::string, std::string>, Count> processes;  // (pid, device)
  for (const Sample* qps : now.Find("rdma_process_qps")) {
    const std::string& state = qps->Label("state");
    if (state == "RESET" || state == "ERR") continue;
    Count& count = processes[{qps->Label("pid"), qps->Label("device")}];
    if (count.scope.empty()) {
      count.scope = {{"device", qps->Label("device")},
                     {"pid", qps->Label("pid")},
                     {"comm", qps->Label("comm")}};
    }
    if (qps->Label("type") == "RC") count.rc += qps->value;
    if (qps->Label("type") == "UC") count.uc += qps->value;
  }
  std::vector<Finding> findings;
  for (auto& [key, count] : processes) {
    if (count.rc + count.uc == 0) continue;  // UD, raw packet...: no connected-mode choice
    const bool uc = count.uc > 0;
    Finding finding = Make("queues.qp_type", "queues", uc ? Severity::kInfo : Severity::kOk,
                           std::move(count.scope), "rdmaucqueuepairs");
    finding.observed = Num(count.rc) + " RC, " + Num(count.uc) + " UC QPs";
    finding.expected = "RC where messages must arrive (UC only when the application recovers)";
    if (uc) {
      finding.advice = Num(count.uc) +
                       " UC QPs: UC has no transport retransmission, a lost packet drops the "
                       "whole message and the application must notice and resend; RC costs about "
                       "5% more overhead and cut retransmissions by about 30% in storage";
    }
    findings.push_back(std::move(finding));
  }
  return findings;
}

std::vector<Finding> CheckThp(const Snapshot& now, const Snapshot*, const DoctorOptions&) {
  const std::string id = "host.thp";
  const std::string runbook = "host-tuning";
  std::string mode;
  for (const Sample* s : now.Find("rdma_host_transparent_hugepage_mode")) {
    if (s->value == 1) mode = s->Label("mode");
  }
  if (mode.empty()) return {};
  const auto pool = now.Value("rdma_host_hugepages", {{"state", "total"}});
  Severity severity = Severity::kOk;
  std::string advice, fix;
  if (mode == "always") {
    severity = Severity::kInfo;
    advice =
        "THP \"always\" makes khugepaged collapse and compact every process's memory, latency "
        "spikes RDMA applications see as jitter; \"madvise\" keeps 2 MiB pages for the buffers "
        "that ask (madvise(MADV_HUGEPAGE) before ibv_reg_mr)";
    fix = "echo madvise > /sys/kernel/mm/transparent_hugepage/enabled";
  } else if (mode == "never" && pool && *pool == 0) {
    severity = Severity::kInfo;
    advice =
        "THP \"never\" and no huge page pool: RDMA buffers cannot be on 2 MiB pages (they gave "
        "+12% throughput in ML training: fewer TLB and NIC translation misses); allow "
        "\"madvise\" or reserve huge pages (host.hugepages)";
    fix = "echo madvise > /sys/kernel/mm/transparent_hugepage/enabled";
  }
  Finding finding = Make(id, kArea, severity, {}, runbook);
  finding.observed = "transparent_hugepage/enabled: " + mode;
  finding.expected = "madvise (or never with a reserved huge page pool)";
  finding.advice = std::move(advice);
  finding.fix = std::move(fix);
  return {std::move(finding)};
}

std::vector<Finding> CheckHugepages(const Snapshot& now, const Snapshot*, const DoctorOptions&) {
  const std::string id = "host.hugepages";
  const std::string runbook = "host-tuning";
  const auto total = now.Value("rdma_host_hugepages", {{"state", "total"}});
  const auto free_pages = now.Value("rdma_host_hugepages", {{"state", "free"}});
  if (!total || !free_pages) return {};
  const double size = now.Value("rdma_host_hugepage_size_bytes").value_or(2 * 1024 * 1024);
  double pinned = 0;  // what RDMA processes pin now: the pool they would need
  for (const Sample* s : now.Find("rdma_process_pinned_bytes")) pinned += s->value;
  const double needed = std::ceil(pinned / size);
  Severity severity = Severity::kOk;
  Finding finding = Make(id, kArea, severity, {}, runbook);
  finding.observed =
      Num(*total) + " huge pages of " + Bytes(size) + ", " + Num(*free_pages) + " free";
  finding.expected = "a pool covering the RDMA buffers (pinned now: " + Bytes(pinned) + ")";
  if (*total > 0 && *free_pages == 0) {
    finding.severity = Severity::kWarn;
    finding.advice =
        "the pool is exhausted: new buffers fall back to 4 KiB pages (or hugetlb "
        "mmap fails); grow it to at least " +
        Num(std::max(*total + 1, needed)) + " pages";
    finding.fix = "sysctl -w vm.nr_hugepages=" + Num(std::max(*total + 1, needed));
  } else if (*total == 0 && needed > 0) {
    finding.severity = Severity::kInfo;
    finding.advice = "no huge page pool: RDMA processes pin " + Bytes(pinned) +
                     " on 4 KiB pages "
                     "unless THP backs them; " +
                     Num(needed) + " pages of " + Bytes(size) +
                     " would hold it (huge pages gave +12% throughput in ML training)";
    finding.fix = "sysctl -w vm.nr_hugepages=" + Num(needed);
  }
  return {std::move(finding)};
}

std::vector<Finding> CheckNumaBalancing(const Snapshot& now, const Snapshot*,
                                        const DoctorOptions&) {
  const auto mode = now.Value("rdma_host_numa_balancing");
  if (!mode) return {};
  const bool on = *mode != 0;
  Finding finding =
      Make("host.numa_balancing", kArea, on ? Severity::kWarn : Severity::kOk, {}, "host-tuning");
  finding.observed = "kernel.numa_balancing = " + Num(*mode);
  finding.expected = "0";
  if (on) {
    finding.advice =
        "automatic NUMA balancing unmaps pages to sample accesses and migrates them: pinned RDMA "
        "buffers cannot move, so it only adds hinting faults and latency to the threads that "
        "drive the NIC; place processes explicitly (host.numa_placement) and set it to 0";
    finding.fix = "sysctl -w kernel.numa_balancing=0";
  }
  return {std::move(finding)};
}

std::vector<Finding> CheckCpuGovernor(const Snapshot& now, const Snapshot*, const DoctorOptions&) {
  std::vector<Finding> findings;
  for (const Sample* s : now.Find("rdma_host_cpu_frequency_governor_cpus")) {
    const std::string& governor = s->Label("governor");
    const bool slow = governor != "performance";
    Finding finding = Make("host.cpu_governor", kArea, slow ? Severity::kWarn : Severity::kOk,
                           {{"governor", governor}}, "host-tuning");
    finding.observed = Num(s->value) + " CPU(s) on the " + governor + " governor";
    finding.expected = "performance";
    if (slow) {
      finding.advice = Num(s->value) + " CPU(s) scale their frequency down between bursts (" +
                       governor +
                       "): polling and completion handling pay the ramp-up on every burst; set "
                       "the performance governor (and make it persistent: tuned, cpupower "
                       "service)";
      finding.fix = "cpupower frequency-set -g performance";
    }
    findings.push_back(std::move(finding));
  }
  return findings;
}

std::vector<Finding> CheckMemlock(const Snapshot& now, const Snapshot*, const DoctorOptions&) {
  std::vector<Finding> findings;
  for (const Sample* limit : now.Find("rdma_process_locked_memory_limit_bytes")) {
    const Sample* exempt = now.Exact("rdma_process_pin_limit_exempt", limit->labels);
    if (exempt != nullptr && exempt->value == 1) {
      // ib_umem_get checks the limit only for tasks without CAP_IPC_LOCK (core/umem.c).
      Finding finding =
          Make("host.memlock", kArea, Severity::kOk, ProcessScope(*limit), "host-tuning");
      finding.observed =
          "RLIMIT_MEMLOCK " + Bytes(limit->value) + ", not applied: the process holds CAP_IPC_LOCK";
      finding.expected = "unlimited, or raised above the kernel default " +
                         Bytes(kKernelDefaultMemlockBytes) + " for RDMA";
      findings.push_back(std::move(finding));
      continue;
    }
    const bool low = limit->value <= kKernelDefaultMemlockBytes;
    Finding finding = Make("host.memlock", kArea, low ? Severity::kWarn : Severity::kOk,
                           ProcessScope(*limit), "host-tuning");
    finding.observed = "RLIMIT_MEMLOCK " + Bytes(limit->value);
    finding.expected = "unlimited, or raised above the kernel default " +
                       Bytes(kKernelDefaultMemlockBytes) + " for RDMA";
    if (low) {
      finding.advice = limit->Label("comm") + " may pin at most " + Bytes(limit->value) +
                       ": its registrations fail (ENOMEM) beyond that; raise it for the running "
                       "process, then where it starts (LimitMEMLOCK=infinity in its systemd "
                       "unit, memlock in /etc/security/limits.conf, --ulimit memlock=-1 for "
                       "containers)";
      finding.fix = FixLine(
          {"prlimit --pid ", HostValue(limit->Label("pid")), " --memlock=unlimited:unlimited"});
    }
    findings.push_back(std::move(finding));
  }
  return findings;
}

}  // namespace rdmascope::doctor
