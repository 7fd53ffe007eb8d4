#include "doctor/checks.h"

#include <algorithm>
#include <map>

#include "doctor/check_util.h"
#include "doctor/checks_host_tuning.h"
#include "doctor/checks_link_health.h"
#include "doctor/checks_roce_config.h"
#include "doctor/checks_sizing.h"

namespace rdmascope::doctor {
namespace {

constexpr std::string_view kRdma[] = {"rdma"};
constexpr std::string_view kLink[] = {"link"};
constexpr std::string_view kEthtool[] = {"ethtool"};
constexpr std::string_view kRdmaEthtool[] = {"rdma", "ethtool"};
constexpr std::string_view kVerbs[] = {"verbs"};
constexpr std::string_view kMr[] = {"mr"};
constexpr std::string_view kHost[] = {"host"};
constexpr std::string_view kResources[] = {"resources"};
constexpr std::string_view kRdmaHost[] = {"rdma", "host"};
constexpr std::string_view kVerbsRdma[] = {"verbs", "rdma"};
constexpr std::string_view kResourcesHost[] = {"resources", "host"};
constexpr std::string_view kRdmaLink[] = {"rdma", "link"};

constexpr Check kChecks[] = {
    {"links.port_state", "links", kRdma, "rdmaportdown", &CheckPortState},
    {"links.active_mtu", "links", kRdma, "rdmaactivemtubelowmax", &CheckActiveMtu},
    {"links.crc_errors", "links", kRdmaEthtool, "rdmacrcerrors", &CheckCrcErrors},
    {"links.symbol_errors", "links", kRdma, "rdmasymbolerrors", &CheckSymbolErrors},
    {"links.link_downed", "links", kRdma, "rdmalinkflapping", &CheckLinkDowned},
    {"links.iba_errors", "links", kRdma, "rdmasymbolerrors", &CheckIbaErrors},
    {"links.counter_saturated", "links", kRdma, "rdmaportcountersaturated", &CheckSaturated},
    {"links.retransmissions", "links", kRdma, "rdmaretransmissions", &CheckRetransmissions},
    // Link health (issue 40): checks_link_optics.cc, checks_link_ib.cc.
    {"links.optics_rx_power", "links", kLink, "rdmaopticrxpowerbelowwarning", &CheckOpticsRxPower},
    {"links.optics_temperature", "links", kLink, "rdmaoptictemperaturehigh",
     &CheckOpticsTemperature},
    {"links.optics_module_state", "links", kLink, "rdmaopticmodulefault", &CheckOpticsModuleState},
    {"links.ib_symbol_ber", "links", kRdmaLink, "rdmaibsymbolberhigh", &CheckIbSymbolBer},
    {"links.ib_link_degraded", "links", kRdmaLink, "rdmaiblinkwidthdegraded", &CheckIbLinkDegraded},
    {"links.fec_pre_ber", "links", kLink, "rdmalinkprefecberhigh", &CheckFecPreBer},
    {"links.fec_uncorrectable", "links", kLink, "rdmalinkfecuncorrectable", &CheckFecUncorrectable},
    {"links.speed_degraded", "links", kLink, "rdmalinkspeeddegraded", &CheckLinkSpeed},
    {"links.flapping", "links", kLink, "rdmalinkwentdown", &CheckLinkFlapping},
    {"roce.netdev_mtu", "roce", kRdmaEthtool, "rdmanetdevmtutoosmallforroce", &CheckNetdevMtu},
    {"roce.pfc", "roce", kRdmaEthtool, "rdmapfcnotonrocepriority", &CheckPfc},
    {"roce.global_pause", "roce", kRdmaEthtool, "rdmapfcnotonrocepriority", &CheckGlobalPause},
    {"roce.pause_storm", "roce", kEthtool, "rdmapausestorm", &CheckPauseStorm},
    {"roce.coalescing", "roce", kRdmaEthtool, "rdmainterruptcoalescingdisabled", &CheckCoalescing},
    {"roce.gid_index", "roce", kRdma, "rdmanoroutablerocev2gid", &CheckGidIndex},
    {"roce.cqe_compression", "roce", kRdmaEthtool, "rdmacqecompressionoff", &CheckCqeCompression},
    {"roce.default_tos", "roce", kRdmaHost, "roce-default-tos", &CheckDefaultTos},
    {"roce.dscp_trust", "roce", kRdmaEthtool, "rdmarocedscpnotonpfcpriority", &CheckDscpTrust},
    {"roce.ecn", "roce", kRdmaHost, "rdmacongestionnotifications", &CheckEcn},
    {"nic.pcie_link", "nic", kHost, "rdmapciedowntrained", &CheckPcieLink},
    {"nic.firmware_uniform", "nic", kRdma, "rdmafirmwaremismatch", &CheckFirmwareUniform},
    {"nic.irq_affinity", "nic", kHost, "rdmairqsoffnicnode", &CheckIrqAffinity},
    {"nic.xps", "nic", kHost, "rdmaxpsoffnicnode", &CheckXps},
    {"queues.cq_capacity", "queues", kVerbs, "rdmacqundersized", &CheckCqCapacity},
    {"queues.srq_limit", "queues", kVerbs, "rdmasrqlimitreachedoften", &CheckSrqLimit},
    {"queues.qp_depth", "queues", kVerbsRdma, "rdmaqpdepthbelowbdp", &CheckQpDepth},
    {"queues.qps_per_core", "queues", kResourcesHost, "queue-pairs-per-core", &CheckQpsPerCore},
    {"queues.srq_sizing", "queues", kVerbs, "rdmasrqlimitreachedoften", &CheckSrqSizing},
    {"queues.receive_starvation", "queues", kRdma, "rdmareceivestarvation",
     &CheckReceiveStarvation},
    {"queues.peer_receive_starvation", "queues", kRdma, "rdmapeerreceivestarvation",
     &CheckPeerReceiveStarvation},
    {"queues.qp_type", "queues", kResources, "rdmaucqueuepairs", &CheckQpTypes},
    {"memory.mr_page_multiple", "memory", kMr, "rdmamrlengthnotpagemultiple", &CheckMrPageMultiple},
    {"memory.mr_hugepage", "memory", kMr, "rdmamrnotonhugepages", &CheckMrHugepage},
    {"memory.pinned_vs_memlock", "memory", kMr, "rdmapinnedmemoryhitslockedlimitin48h",
     &CheckPinnedVsMemlock},
    {"memory.registration_churn", "memory", kMr, "rdmamrregistrationchurn",
     &CheckRegistrationChurn},
    {"memory.mr_leak", "memory", kMr, "rdmamrleak", &CheckMrLeak},
    {"memory.pinned_growth", "memory", kMr, "rdmapinnedmemorygrowing", &CheckPinnedGrowth},
    {"host.numa_placement", "host", kMr, "rdmaprocessoffnicnumanode", &CheckNumaPlacement},
    {"host.thp", "host", kHost, "host-tuning", &CheckThp},
    {"host.hugepages", "host", kHost, "host-tuning", &CheckHugepages},
    {"host.numa_balancing", "host", kHost, "host-tuning", &CheckNumaBalancing},
    {"host.cpu_governor", "host", kHost, "host-tuning", &CheckCpuGovernor},
    {"host.kernel_modules", "host", kHost, "host-tuning", &CheckKernelModules},
    {"host.memlock", "host", kMr, "host-tuning", &CheckMemlock},
    {"host.collectors", "host", {}, "rdmascopecollectorfailing", &CheckCollectors},
    {"host.probes", "host", {}, "rdmascopeprobedetached", &CheckProbes},
};

// Why a check had nothing to look at: its collectors found no source on this host, or the
// host has none of what it checks (no RoCE port, no InfiniBand counter...).
std::string NoSubjectReason(const Snapshot& now, const Check& check) {
  for (std::string_view collector : check.needs) {
    const auto it = now.collectors().find(std::string(collector));
    if (it != now.collectors().end() && it->second.no_data) {
      return "collector " + std::string(collector) +
             " found nothing to collect: " + it->second.detail;
    }
  }
  return "nothing on this host for this check to look at (none of the series it reads)";
}

// A finding about a process names the workload it runs for (rdma_process_workload_info: the
// pod, Slurm job or systemd unit), which is whom its advice is for on a shared host.
void AddWorkload(const Snapshot& now, Finding& finding) {
  const auto pid = std::find_if(finding.scope.begin(), finding.scope.end(),
                                [](const auto& entry) { return entry.first == "pid"; });
  if (pid == finding.scope.end()) return;
  const std::vector<const Sample*> info =
      now.Find("rdma_process_workload_info", {{"pid", pid->second}});
  if (info.size() != 1) return;
  for (const char* label : {"namespace", "pod", "container", "pod_uid", "container_id",
                            "slurm_job_id", "slurm_step_id", "systemd_unit"}) {
    const std::string value = info.front()->Label(label);
    if (!value.empty()) finding.scope.emplace_back(label, value);
  }
}

}  // namespace

std::span<const Check> AllChecks() { return kChecks; }

std::vector<Finding> RunChecks(const Snapshot& now, const Snapshot* before,
                               const DoctorOptions& options) {
  std::vector<Finding> findings;
  for (const Check& check : kChecks) {
    std::optional<std::string> unavailable;
    for (std::string_view collector : check.needs) {
      if (!unavailable) unavailable = now.Unavailable(collector);
    }
    if (unavailable) {
      findings.push_back(NothingToCheck(std::string(check.id), std::string(check.area),
                                        std::string(check.runbook), *unavailable));
      continue;
    }
    auto found = check.run(now, before, options);
    if (found.empty()) {
      // Every check appears in every report: a person (and a fleet tool) sees what was not
      // looked at and why, instead of an area that silently vanished.
      findings.push_back(NothingToCheck(std::string(check.id), std::string(check.area),
                                        std::string(check.runbook), NoSubjectReason(now, check)));
    }
    for (Finding& finding : found) AddWorkload(now, finding);
    std::move(found.begin(), found.end(), std::back_inserter(findings));
  }
  return findings;
}

std::optional<double> FastestPortDataRate(const Snapshot& now, const std::string& device) {
  for (const char* name :
       {"rdma_port_data_rate_bytes_per_second", "rdma_port_rate_bytes_per_second"}) {
    std::optional<double> fastest;
    for (const Sample* rate : now.Find(name, {{"device", device}})) {
      if (rate->value > 0) fastest = std::max(fastest.value_or(0), rate->value);
    }
    if (fastest) return fastest;
  }
  return std::nullopt;
}

std::optional<double> IpPacketRate(const Snapshot& now, const Snapshot* before,
                                   const std::string& netdev, std::string_view direction) {
  if (before == nullptr) return std::nullopt;
  const Sample* packets = now.Exact(
      "rdma_ethtool_stat", {{"device", netdev}, {"stat", std::string(direction) + "_packets"}});
  if (packets == nullptr) return std::nullopt;
  return Rate(now, *before, "rdma_ethtool_stat", *packets);
}

std::string IpPacketRateText(std::optional<double> rate, const Snapshot* before,
                             std::string_view direction) {
  const bool received = direction == "rx";
  if (rate) {
    return Num(std::round(*rate)) + " IP packets/s " + (received ? "received" : "sent");
  }
  return before == nullptr
             ? "IP packet rate unknown (no window)"
             : "IP packet rate unknown (no " + std::string(direction) + "_packets ethtool stat)";
}

Finding NothingToCheck(std::string id, std::string area, std::string runbook, std::string reason) {
  return Skip(std::move(id), std::move(area), {}, std::move(runbook), std::move(reason));
}

std::vector<Finding> HwCounterRateCheck(const Snapshot& now, const Snapshot* before,
                                        std::span<const char* const> counters,
                                        const RateCheck& check) {
  std::map<std::pair<std::string, std::string>, std::vector<const Sample*>> ports;
  for (const char* counter : counters) {
    for (const Sample* series : now.Find("rdma_port_hw_counter_total", {{"counter", counter}})) {
      ports[{series->Label("device"), series->Label("port")}].push_back(series);
    }
  }
  std::vector<Finding> findings;
  for (const auto& [key, series] : ports) {
    Scope scope{{"device", key.first}, {"port", key.second}};
    if (before == nullptr) {
      findings.push_back(Skip(check.id, check.area, std::move(scope), check.runbook, kNeedsWindow));
      continue;
    }
    double rate = 0;
    double worst_rate = 0;
    std::string worst;
    size_t measured = 0;
    for (const Sample* counter : series) {
      const auto r = Rate(now, *before, "rdma_port_hw_counter_total", *counter);
      if (!r) continue;  // reset or new during the window: no honest rate for this one
      ++measured;
      rate += *r;
      if (*r > worst_rate) {
        worst_rate = *r;
        worst = counter->Label("counter");
      }
    }
    if (measured == 0) {
      findings.push_back(Skip(check.id, check.area, std::move(scope), check.runbook,
                              "every counter was reset or appeared during the window"));
      continue;
    }
    const bool high = rate > check.threshold;
    Finding finding = Make(check.id, check.area, high ? Severity::kWarn : Severity::kOk,
                           std::move(scope), check.runbook);
    finding.observed = Num(rate) + " " + check.what + "/s over " +
                       Num(now.seconds() - before->seconds()) + " s" +
                       (worst.empty() ? "" : " (mostly " + worst + ")");
    finding.expected = "at most " + Num(check.threshold) + "/s";
    if (high) finding.advice = Num(rate) + "/s: " + check.advice;
    findings.push_back(std::move(finding));
  }
  return findings;
}

}  // namespace rdmascope::doctor
