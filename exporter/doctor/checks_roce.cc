// RoCE network configuration of the interfaces that carry RDMA ports: netdev MTU, PFC on the
// RoCE priority, global pause, pause storms, interrupt coalescing. A RoCE netdev is the
// `netdev` label of an Ethernet rdma_port_info (the rdma:roce_netdev:info recording rule).
#include <set>

#include "doctor/check_util.h"
#include "doctor/checks.h"

namespace rdmascope::doctor {
namespace {

constexpr const char* kArea = "roce";

struct RoceNetdev {
  std::string netdev;  // empty: the port's interface is not in this network namespace
  Scope scope;         // device, port, netdev
};

std::vector<RoceNetdev> RoceNetdevs(const Snapshot& now) {
  std::vector<RoceNetdev> netdevs;
  for (const Sample* port : now.Find("rdma_port_info", {{"link_layer", "Ethernet"}})) {
    Scope scope = PortScope(*port);
    if (!port->Label("netdev").empty()) scope.emplace_back("netdev", port->Label("netdev"));
    netdevs.push_back({port->Label("netdev"), std::move(scope)});
  }
  return netdevs;
}

constexpr const char* kNoNetdev =
    "the port has no netdev in this network namespace (rdma_port_info netdev is empty: RDMA "
    "netlink did not name one); run doctor in the namespace that holds the interface";

}  // namespace

std::vector<Finding> CheckNetdevMtu(const Snapshot& now, const Snapshot*,
                                    const DoctorOptions& options) {
  std::vector<Finding> findings;
  const std::string id = "roce.netdev_mtu";
  const std::string runbook = "rdmanetdevmtutoosmallforroce";
  for (const RoceNetdev& roce : RoceNetdevs(now)) {
    if (roce.netdev.empty()) {
      findings.push_back(Skip(id, kArea, roce.scope, runbook, kNoNetdev));
      continue;
    }
    const auto mtu = now.Value("rdma_netdev_mtu_bytes", {{"device", roce.netdev}});
    if (!mtu) {
      findings.push_back(Skip(id, kArea, roce.scope, runbook,
                              "no rdma_netdev_mtu_bytes for " + roce.netdev +
                                  " (the ethtool collector did not read it)"));
      continue;
    }
    const bool low = *mtu < options.min_netdev_mtu;
    Finding finding = Make(id, kArea, low ? Severity::kWarn : Severity::kOk, roce.scope, runbook);
    finding.observed = "netdev MTU " + Num(*mtu);
    finding.expected = "at least " + Num(options.min_netdev_mtu);
    if (low) {
      finding.advice = roce.netdev + " has MTU " + Num(*mtu) + ": RoCE needs about " +
                       Num(options.min_netdev_mtu) +
                       " to carry 4096-byte RDMA payloads and silently falls back to a smaller "
                       "RDMA MTU; set " +
                       Num(options.min_netdev_mtu) +
                       " (or 9000), on the switches too, and make it persistent (the CNI or "
                       "network configuration that left it)";
      finding.fix =
          FixLine({"ip link set dev ", HostValue(roce.netdev), " mtu ", Num(options.min_netdev_mtu)});
    }
    findings.push_back(std::move(finding));
  }
  return findings;
}

std::vector<Finding> CheckPfc(const Snapshot& now, const Snapshot*, const DoctorOptions& options) {
  std::vector<Finding> findings;
  const std::string id = "roce.pfc";
  const std::string runbook = "rdmapfcnotonrocepriority";
  const std::string priority = std::to_string(options.roce_priority);
  std::set<std::string> seen;  // a netdev carrying two ports is checked once
  for (const RoceNetdev& roce : RoceNetdevs(now)) {
    if (roce.netdev.empty()) {
      findings.push_back(Skip(id, kArea, roce.scope, runbook, kNoNetdev));
      continue;
    }
    if (!seen.insert(roce.netdev).second) continue;
    const auto enabled =
        now.Value("rdma_netdev_pfc_enabled", {{"device", roce.netdev}, {"priority", priority}});
    if (!enabled) {
      findings.push_back(
          Skip(id, kArea, roce.scope, runbook,
               "no rdma_netdev_pfc_enabled for " + roce.netdev +
                   ": the driver has no DCB netlink, or --no-collector.ethtool.pfc"));
      continue;
    }
    Finding finding =
        Make(id, kArea, *enabled == 0 ? Severity::kInfo : Severity::kOk, roce.scope, runbook);
    finding.observed =
        "PFC " + std::string(*enabled == 0 ? "off" : "on") + " on priority " + priority;
    finding.expected = "PFC on on priority " + priority +
                       " (--doctor.roce-priority), unless the fabric is deliberately lossy with "
                       "ECN only";
    if (*enabled == 0) {
      finding.advice = "without PFC on priority " + priority +
                       ", congestion drops become retransmissions: enable it on " + roce.netdev +
                       " consistently with the switches";
      finding.fix = FixLine({"dcb pfc set dev ", HostValue(roce.netdev), " prio-pfc ", priority, ":on"});
    }
    findings.push_back(std::move(finding));
  }
  return findings;
}

// Global (802.3x) pause pauses every class, RoCE's and the rest: it is seen as global pause
// frames moving while the RoCE netdev should use PFC. The ethtool pause parameters are not
// collected yet, so frames seen over the window are the evidence.
std::vector<Finding> CheckGlobalPause(const Snapshot& now, const Snapshot* before,
                                      const DoctorOptions& options) {
  std::vector<Finding> findings;
  const std::string id = "roce.global_pause";
  const std::string runbook = "rdmapfcnotonrocepriority";
  std::set<std::string> seen;
  for (const RoceNetdev& roce : RoceNetdevs(now)) {
    if (roce.netdev.empty() || !seen.insert(roce.netdev).second) continue;
    const auto frames = now.Find("rdma_netdev_pause_frames_total",
                                 {{"device", roce.netdev}, {"priority", "global"}});
    if (frames.empty()) continue;  // the driver has no global pause counter
    if (before == nullptr) {
      findings.push_back(Skip(id, kArea, roce.scope, runbook, kNeedsWindow));
      continue;
    }
    double increase = 0;
    size_t measured = 0;
    for (const Sample* series : frames) {
      const auto delta = Increase(*before, "rdma_netdev_pause_frames_total", *series);
      if (!delta) continue;  // reset during the window: no figure for this direction
      ++measured;
      increase += *delta;
    }
    if (measured == 0) {
      findings.push_back(Skip(id, kArea, roce.scope, runbook,
                              "the global pause counters were reset during the window"));
      continue;
    }
    Finding finding =
        Make(id, kArea, increase > 0 ? Severity::kWarn : Severity::kOk, roce.scope, runbook);
    finding.observed =
        Num(increase) + " global pause frames in " + Num(now.seconds() - before->seconds()) + " s";
    finding.expected = "none: flow control per priority (PFC on priority " +
                       std::to_string(options.roce_priority) + "), not global pause";
    if (increase > 0) {
      finding.advice = "802.3x global pause is active on " + roce.netdev +
                       ": it stops every traffic class, not only RoCE's; turn it off and use PFC "
                       "on priority " +
                       std::to_string(options.roce_priority);
      finding.fix = FixLine({"ethtool -A ", HostValue(roce.netdev), " rx off tx off"});
    }
    findings.push_back(std::move(finding));
  }
  return findings;
}

std::vector<Finding> CheckPauseStorm(const Snapshot& now, const Snapshot* before,
                                     const DoctorOptions&) {
  std::vector<Finding> findings;
  const std::string id = "roce.pause_storm";
  for (const Sample* series :
       now.Find("rdma_netdev_pause_storm_events_total", {{"level", "error"}})) {
    Scope scope{{"netdev", series->Label("device")}};
    if (before == nullptr) {
      findings.push_back(Skip(id, kArea, std::move(scope), "rdmapausestorm", kNeedsWindow));
      continue;
    }
    const auto increase = Increase(*before, "rdma_netdev_pause_storm_events_total", *series);
    if (!increase) {
      findings.push_back(Skip(id, kArea, std::move(scope), "rdmapausestorm",
                              "the pause storm counter was reset during the window"));
      continue;
    }
    Finding finding = Make(id, kArea, *increase > 0 ? Severity::kCrit : Severity::kOk,
                           std::move(scope), "rdmapausestorm");
    finding.observed = Num(*increase) + " pause storm error events in " +
                       Num(now.seconds() - before->seconds()) + " s (" + Num(series->value) +
                       " since the driver loaded)";
    finding.expected = "0";
    if (*increase > 0) {
      finding.advice = Num(*increase) +
                       " storm event(s) in the window: the NIC stopped sending "
                       "pause frames after pausing too long, so the "
                       "lossless class now drops: find the receiver that cannot drain (a hung "
                       "host, PCIe, a process not polling) and keep storm prevention on";
      finding.fix = FixLine(
          {"ethtool --set-tunable ", HostValue(series->Label("device")), " pfc-prevention-tout 100"});
    }
    findings.push_back(std::move(finding));
  }
  return findings;
}

// Interrupt coalescing (ethtool -C) moderates the interrupts of the netdev's Ethernet queues.
// RDMA completions are not moderated by it: a verbs CQ's moderation is its own (ibv_modify_cq
// with IBV_CQ_ATTR_MODERATE), and polling applications take no interrupts at all. So
// coalescing off matters only where the interface receives IP traffic at a high packet rate.
std::vector<Finding> CheckCoalescing(const Snapshot& now, const Snapshot* before,
                                     const DoctorOptions&) {
  std::vector<Finding> findings;
  const std::string id = "roce.coalescing";
  const std::string runbook = "rdmainterruptcoalescingdisabled";
  std::set<std::string> seen;
  for (const RoceNetdev& roce : RoceNetdevs(now)) {
    if (roce.netdev.empty() || !seen.insert(roce.netdev).second) continue;
    const auto usecs =
        now.Value("rdma_netdev_coalesce_usecs", {{"device", roce.netdev}, {"direction", "rx"}});
    const auto adaptive =
        now.Value("rdma_netdev_coalesce_adaptive", {{"device", roce.netdev}, {"direction", "rx"}});
    if (!usecs || !adaptive) {
      findings.push_back(Skip(id, kArea, roce.scope, runbook,
                              "no rx coalescing settings for " + roce.netdev +
                                  " (ETHTOOL_GCOALESCE not supported or not read)"));
      continue;
    }
    const bool off = *usecs == 0 && *adaptive == 0;
    const auto rate = IpPacketRate(now, before, roce.netdev, "rx");
    const bool matters = off && rate && *rate > kBusyIpPacketsPerSecond;
    Finding finding =
        Make(id, kArea, matters ? Severity::kInfo : Severity::kOk, roce.scope, runbook);
    finding.observed = "rx-usecs " + Num(*usecs) + ", adaptive-rx " + (*adaptive ? "on" : "off") +
                       ", " + IpPacketRateText(rate, before, "rx");
    finding.expected =
        "adaptive-rx on, or rx-usecs > 0 (ConnectX: rx-usecs 8, tx-usecs 16), "
        "where the interface receives more than " +
        Num(kBusyIpPacketsPerSecond) + " IP packets/s (RDMA is not affected)";
    if (matters) {
      finding.advice =
          "at this IP packet rate an interrupt per packet costs CPU: turn adaptive coalescing "
          "on, or set rx-usecs 8 (and tx-usecs 16) as on ConnectX. This moderates " +
          roce.netdev +
          "'s Ethernet queues only: RDMA completion events are moderated per CQ "
          "(ibv_modify_cq), not by ethtool";
      finding.fix = FixLine({"ethtool -C ", HostValue(roce.netdev), " adaptive-rx on"});
    }
    findings.push_back(std::move(finding));
  }
  return findings;
}

}  // namespace rdmascope::doctor
