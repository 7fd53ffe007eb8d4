// Host: NUMA placement of RDMA processes, and the exporter's own health (a collector that
// failed, eBPF probes that did not attach), which decides what doctor could see at all.
#include "doctor/check_util.h"
#include "doctor/checks.h"

namespace rdmascope::doctor {
namespace {

constexpr const char* kArea = "host";

}  // namespace

std::vector<Finding> CheckNumaPlacement(const Snapshot& now, const Snapshot*,
                                        const DoctorOptions& options) {
  std::vector<Finding> findings;
  const std::string id = "host.numa_placement";
  const std::string runbook = "rdmaprocessoffnicnumanode";
  for (const Sample* ratio : now.Find("rdma_process_remote_numa_thread_ratio")) {
    const bool off = ratio->value > options.remote_numa_ratio;
    Finding finding =
        Make(id, kArea, off ? Severity::kWarn : Severity::kOk, ProcessScope(*ratio), runbook);
    const auto node = now.Value("rdma_device_numa_node", {{"device", ratio->Label("device")}});
    finding.observed = Percent(ratio->value) +
                       " of its RDMA threads last ran on another NUMA node "
                       "than " +
                       ratio->Label("device") + (node ? " (node " + Num(*node) + ")" : "");
    finding.expected = "at most " + Percent(options.remote_numa_ratio);
    if (off) {
      const std::string target = node ? Num(*node) : "N";
      finding.advice =
          "every DMA and doorbell crosses the socket interconnect (local placement "
          "cut access latency by about 30%): run " +
          ratio->Label("comm") + " on node " + target + ", CPUs and memory";
      // The comm is the tenant's to choose (prctl PR_SET_NAME): quoted, or no fix.
      finding.fix = FixLine({"numactl --cpunodebind=", target, " --membind=", target, " -- ",
                             HostValue(ratio->Label("comm"))});
    }
    findings.push_back(std::move(finding));
  }
  if (findings.empty()) {
    findings.push_back(
        NothingToCheck(id, kArea, runbook,
                       "no rdma_process_remote_numa_thread_ratio series: no process holds "
                       "/dev/infiniband/uverbs* open, or the devices report no NUMA node"));
  }
  return findings;
}

std::vector<Finding> CheckCollectors(const Snapshot& now, const Snapshot*, const DoctorOptions&) {
  std::vector<Finding> findings;
  for (const auto& [name, outcome] : now.collectors()) {
    Finding finding =
        Make("host.collectors", kArea, outcome.failed ? Severity::kWarn : Severity::kOk,
             {{"collector", name}}, "rdmascopecollectorfailing");
    finding.observed = outcome.failed    ? "failed: " + outcome.detail
                       : outcome.no_data ? "no data: " + outcome.detail
                                         : "ok: " + outcome.detail;
    finding.expected = "ok, or no data on a host without that source";
    if (outcome.failed) {
      finding.advice = "the checks that read the " + name +
                       " collector's series are skipped; fix the cause above (`rdmascope check` "
                       "shows every collector's state)";
    }
    findings.push_back(std::move(finding));
  }
  return findings;
}

std::vector<Finding> CheckProbes(const Snapshot& now, const Snapshot*, const DoctorOptions&) {
  std::vector<Finding> findings;
  for (const Sample* probe : now.Find("rdmascope_probe_attached")) {
    const std::string& name = probe->Label("probe");
    const bool detached = probe->value == 0;
    Finding finding = Make("host.probes", kArea, detached ? Severity::kWarn : Severity::kOk,
                           {{"probe", name}}, "rdmascopeprobedetached");
    std::string reason;
    if (const auto it = now.collectors().find(name); it != now.collectors().end()) {
      reason = it->second.probe_error;
    }
    finding.observed =
        detached ? "not attached" + (reason.empty() ? "" : ": " + reason) : "attached";
    finding.expected = "attached";
    if (detached) {
      finding.advice = "without the " + name +
                       " probes the queue and registration checks have no data: run doctor as "
                       "root on a kernel with BTF, and name the libibverbs the applications load "
                       "(--probe.library) when it is not the system's";
      finding.fix = "rdmascope check --probe.strict";
    }
    findings.push_back(std::move(finding));
  }
  return findings;
}

}  // namespace rdmascope::doctor
