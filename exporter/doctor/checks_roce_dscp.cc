// roce.dscp_trust: does RoCE's DSCP land on the RoCE priority? See checks_roce_config.h and
// docs/doctor.md. RoCE v2 packets are IP packets: without a VLAN tag they carry no PCP, so a NIC
// that trusts PCP only puts them on priority 0, and PFC on the RoCE priority does not protect
// them. A NIC trusts DSCP when the DCB APP table maps DSCPs to priorities (rdma_netdev_dscp_trust,
// from dcbnl; mlx5 writes all 64 entries on `mlnx_qos --trust dscp`).
#include <algorithm>
#include <set>

#include "doctor/check_util.h"
#include "doctor/checks_roce_config.h"

namespace rdmascope::doctor {
namespace {

constexpr const char* kId = "roce.dscp_trust";
constexpr const char* kArea = "roce";
constexpr const char* kRunbook = "rdmarocedscpnotonpfcpriority";

// The DSCP RoCE traffic of this port is sent with: rdma_cm's default ToS >> 2 when an
// administrator set one (roce.default_tos checks its priority), else --doctor.roce-dscp (26, the
// DSCP of NVIDIA's lossless RoCE configuration, which applications such as NCCL set themselves).
std::pair<int, std::string> RoceDscp(const Snapshot& now, const Sample& port,
                                     const DoctorOptions& options) {
  const auto tos = now.Value("rdma_port_default_roce_tos",
                             {{"device", port.Label("device")}, {"port", port.Label("port")}});
  if (tos && *tos > 0) {
    const int dscp = static_cast<int>(*tos) >> 2;
    return {dscp, "DSCP " + Num(dscp) + " (rdma_cm default ToS " + Num(*tos) + ")"};
  }
  return {options.roce_dscp, "DSCP " + Num(options.roce_dscp) + " (--doctor.roce-dscp)"};
}

std::string PriorityList(const std::vector<const Sample*>& entries) {
  std::string list;
  for (const Sample* entry : entries) list += (list.empty() ? "" : ", ") + entry->Label("priority");
  return list;
}

}  // namespace

std::vector<Finding> CheckDscpTrust(const Snapshot& now, const Snapshot*,
                                    const DoctorOptions& options) {
  const std::string priority = std::to_string(options.roce_priority);
  std::vector<Finding> findings;
  std::set<std::string> seen;  // a netdev carrying two ports is checked once
  for (const Sample* port : now.Find("rdma_port_info", {{"link_layer", "Ethernet"}})) {
    const std::string netdev = port->Label("netdev");
    if (netdev.empty() || !seen.insert(netdev).second) continue;
    Scope scope = PortScope(*port);
    scope.emplace_back("netdev", netdev);
    const auto trust = now.Value("rdma_netdev_dscp_trust", {{"device", netdev}});
    if (!trust) {
      findings.push_back(Skip(kId, kArea, std::move(scope), kRunbook,
                              "no rdma_netdev_dscp_trust for " + netdev +
                                  ": the driver has no DCB netlink, --no-collector.ethtool.pfc, "
                                  "or its APP table could not be read (--log.level=debug says "
                                  "why)"));
      continue;
    }
    const auto [dscp, dscp_text] = RoceDscp(now, *port, options);
    const std::string mapping = std::to_string(dscp) + ":" + priority;
    const bool pfc_on =
        now.Value("rdma_netdev_pfc_enabled", {{"device", netdev}, {"priority", priority}})
            .value_or(0) == 1;
    Finding finding = Make(kId, kArea, Severity::kOk, std::move(scope), kRunbook);
    finding.expected = "trust DSCP, " + Num(dscp) + " on priority " + priority +
                       " (--doctor.roce-priority), unless RoCE is VLAN-tagged with PCP " + priority;
    if (*trust == 0) {
      // Lossless set up on the RoCE priority but untagged RoCE never reaches it: warn. Without
      // PFC there, roce.pfc reports the larger problem; this one is context.
      finding.severity = pfc_on ? Severity::kWarn : Severity::kInfo;
      finding.observed = "trusts PCP only: the DCB APP table maps no DSCP; RoCE sends " + dscp_text;
      finding.advice = netdev + " classifies by VLAN PCP only, so untagged RoCE v2 traffic with " +
                       dscp_text + " runs on priority 0, not on priority " + priority +
                       (pfc_on ? " where PFC is on" : "") + ": trust DSCP, then DSCP " + Num(dscp) +
                       " maps to priority " + priority;
      const bool mlx5 =
          !now.Find("rdma_netdev_info", {{"device", netdev}, {"driver", "mlx5_core"}}).empty();
      finding.fix = mlx5 ? FixLine({"mlnx_qos -i ", HostValue(netdev), " --trust dscp"})
                         : FixLine({"dcb app add dev ", HostValue(netdev), " dscp-prio ", mapping});
      findings.push_back(std::move(finding));
      continue;
    }
    const auto entries = now.Find("rdma_netdev_dscp_priority_info",
                                  {{"device", netdev}, {"dscp", std::to_string(dscp)}});
    const bool on_roce_priority =
        std::any_of(entries.begin(), entries.end(),
                    [&](const Sample* entry) { return entry->Label("priority") == priority; });
    if (entries.empty()) {
      finding.severity = Severity::kWarn;
      finding.observed = "trusts DSCP, but the APP table has no entry for " + dscp_text;
      finding.advice = "the priority of RoCE's DSCP " + Num(dscp) + " on " + netdev +
                       " is left to the NIC's own map, which the kernel does not show: map it "
                       "to priority " +
                       priority;
      finding.fix = FixLine({"dcb app add dev ", HostValue(netdev), " dscp-prio ", mapping});
    } else if (!on_roce_priority) {
      finding.severity = Severity::kWarn;
      finding.observed = "trusts DSCP; " + dscp_text + " maps to priority " + PriorityList(entries);
      finding.advice = "RoCE traffic with DSCP " + Num(dscp) + " runs on priority " +
                       PriorityList(entries) + ", not on the RoCE priority " + priority +
                       (pfc_on ? " where PFC is on" : "") + ": map DSCP " + Num(dscp) +
                       " to priority " + priority;
      finding.fix = FixLine({"dcb app replace dev ", HostValue(netdev), " dscp-prio ", mapping});
    } else {
      finding.observed = "trusts DSCP; " + dscp_text + " maps to priority " + priority;
    }
    findings.push_back(std::move(finding));
  }
  return findings;
}

}  // namespace rdmascope::doctor
