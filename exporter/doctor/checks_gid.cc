// RoCE GID index and CQE compression. GID index: which GID table entry an application should use
// (ib_write_bw -x N, ibv_modify_qp's sgid_index, NCCL_IB_GID_INDEX). RoCE v2 is routable (UDP/IP);
// a RoCE v1 or a link-local entry picked by mistake is the usual cause of connections that never
// establish, often only with IPv6. The kernel adds one entry per IP address and RoCE type
// (drivers/infiniband/core/roce_gid_mgmt.c); an IPv4 address appears IPv4-mapped.
#include <cstdio>
#include <map>
#include <set>

#include "core/sysfs.h"
#include "doctor/check_util.h"
#include "doctor/checks_host_tuning.h"

namespace rdmascope::doctor {
namespace {

constexpr const char* kArea = "roce";
constexpr std::string_view kMappedPrefix = "0000:0000:0000:0000:0000:ffff:";

}  // namespace

std::optional<std::string> Ipv4OfGid(std::string_view gid) {
  if (!gid.starts_with(kMappedPrefix) || gid.size() != kMappedPrefix.size() + 9 ||
      gid[kMappedPrefix.size() + 4] != ':') {
    return std::nullopt;
  }
  const auto high = sysfs::ParseUnsigned("0x" + std::string(gid.substr(kMappedPrefix.size(), 4)));
  const auto low = sysfs::ParseUnsigned("0x" + std::string(gid.substr(kMappedPrefix.size() + 5)));
  if (!high || !low || *high > 0xffff || *low > 0xffff) return std::nullopt;
  char text[16];
  std::snprintf(text, sizeof text, "%u.%u.%u.%u", static_cast<unsigned>(*high >> 8),
                static_cast<unsigned>(*high & 0xff), static_cast<unsigned>(*low >> 8),
                static_cast<unsigned>(*low & 0xff));
  return std::string(text);
}

std::vector<Finding> CheckGidIndex(const Snapshot& now, const Snapshot*, const DoctorOptions&) {
  const std::string id = "roce.gid_index";
  const std::string runbook = "rdmanoroutablerocev2gid";
  std::vector<Finding> findings;
  for (const Sample* port : now.Find("rdma_port_info", {{"link_layer", "Ethernet"}})) {
    Scope scope = PortScope(*port);
    // Lowest index first: the entry tools pick when several match.
    std::map<int, std::string> ipv4, ipv6;  // index -> address
    for (const Sample* gid : now.Find("rdma_port_gid_info", {{"device", port->Label("device")},
                                                             {"port", port->Label("port")},
                                                             {"type", "RoCE v2"}})) {
      const auto index = sysfs::ParseUnsigned(gid->Label("index"));
      if (!index) continue;
      const std::string& text = gid->Label("gid");
      if (const auto v4 = Ipv4OfGid(text)) {
        ipv4.emplace(static_cast<int>(*index), *v4);
      } else if (!text.starts_with(
                     "fe80:")) {  // link-local: not routable, not what rdma_cm resolves
        ipv6.emplace(static_cast<int>(*index), text);
      }
    }
    const std::string netdev = port->Label("netdev").empty() ? "its netdev" : port->Label("netdev");
    if (ipv4.empty() && ipv6.empty()) {
      Finding finding = Make(id, kArea, Severity::kWarn, std::move(scope), runbook);
      finding.observed = "no RoCE v2 GID with an IPv4 or global IPv6 address";
      finding.expected = "a RoCE v2 GID for each address the application connects with";
      finding.advice = "the kernel creates RoCE v2 GIDs from the IP addresses of " + netdev +
                       ": without one, only link-local or RoCE v1 entries remain, which do not "
                       "route and make rdma_cm address resolution fail; give " +
                       netdev + " its IP address (and bring it up)";
      if (!port->Label("netdev").empty()) {
        finding.fix =
            FixLine({"ip address add ADDRESS/PREFIX dev ", HostValue(port->Label("netdev"))});
      }
      findings.push_back(std::move(finding));
      continue;
    }
    std::string use;
    if (!ipv4.empty()) {
      use = "index " + std::to_string(ipv4.begin()->first) + " (RoCE v2, IPv4 " +
            ipv4.begin()->second + ")";
    }
    if (!ipv6.empty()) {
      use += (use.empty() ? "" : "; for IPv6 ") + std::string("index ") +
             std::to_string(ipv6.begin()->first) + " (RoCE v2, IPv6 " + ipv6.begin()->second + ")";
    }
    // ok, with the index in `observed` (the line a healthy report prints) and in the advice.
    Finding finding = Make(id, kArea, Severity::kOk, std::move(scope), runbook);
    finding.observed = "GID " + use;
    finding.expected = "a RoCE v2 GID for each address the application connects with";
    finding.advice = "use GID " + use +
                     " where a GID index is set by hand (ib_write_bw -x, NCCL_IB_GID_INDEX); "
                     "rdma_cm applications pick it from the address" +
                     (ipv4.empty() ? ". No IPv4 RoCE v2 GID: IPv4 peers cannot connect" : "");
    findings.push_back(std::move(finding));
  }
  return findings;
}

// CQE compression (mlx5 private flag rx_cqe_compress): the NIC packs several completions of
// the netdev's Ethernet receive queues into one CQE. It does nothing for RDMA: verbs CQs ask
// for compression one by one (mlx5dv_create_cq, MLX5DV_CQ_INIT_ATTR_MASK_COMPRESSED_CQE), and
// mlx5 leaves the flag off by default on fast PCIe links (slow_pci_heuristic), so "off" is the
// normal state of most hosts. It is worth turning on only where the interface also receives IP
// traffic at a high packet rate (pitfalls.md: about 70% fewer interrupts on ConnectX-6).
std::vector<Finding> CheckCqeCompression(const Snapshot& now, const Snapshot* before,
                                         const DoctorOptions&) {
  const std::string id = "roce.cqe_compression";
  const std::string runbook = "rdmacqecompressionoff";
  std::vector<Finding> findings;
  std::set<std::string> seen;
  for (const Sample* port : now.Find("rdma_port_info", {{"link_layer", "Ethernet"}})) {
    const std::string& netdev = port->Label("netdev");
    if (netdev.empty() || !seen.insert(netdev).second) continue;
    const auto on =
        now.Value("rdma_netdev_private_flag", {{"device", netdev}, {"flag", "rx_cqe_compress"}});
    Scope scope = PortScope(*port);
    scope.emplace_back("netdev", netdev);
    if (!on) {
      findings.push_back(Skip(id, kArea, std::move(scope), runbook,
                              "no rx_cqe_compress private flag on " + netdev +
                                  " (not an mlx5 netdev, or its private flags were unreadable)"));
      continue;
    }
    const auto rate = IpPacketRate(now, before, netdev, "rx");
    const bool matters = *on == 0 && rate && *rate > kBusyIpPacketsPerSecond;
    Finding finding =
        Make(id, kArea, matters ? Severity::kInfo : Severity::kOk, std::move(scope), runbook);
    finding.observed = std::string("rx_cqe_compress ") + (*on == 0 ? "off" : "on") + ", " +
                       IpPacketRateText(rate, before, "rx");
    finding.expected = "on where the interface receives more than " + Num(kBusyIpPacketsPerSecond) +
                       " IP packets/s (it does not affect RDMA completions)";
    if (matters) {
      finding.advice =
          "the flag compresses the completions of " + netdev +
          "'s Ethernet receive queues only (RDMA completions are not affected: verbs CQs ask "
          "for compression with mlx5dv_create_cq); at this IP packet rate it cuts their "
          "interrupts and PCIe traffic (about 70% fewer interrupts on ConnectX-6). mlx5 keeps "
          "it off while RX hardware timestamping is on";
      finding.fix =
          FixLine({"ethtool --set-priv-flags ", HostValue(netdev), " rx_cqe_compress on"});
    }
    findings.push_back(std::move(finding));
  }
  return findings;
}

}  // namespace rdmascope::doctor
