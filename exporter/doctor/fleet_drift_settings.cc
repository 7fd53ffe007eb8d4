// Fleet drift's settings: each compared across the hosts of one kind, with the fleet rule's
// severity and runbook anchor and the command that gives an outlier the majority's value.
#include <cstdlib>
#include <set>

#include "doctor/check_util.h"
#include "doctor/fleet_drift_parts.h"

namespace rdmascope::doctor::fleet_drift {
namespace {

// "3,4" from {0: 0, 3: 1, 4: 1}; "none" when no priority is on.
std::string OnPriorities(const std::vector<const Sample*>& series, const std::string& label) {
  std::set<int> on;
  for (const Sample* sample : series) {
    if (sample->value != 0) on.insert(std::atoi(sample->Label(label).c_str()));
  }
  std::string text;
  for (int priority : on) text += (text.empty() ? "" : ",") + std::to_string(priority);
  return text.empty() ? "none" : text;
}

}  // namespace

std::vector<Setting> Settings(const DoctorOptions& options) {
  std::vector<Setting> settings;
  settings.push_back(
      {"fleet.firmware", "rdmafleetfirmwaredrift", Severity::kWarn, false, "firmware",
       "firmware changes congestion control and error recovery, and a job spanning this host "
       "runs at the pace of its odd NIC; flash the majority's version (IMAGE: its image for "
       "this board) or move the whole fleet to one newer version, then mlxfwreset or reboot",
       [](const Host& host, Groups& groups) {
         for (const Sample* info : host.now->Find("rdma_device_info")) {
           const std::string& version = info->Label("firmware_version");
           const Kind* kind = host.KindOf(info->Label("device"));
           if (version.empty() || kind == nullptr) continue;
           Entry entry{host.instance, {{"device", info->Label("device")}}, version, 0, {}};
           entry.detail["board_id"] = info->Label("board_id");
           const auto pci =
               host.now->Find("rdma_pcie_link_width_lanes", {{"device", info->Label("device")}});
           if (!pci.empty()) entry.detail["pci"] = pci.front()->Label("pci_address");
           groups[*kind].push_back(std::move(entry));
         }
       },
       [](const Entry& outlier, const Entry&) -> std::string {
         // mlxfwmanager names a device by its PCI address; without -d it would update every NIC.
         if (!outlier.detail.at("board_id").starts_with("MT_")) return "";
         const auto pci = outlier.detail.find("pci");
         if (pci == outlier.detail.end()) return "mlxfwmanager -u -d PCI_ADDRESS -i IMAGE";
         return FixLine({"mlxfwmanager -u -d ", HostValue(pci->second), " -i IMAGE"});
       }});
  settings.push_back(
      {"fleet.driver", "rdmafleetdriverdrift", Severity::kWarn, false, "driver",
       "the driver (and, for an inbox driver, the kernel whose release it reports) differs: "
       "install the fleet's driver package (MLNX_OFED, DOCA-OFED) or boot the fleet's kernel; "
       "ethtool -i shows it",
       [](const Host& host, Groups& groups) {
         for (const RoceNetdev& roce : host.roce) {
           const auto info = host.now->Find("rdma_netdev_info", {{"device", roce.netdev}});
           if (info.empty() || info.front()->Label("driver_version").empty()) continue;
           groups[roce.kind].push_back(
               {host.instance,
                roce.scope,
                info.front()->Label("driver") + " " + info.front()->Label("driver_version"),
                0,
                {}});
         }
       },
       nullptr});
  settings.push_back(
      {"fleet.link_rate", "rdmafleetlinkratebelowpeers", Severity::kWarn, true, "link rate",
       "the link trained low (a cable or transceiver that negotiated down, fewer lanes, a switch "
       "port set slower) and every collective spanning it runs at its rate; compare ibstat or "
       "ethtool (speed, lanes) with a peer's, reseat or replace the cable or transceiver, check "
       "the switch port's speed and FEC",
       [](const Host& host, Groups& groups) {
         for (const Sample* rate : host.now->Find("rdma_port_rate_bytes_per_second")) {
           const Kind* kind = host.KindOf(rate->Label("device"));
           if (kind == nullptr) continue;
           const auto info = host.now->Find("rdma_port_info", {{"device", rate->Label("device")},
                                                               {"port", rate->Label("port")}});
           Kind peers = *kind;
           peers.extra_name = "link_layer";
           peers.extra = info.empty() ? "" : info.front()->Label("link_layer");
           const double gbps = rate->value * 8 / 1e9;
           groups[peers].push_back({host.instance,
                                    PortScopeWithNetdev(*host.now, *rate),
                                    Num(gbps) + " Gb/s",
                                    gbps,
                                    {}});
         }
       },
       nullptr});
  for (const bool width : {false, true}) {
    settings.push_back(
        {width ? "fleet.pcie_width" : "fleet.pcie_speed", "rdmafleetpciebelowpeers",
         Severity::kWarn, true, width ? "PCIe link width" : "PCIe link speed",
         "the NIC cannot reach the rate its peers do (a slower or narrower slot, a riser, a BIOS "
         "setting, or a link that trained low); compare lspci -vv (LnkSta, LnkCap) with a peer's "
         "and move the card to a slot like its peers' or fix the BIOS PCIe settings",
         [width](const Host& host, Groups& groups) {
           for (const Sample* link :
                host.now->Find(width ? "rdma_pcie_link_width_lanes"
                                     : "rdma_pcie_link_speed_transfers_per_second",
                               {{"end", "device"}, {"kind", "current"}})) {
             const Kind* kind = host.KindOf(link->Label("device"));
             if (kind == nullptr) continue;  // a PCI netdev without an RDMA device
             const double value = width ? link->value : link->value / 1e9;
             groups[*kind].push_back(
                 {host.instance,
                  {{"device", link->Label("device")}, {"pci_address", link->Label("pci_address")}},
                  width ? "x" + Num(value) : Num(value) + " GT/s",
                  value,
                  {}});
           }
         },
         nullptr});
  }
  settings.push_back(
      {"fleet.netdev_mtu", "rdmafleetmtudrift", Severity::kWarn, false, "netdev MTU",
       "lower, this host cuts every message into more packets; higher, it sends frames its "
       "peers' path may drop: set the peers' MTU, and make it persistent",
       [](const Host& host, Groups& groups) {
         for (const RoceNetdev& roce : host.roce) {
           const auto mtu = host.now->Value("rdma_netdev_mtu_bytes", {{"device", roce.netdev}});
           if (!mtu) continue;
           groups[roce.kind].push_back(
               {host.instance, roce.scope, Num(*mtu), *mtu, {{"netdev", roce.netdev}}});
         }
       },
       [](const Entry& outlier, const Entry& majority) {
         return FixLine({"ip link set dev ", HostValue(outlier.detail.at("netdev")), " mtu ",
                         HostValue(majority.value)});
       }});
  settings.push_back(
      {"fleet.active_mtu", "rdmafleetmtudrift", Severity::kWarn, false, "active MTU",
       "RDMA messages are cut into packets of another size than on its peers; the RoCE active "
       "MTU follows the netdev MTU (fleet.netdev_mtu, roce.netdev_mtu), the InfiniBand one the "
       "peer port (links.active_mtu)",
       [](const Host& host, Groups& groups) {
         for (const Sample* mtu : host.now->Find("rdma_port_active_mtu_bytes")) {
           const Kind* kind = host.KindOf(mtu->Label("device"));
           if (kind == nullptr) continue;
           groups[*kind].push_back({host.instance,
                                    PortScopeWithNetdev(*host.now, *mtu),
                                    Num(mtu->value),
                                    mtu->value,
                                    {}});
         }
       },
       nullptr});
  settings.push_back(
      {"fleet.pfc", "rdmafleetpfcdrift", Severity::kWarn, false, "PFC-enabled priorities",
       "without PFC on its peers' lossless priority this host drops RoCE under congestion "
       "(retransmissions for every job across it); with PFC where its peers have none it pauses "
       "a class the fabric does not expect: set PFC as on its peers and the switches",
       [](const Host& host, Groups& groups) {
         for (const RoceNetdev& roce : host.roce) {
           const auto pfc = host.now->Find("rdma_netdev_pfc_enabled", {{"device", roce.netdev}});
           if (pfc.empty()) continue;
           groups[roce.kind].push_back(
               {host.instance,
                roce.scope,
                OnPriorities(pfc, "priority"),
                0,
                {{"netdev", roce.netdev}, {"driver", DriverOf(*host.now, roce.netdev)}}});
         }
       },
       [](const Entry& outlier, const Entry& majority) {
         std::set<int> on;
         if (majority.value != "none") {
           for (size_t at = 0; at <= majority.value.size();) {
             const size_t comma = std::min(majority.value.find(',', at), majority.value.size());
             on.insert(std::atoi(majority.value.substr(at, comma - at).c_str()));
             at = comma + 1;
           }
         }
         const std::string& netdev = outlier.detail.at("netdev");
         std::string flags;
         for (int priority = 0; priority < 8; ++priority) {
           if (outlier.detail.at("driver") == "mlx5_core") {
             flags += (priority == 0 ? "" : ",") + std::string(on.contains(priority) ? "1" : "0");
           } else {
             flags += " " + std::to_string(priority) + (on.contains(priority) ? ":on" : ":off");
           }
         }
         return outlier.detail.at("driver") == "mlx5_core"
                    ? FixLine({"mlnx_qos -i ", HostValue(netdev), " --pfc ", flags})
                    : FixLine({"dcb pfc set dev ", HostValue(netdev), " prio-pfc", flags});
       }});
  const std::string roce_dscp = std::to_string(options.roce_dscp);
  settings.push_back(
      {"fleet.dscp", "rdmafleetdscpdrift", Severity::kWarn, false, "DSCP trust and map",
       "this host classifies RoCE unlike its peers, so its RoCE traffic (and CNPs, DSCP 48) lands "
       "on another priority than theirs, without their PFC and ECN: trust and map DSCP as on its "
       "peers",
       [roce_dscp](const Host& host, Groups& groups) {
         for (const RoceNetdev& roce : host.roce) {
           const auto trust = host.now->Value("rdma_netdev_dscp_trust", {{"device", roce.netdev}});
           if (!trust) continue;
           Entry entry{host.instance,
                       roce.scope,
                       "trust pcp",
                       0,
                       {{"netdev", roce.netdev},
                        {"driver", DriverOf(*host.now, roce.netdev)},
                        {"trust", *trust != 0 ? "dscp" : "pcp"}}};
           if (*trust != 0) {
             entry.value = "trust dscp";
             std::string map;
             for (const std::string& dscp : {roce_dscp, std::string("48")}) {
               const auto priority = host.now->Find("rdma_netdev_dscp_priority_info",
                                                    {{"device", roce.netdev}, {"dscp", dscp}});
               std::string on;
               for (const Sample* entry_priority : priority) {
                 on += (on.empty() ? "" : "/") + entry_priority->Label("priority");
                 map += (map.empty() ? "" : " ") + dscp + ":" + entry_priority->Label("priority");
               }
               entry.value += ", DSCP " + dscp + " on priority " + (on.empty() ? "none" : on);
             }
             entry.detail["map"] = map;
           }
           groups[roce.kind].push_back(std::move(entry));
         }
       },
       [](const Entry& outlier, const Entry& majority) {
         const std::string& netdev = outlier.detail.at("netdev");
         const bool mlx5 = outlier.detail.at("driver") == "mlx5_core";
         if (majority.detail.at("trust") == "pcp") {
           return mlx5 ? FixLine({"mlnx_qos -i ", HostValue(netdev), " --trust pcp"})
                       : FixLine({"dcb app flush dev ", HostValue(netdev), " dscp-prio"});
         }
         std::string fix;
         if (mlx5 && outlier.detail.at("trust") != "dscp") {
           fix = FixLine({"mlnx_qos -i ", HostValue(netdev), " --trust dscp"});
           if (fix.empty()) return fix;
         }
         const auto map = majority.detail.find("map");
         if (map != majority.detail.end() && !map->second.empty()) {
           // "DSCP:PRIORITY ...", the majority's labels: each word quoted.
           const std::string words = QuotedWords(map->second);
           const std::string replace =
               words.empty() ? "" : FixLine({"dcb app replace dev ", HostValue(netdev), " dscp-prio "});
           if (replace.empty()) return std::string();
           fix += (fix.empty() ? "" : " && ") + replace + words;
         }
         return fix;
       }});
  settings.push_back(
      {"fleet.default_tos", "rdmafleetdscpdrift", Severity::kWarn, false, "default RoCE ToS",
       "rdma_cm connections that set no ToS leave this host with another DSCP than its peers', "
       "on another priority (0: configfs shows no setting, the kernel's default)",
       [](const Host& host, Groups& groups) {
         const auto configfs = host.now->Value("rdma_host_rdma_cm_configfs");
         for (const Sample* port : host.now->Find("rdma_port_info", {{"link_layer", "Ethernet"}})) {
           const Kind* kind = host.KindOf(port->Label("device"));
           if (kind == nullptr) continue;
           auto tos =
               host.now->Value("rdma_port_default_roce_tos",
                               {{"device", port->Label("device")}, {"port", port->Label("port")}});
           // As the fleet rule: the kernel's default 0 where configfs shows no directory.
           if (!tos && configfs == 1.0) tos = 0;
           if (!tos) continue;
           Scope scope = PortScope(*port);
           if (!port->Label("netdev").empty()) scope.emplace_back("netdev", port->Label("netdev"));
           groups[*kind].push_back(
               {host.instance,
                std::move(scope),
                Num(*tos),
                *tos,
                {{"device", port->Label("device")}, {"port", port->Label("port")}}});
         }
       },
       [](const Entry& outlier, const Entry& majority) {
         const std::string dir = "/sys/kernel/config/rdma_cm/" + outlier.detail.at("device");
         return FixLine({"mkdir -p ", HostValue(dir), " && echo ", HostValue(majority.value), " > ",
                         HostValue(dir + "/ports/" + outlier.detail.at("port") + "/default_roce_tos")});
       }});
  settings.push_back(
      {"fleet.ecn", "rdmafleetecndrift", Severity::kWarn, false, "ECN",
       "DCQCN does not work for this host's flows as for its peers' (no CNPs sent for marked "
       "packets, or CNPs ignored), and PFC pauses take over: enable ECN as on its peers, and "
       "persist it as they do",
       [](const Host& host, Groups& groups) {
         for (const RoceNetdev& roce : host.roce) {
           const auto np = host.now->Find("rdma_netdev_ecn_enabled",
                                          {{"device", roce.netdev}, {"point", "np"}});
           const auto rp = host.now->Find("rdma_netdev_ecn_enabled",
                                          {{"device", roce.netdev}, {"point", "rp"}});
           if (np.empty() && rp.empty()) continue;
           Entry entry{host.instance,
                       roce.scope,
                       "notification point on priorities " + OnPriorities(np, "priority") +
                           ", reaction point on " + OnPriorities(rp, "priority"),
                       0,
                       {{"netdev", roce.netdev}}};
           for (const auto* series : {&np, &rp}) {
             for (const Sample* sample : *series) {
               entry.detail["ecn " + sample->Label("point") + " " + sample->Label("priority")] =
                   sample->value != 0 ? "1" : "0";
             }
           }
           groups[roce.kind].push_back(std::move(entry));
         }
       },
       [](const Entry& outlier, const Entry& majority) {
         std::string fix;
         for (const auto& [key, value] : majority.detail) {
           if (!key.starts_with("ecn ")) continue;
           const auto mine = outlier.detail.find(key);
           if (mine != outlier.detail.end() && mine->second == value) continue;
           const size_t space = key.find(' ', 4);
           const std::string one =
               FixLine({"echo ", HostValue(value), " > ",
                        HostValue("/sys/class/net/" + outlier.detail.at("netdev") + "/ecn/roce_" +
                             key.substr(4, space - 4) + "/enable/" + key.substr(space + 1))});
           if (one.empty()) return std::string();  // a value that cannot be quoted: no fix
           fix += (fix.empty() ? "" : " && ") + one;
         }
         return fix;
       }});
  settings.push_back(
      {"fleet.coalescing", "rdmafleetcoalescingdrift", Severity::kInfo, false,
       "interrupt coalescing",
       "it moderates the interface's Ethernet queues only (RDMA completions are moderated per "
       "CQ): unlike its peers this host spends more CPU on interrupts, or adds latency, for its "
       "IP traffic",
       [](const Host& host, Groups& groups) {
         for (const RoceNetdev& roce : host.roce) {
           Entry entry{host.instance, roce.scope, "", 0, {{"netdev", roce.netdev}}};
           for (const char* direction : {"rx", "tx"}) {
             const Matchers matchers{{"device", roce.netdev}, {"direction", direction}};
             if (const auto usecs = host.now->Value("rdma_netdev_coalesce_usecs", matchers)) {
               const std::string key = std::string(direction) + "-usecs";
               entry.value += (entry.value.empty() ? "" : ", ") + key + " " + Num(*usecs);
               entry.detail["knob " + key] = Num(*usecs);
             }
             if (const auto on = host.now->Value("rdma_netdev_coalesce_adaptive", matchers)) {
               const std::string key = "adaptive-" + std::string(direction);
               entry.value += (entry.value.empty() ? "" : ", ") + key + (*on != 0 ? " on" : " off");
               entry.detail["knob " + key] = *on != 0 ? "on" : "off";
             }
           }
           if (!entry.value.empty()) groups[roce.kind].push_back(std::move(entry));
         }
       },
       [](const Entry& outlier, const Entry& majority) {
         std::string knobs;
         for (const auto& [key, value] : majority.detail) {
           if (!key.starts_with("knob ")) continue;
           const auto mine = outlier.detail.find(key);
           if (mine != outlier.detail.end() && mine->second == value) continue;
           knobs += " " + key.substr(5) + " " + value;
         }
         return knobs.empty() ? ""
                              : FixLine({"ethtool -C ", HostValue(outlier.detail.at("netdev")), knobs});
       }});
  settings.push_back(
      {"fleet.cqe_compression", "rdmafleetcoalescingdrift", Severity::kInfo, false,
       "rx_cqe_compress",
       "the interface's Ethernet receive completions are compressed unlike its peers': more "
       "interrupts and PCIe traffic per IP packet on the host without it",
       [](const Host& host, Groups& groups) {
         for (const RoceNetdev& roce : host.roce) {
           const auto flag = host.now->Value(
               "rdma_netdev_private_flag", {{"device", roce.netdev}, {"flag", "rx_cqe_compress"}});
           if (!flag) continue;
           groups[roce.kind].push_back({host.instance,
                                        roce.scope,
                                        *flag != 0 ? "on" : "off",
                                        0,
                                        {{"netdev", roce.netdev}}});
         }
       },
       [](const Entry& outlier, const Entry& majority) {
         return FixLine({"ethtool --set-priv-flags ", HostValue(outlier.detail.at("netdev")),
                         " rx_cqe_compress ", HostValue(majority.value)});
       }});
  return settings;
}

}  // namespace rdmascope::doctor::fleet_drift
