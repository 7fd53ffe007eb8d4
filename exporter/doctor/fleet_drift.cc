// Fleet drift: see fleet_drift.h, and docs/doctor.md ("Fleet: doctor --prometheus") for the
// table of checks with the fleet rule of each.
#include "doctor/fleet_drift.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <optional>
#include <set>

#include "doctor/check_util.h"

namespace rdmascope::doctor {
namespace {

constexpr const char* kArea = "fleet";

constexpr const char* kNothing =
    "no answering host has what this check compares (none of the series it reads, or no RDMA "
    "device of a known kind to group it by; rates: none measured over the window)";

// What makes hosts peers: a NIC model in a cluster, and for some checks one more label (the
// link layer of a port).
struct Kind {
  std::string cluster, board_id, hca_type, extra_name, extra;
  auto operator<=>(const Kind&) const = default;
};

// "board_id MT_0000000359", "hca_type MT4125" or "no board_id or hca_type", and the cluster.
std::string ModelText(const Kind& kind) {
  std::string text = !kind.board_id.empty()   ? "board_id " + kind.board_id
                     : !kind.hca_type.empty() ? "hca_type " + kind.hca_type
                                              : std::string("no board_id or hca_type");
  if (!kind.extra.empty()) text += ", " + kind.extra_name + " " + kind.extra;
  if (!kind.cluster.empty()) text += " in cluster " + kind.cluster;
  return text;
}

// The scope of a finding about a whole group: instance "*" and the group's labels.
Scope GroupScope(const Kind& kind) {
  Scope scope{{"instance", "*"}};
  if (!kind.cluster.empty()) scope.emplace_back("cluster", kind.cluster);
  if (!kind.board_id.empty()) scope.emplace_back("board_id", kind.board_id);
  if (!kind.hca_type.empty()) scope.emplace_back("hca_type", kind.hca_type);
  if (kind.board_id.empty() && kind.hca_type.empty()) scope.emplace_back("model", "unknown");
  if (!kind.extra.empty()) scope.emplace_back(kind.extra_name, kind.extra);
  return scope;
}

// A measured figure for a person: whole numbers from 100 up, 3 significant digits below.
std::string Figure(double value) {
  return Num(std::fabs(value) >= 100 ? std::round(value) : value);
}

std::string Hosts(size_t count) {
  return Num(static_cast<double>(count)) + (count == 1 ? " host" : " hosts");
}

// An RDMA port's interface, the subject of the Ethernet settings (rdma:roce_netdev_board:info).
struct RoceNetdev {
  std::string netdev, device, port;
  Kind kind;
  Scope scope;  // device, port, netdev
};

// One answering host as the checks read it.
struct Host {
  std::string instance;
  const Snapshot* now;
  const Snapshot* before;             // nullptr: no window, or the host was not there then
  std::map<std::string, Kind> kinds;  // RDMA device -> its model
  std::vector<RoceNetdev> roce;

  const Kind* KindOf(const std::string& device) const {
    const auto it = kinds.find(device);
    return it == kinds.end() ? nullptr : &it->second;
  }
};

Host MakeHost(const std::string& instance, const Snapshot& now, const Snapshot* before) {
  Host host{instance, &now, before, {}, {}};
  for (const Sample* info : now.Find("rdma_device_info")) {
    host.kinds[info->Label("device")] = {info->Label("cluster"), info->Label("board_id"),
                                         info->Label("hca_type"), "", ""};
  }
  // A netdev under RDMA devices of two kinds (soft-RoCE over a ConnectX port) is left out, as
  // the fleet rules leave it out: it has no one set of peers.
  std::map<std::string, RoceNetdev> by_netdev;
  std::set<std::string> ambiguous;
  for (const Sample* port : now.Find("rdma_port_info", {{"link_layer", "Ethernet"}})) {
    const std::string& netdev = port->Label("netdev");
    const Kind* kind = host.KindOf(port->Label("device"));
    if (netdev.empty() || kind == nullptr) continue;
    const auto [it, fresh] = by_netdev.try_emplace(netdev);
    if (!fresh) {
      if (!(it->second.kind == *kind)) ambiguous.insert(netdev);
      continue;
    }
    Scope scope = PortScope(*port);
    scope.emplace_back("netdev", netdev);
    it->second = {netdev, port->Label("device"), port->Label("port"), *kind, std::move(scope)};
  }
  for (auto& [netdev, roce] : by_netdev) {
    if (!ambiguous.contains(netdev)) host.roce.push_back(std::move(roce));
  }
  return host;
}

Scope PortScopeWithNetdev(const Snapshot& now, const Sample& series) {
  Scope scope = PortScope(series);
  const auto info = now.Find("rdma_port_info",
                             {{"device", series.Label("device")}, {"port", series.Label("port")}});
  if (!info.empty() && !info.front()->Label("netdev").empty()) {
    scope.emplace_back("netdev", info.front()->Label("netdev"));
  }
  return scope;
}

std::string DriverOf(const Snapshot& now, const std::string& netdev) {
  const auto info = now.Find("rdma_netdev_info", {{"device", netdev}});
  return info.empty() ? "" : info.front()->Label("driver");
}

// --- settings: the majority value of each group, and the hosts without it ---------------------

struct Entry {
  std::string instance;
  Scope scope;        // device, port, netdev as the per-host checks name them
  std::string value;  // as compared and shown
  double number = 0;  // for the settings compared by size
  std::map<std::string, std::string> detail;  // what a fix needs: netdev, device, port, pci...
};

using Groups = std::map<Kind, std::vector<Entry>>;

struct Setting {
  const char* id;
  const char* runbook;  // the anchor of the fleet rule of the same drift
  Severity severity;    // of an outlier: the rule's severity label
  bool below_only;      // link rate, PCIe: only a lower value than the majority's is drift
  const char* what;     // "firmware", "netdev MTU"
  const char* why;      // what it costs and what to do, for the advice
  std::function<void(const Host&, Groups&)> collect;
  // The command that gives `outlier` the majority's value (`majority`: a host that has it).
  std::function<std::string(const Entry& outlier, const Entry& majority)> fix;
};

void Judge(const Setting& setting, const Groups& groups, std::vector<Finding>& findings) {
  for (const auto& [kind, entries] : groups) {
    std::map<std::string, std::set<std::string>> hosts_by_value;
    std::map<std::string, const Entry*> example;
    std::set<std::string> hosts;
    for (const Entry& entry : entries) {
      hosts_by_value[entry.value].insert(entry.instance);
      example.try_emplace(entry.value, &entry);
      hosts.insert(entry.instance);
    }
    const std::string model = ModelText(kind);
    if (hosts.size() < kFleetMinHosts) {
      Finding finding = Make(setting.id, kArea, Severity::kInfo, GroupScope(kind), setting.runbook);
      finding.observed = Hosts(hosts.size()) + " with " + model + ": fewer than " +
                         Num(static_cast<double>(kFleetMinHosts)) + ", no majority to compare " +
                         setting.what + " with";
      finding.expected =
          "at least " + Num(static_cast<double>(kFleetMinHosts)) + " hosts of one kind";
      findings.push_back(std::move(finding));
      continue;
    }
    size_t most = 0;
    for (const auto& [value, with] : hosts_by_value) most = std::max(most, with.size());
    std::vector<std::string> top;
    for (const auto& [value, with] : hosts_by_value) {
      if (with.size() == most) top.push_back(value);
    }
    if (top.size() > 1) {
      Finding finding = Make(setting.id, kArea, Severity::kInfo, GroupScope(kind), setting.runbook);
      std::string split;
      for (const auto& [value, with] : hosts_by_value) {
        split += (split.empty() ? "" : ", ") + value + " on " + Hosts(with.size());
      }
      finding.observed = "no majority " + std::string(setting.what) + " among the " +
                         Hosts(hosts.size()) + " with " + model + ": " + split;
      finding.expected = "one value on more hosts than any other";
      finding.advice = "a tie is not drift of one host: decide which value the fleet should have";
      findings.push_back(std::move(finding));
      continue;
    }
    const std::string& majority = top.front();
    const Entry& reference = *example.at(majority);
    std::vector<const Entry*> outliers;
    std::set<std::string> outlier_hosts;
    for (const Entry& entry : entries) {
      const bool odd =
          setting.below_only ? entry.number < reference.number : entry.value != majority;
      if (!odd) continue;
      outliers.push_back(&entry);
      outlier_hosts.insert(entry.instance);
    }
    const std::string expected = std::string(setting.what) + " " + majority + ", as " +
                                 Num(static_cast<double>(most)) + " of the " + Hosts(hosts.size()) +
                                 " with " + model + " have";
    if (outliers.empty()) {
      Finding finding = Make(setting.id, kArea, Severity::kOk, GroupScope(kind), setting.runbook);
      finding.observed = most == hosts.size()
                             ? "all " + Hosts(hosts.size()) + " with " + model + ": " +
                                   setting.what + " " + majority
                             : Num(static_cast<double>(most)) + " of the " + Hosts(hosts.size()) +
                                   " with " + model + ": " + setting.what + " " + majority +
                                   ", the others above it";
      finding.expected = setting.below_only ? "none below the majority's" : "one value";
      findings.push_back(std::move(finding));
      continue;
    }
    for (const Entry* outlier : outliers) {
      Scope scope{{"instance", outlier->instance}};
      scope.insert(scope.end(), outlier->scope.begin(), outlier->scope.end());
      Finding finding =
          Make(setting.id, kArea, setting.severity, std::move(scope), setting.runbook);
      finding.observed = std::string(setting.what) + " " + outlier->value;
      finding.expected = expected;
      const size_t others = outlier_hosts.size() - 1;
      finding.advice =
          std::string(setting.what) + " " + outlier->value +
          (setting.below_only ? " below " : " unlike ") + Num(static_cast<double>(most)) +
          " of its " + Num(static_cast<double>(hosts.size() - 1)) + " peers (" + majority +
          "): " + setting.why +
          (others == 0 ? ""
                       : "; " + Hosts(others) + " more of this kind " +
                             (others == 1 ? "differs" : "differ") + " too (each reported)");
      if (setting.fix) finding.fix = setting.fix(*outlier, reference);
      findings.push_back(std::move(finding));
    }
  }
}

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
         return "mlxfwmanager -u -d " +
                (pci == outlier.detail.end() ? std::string("PCI_ADDRESS") : pci->second) +
                " -i IMAGE";
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
         return "ip link set dev " + outlier.detail.at("netdev") + " mtu " + majority.value;
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
                    ? "mlnx_qos -i " + netdev + " --pfc " + flags
                    : "dcb pfc set dev " + netdev + " prio-pfc" + flags;
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
           return mlx5 ? "mlnx_qos -i " + netdev + " --trust pcp"
                       : "dcb app flush dev " + netdev + " dscp-prio";
         }
         std::string fix;
         if (mlx5 && outlier.detail.at("trust") != "dscp") {
           fix = "mlnx_qos -i " + netdev + " --trust dscp";
         }
         const auto map = majority.detail.find("map");
         if (map != majority.detail.end() && !map->second.empty()) {
           fix += (fix.empty() ? "" : " && ") +
                  ("dcb app replace dev " + netdev + " dscp-prio " + map->second);
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
         return "mkdir -p " + dir + " && echo " + majority.value + " > " + dir + "/ports/" +
                outlier.detail.at("port") + "/default_roce_tos";
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
           fix += (fix.empty() ? "" : " && ") +
                  ("echo " + value + " > /sys/class/net/" + outlier.detail.at("netdev") +
                   "/ecn/roce_" + key.substr(4, space - 4) + "/enable/" + key.substr(space + 1));
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
         return knobs.empty() ? "" : "ethtool -C " + outlier.detail.at("netdev") + knobs;
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
         return "ethtool --set-priv-flags " + outlier.detail.at("netdev") + " rx_cqe_compress " +
                majority.value;
       }});
  return settings;
}

// --- error and congestion rates: far above the peers' median ----------------------------------

struct ErrorCheck {
  const char* id;
  const char* what;  // "symbol errors"
  double floor;      // per second: below it never an outlier (RdmaFleetErrorRateOutlier)
  const char* remedy;
};

// The rule's errors, floors and remedies.
constexpr ErrorCheck kErrorChecks[] = {
    {"fleet.crc_errors", "CRC errors", 1,
     "this link is bad: the cable, transceiver or switch port (RdmaCrcErrors)"},
    {"fleet.symbol_errors", "symbol errors", 1,
     "this link is bad: the cable, transceiver or switch port (RdmaSymbolErrors)"},
    {"fleet.out_of_sequence", "out-of-sequence packets", 10,
     "its packets are lost on the way: PFC on the RoCE priority, drops on the switch "
     "(RdmaRetransmissions)"},
    {"fleet.congestion_notifications", "ECN marks and CNPs", 100,
     "its traffic is congested far more than its peers': a hot switch port, a slow receiver, PFC "
     "or ECN set unlike its peers' (fleet.pfc, fleet.ecn; RdmaCongestionNotifications)"},
    {"fleet.pause_frames", "pause frames", 100,
     "its traffic is paused far more than its peers': a hot switch port, a slow receiver, PFC set "
     "unlike its peers' (fleet.pfc; RdmaHeavyPauseOnRocePriority)"},
};

constexpr const char* kErrorRunbook = "rdmafleeterrorrateoutlier";

struct ErrorEntry {
  std::string instance;
  Scope scope;
  double rate = 0;                // per second
  std::optional<double> packets;  // per second through the same link, where counted
};

// The summed rate of `name`'s series matching `matchers` (and, with `counters`, only those
// counters); nullopt when none could be measured (absent before, reset in the window).
std::optional<double> SumRate(const Host& host, std::string_view name, const Matchers& matchers,
                              std::span<const char* const> counters = {}) {
  std::optional<double> sum;
  for (const Sample* series : host.now->Find(name, matchers)) {
    if (!counters.empty() &&
        std::ranges::find(counters, series->Label("counter"),
                          [](const char* c) { return std::string_view(c); }) == counters.end()) {
      continue;
    }
    if (const auto rate = Rate(*host.now, *host.before, name, *series)) {
      sum = sum.value_or(0) + *rate;
    }
  }
  return sum;
}

// Packets per second through a port: its RDMA packets (IBA PortCounters) and, for a RoCE port,
// its netdev's own IP packets (ethtool rx_packets/tx_packets), whichever are exported.
std::optional<double> PacketRate(const Host& host, const std::string& device,
                                 const std::string& port, const std::string& netdev) {
  std::optional<double> sum;
  const auto add = [&sum](std::optional<double> rate) {
    if (rate) sum = sum.value_or(0) + *rate;
  };
  for (const char* name :
       {"rdma_port_packets_received_total", "rdma_port_packets_transmitted_total"}) {
    add(SumRate(host, name, {{"device", device}, {"port", port}}));
  }
  if (!netdev.empty()) {
    for (const char* stat : {"rx_packets", "tx_packets"}) {
      add(SumRate(host, "rdma_ethtool_stat", {{"device", netdev}, {"stat", stat}}));
    }
  }
  return sum;
}

constexpr const char* kOutOfSequence[] = {"out_of_sequence", "out_of_seq_request",
                                          "res_oos_drop_count"};
constexpr const char* kCongestion[] = {"np_cnp_sent", "rp_cnp_handled",
                                       "np_ecn_marked_roce_packets"};

// Each check's (kind -> ports) of one host, as rdma:fleet_error_rate:rate5m takes them.
void CollectErrors(const Host& host,
                   std::map<std::string, std::map<Kind, std::vector<ErrorEntry>>>& out) {
  const auto add = [&host, &out](const char* id, const Kind& kind, Scope scope,
                                 std::optional<double> rate, const std::string& device,
                                 const std::string& port, const std::string& netdev) {
    if (!rate) return;
    out[id][kind].push_back(
        {host.instance, std::move(scope), *rate, PacketRate(host, device, port, netdev)});
  };
  // RoCE netdevs: CRC, symbol errors and pause frames of the interface.
  for (const RoceNetdev& roce : host.roce) {
    const Matchers netdev{{"device", roce.netdev}};
    add("fleet.crc_errors", roce.kind, roce.scope,
        SumRate(host, "rdma_netdev_crc_errors_total", netdev), roce.device, roce.port, roce.netdev);
    add("fleet.symbol_errors", roce.kind, roce.scope,
        SumRate(host, "rdma_netdev_symbol_errors_total", netdev), roce.device, roce.port,
        roce.netdev);
    add("fleet.pause_frames", roce.kind, roce.scope,
        SumRate(host, "rdma_netdev_pause_frames_total", netdev), roce.device, roce.port,
        roce.netdev);
  }
  for (const Sample* info : host.now->Find("rdma_port_info")) {
    const std::string& device = info->Label("device");
    const std::string& port = info->Label("port");
    const Kind* kind = host.KindOf(device);
    if (kind == nullptr) continue;
    const Matchers matchers{{"device", device}, {"port", port}};
    Scope scope = PortScope(*info);
    if (!info->Label("netdev").empty()) scope.emplace_back("netdev", info->Label("netdev"));
    // InfiniBand ports: PortRcvErrors (bad ICRC, VCRC) and SymbolErrorCounter.
    if (info->Label("link_layer") == "InfiniBand") {
      add("fleet.crc_errors", *kind, scope,
          SumRate(host, "rdma_port_receive_errors_total", matchers), device, port, "");
      add("fleet.symbol_errors", *kind, scope,
          SumRate(host, "rdma_port_symbol_errors_total", matchers), device, port, "");
    }
    add("fleet.out_of_sequence", *kind, scope,
        SumRate(host, "rdma_port_hw_counter_total", matchers, kOutOfSequence), device, port,
        info->Label("netdev"));
    add("fleet.congestion_notifications", *kind, scope,
        SumRate(host, "rdma_port_hw_counter_total", matchers, kCongestion), device, port,
        info->Label("netdev"));
  }
}

// The median as Prometheus' quantile(0.5): the mean of the two middle values of an even count.
double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

void JudgeErrors(const ErrorCheck& check, const std::map<Kind, std::vector<ErrorEntry>>& groups,
                 std::vector<Finding>& findings) {
  for (const auto& [kind, ports] : groups) {
    std::set<std::string> hosts;
    for (const ErrorEntry& port : ports) hosts.insert(port.instance);
    const std::string model = ModelText(kind);
    if (hosts.size() < kFleetMinHosts) {
      Finding finding = Make(check.id, kArea, Severity::kInfo, GroupScope(kind), kErrorRunbook);
      finding.observed = Hosts(hosts.size()) + " with " + model + " count " + check.what +
                         ": fewer than " + Num(static_cast<double>(kFleetMinHosts)) +
                         ", no median to compare with";
      finding.expected =
          "at least " + Num(static_cast<double>(kFleetMinHosts)) + " hosts of one kind";
      findings.push_back(std::move(finding));
      continue;
    }
    // For the same traffic: per packet when every port's packets are counted, else per second
    // (as the fleet rule).
    const bool per_packet = std::ranges::all_of(
        ports, [](const ErrorEntry& port) { return port.packets && *port.packets > 0; });
    const auto basis = [per_packet](const ErrorEntry& port) {
      return per_packet ? port.rate / *port.packets : port.rate;
    };
    std::vector<double> values;
    for (const ErrorEntry& port : ports) values.push_back(basis(port));
    const double median = Median(values);
    const std::string unit = per_packet ? " per million packets" : "/s";
    const auto figure = [per_packet](double value) {
      return Figure(per_packet ? value * 1e6 : value);
    };
    const std::string median_text = "the median of the " + Num(static_cast<double>(ports.size())) +
                                    " ports on " + Hosts(hosts.size()) + " with " + model + ", " +
                                    figure(median) + unit;
    std::vector<const ErrorEntry*> outliers;
    std::set<std::string> outlier_hosts;
    double highest = 0;
    for (const ErrorEntry& port : ports) {
      highest = std::max(highest, basis(port));
      if (basis(port) > kFleetErrorFactor * median && port.rate > check.floor) {
        outliers.push_back(&port);
        outlier_hosts.insert(port.instance);
      }
    }
    const std::string expected = "at most " + Num(kFleetErrorFactor) + "x " + median_text +
                                 ", or at most " + Num(check.floor) + " " + check.what + "/s";
    if (outliers.empty()) {
      Finding finding = Make(check.id, kArea, Severity::kOk, GroupScope(kind), kErrorRunbook);
      finding.observed = Num(static_cast<double>(ports.size())) + " ports on " +
                         Hosts(hosts.size()) + " with " + model + ": median " + figure(median) +
                         unit + ", highest " + figure(highest) + unit + " " + check.what;
      finding.expected = expected;
      findings.push_back(std::move(finding));
      continue;
    }
    for (const ErrorEntry* port : outliers) {
      Scope scope{{"instance", port->instance}};
      scope.insert(scope.end(), port->scope.begin(), port->scope.end());
      Finding finding = Make(check.id, kArea, Severity::kWarn, std::move(scope), kErrorRunbook);
      const std::string factor =
          median > 0 ? Num(std::round(basis(*port) / median * 10) / 10) + "x " + median_text
                     : "while " + median_text;
      finding.observed = Figure(port->rate) + " " + check.what + "/s" +
                         (per_packet ? " (" + figure(basis(*port)) + unit + ")" : "") + ", " +
                         factor;
      finding.expected = expected;
      const size_t others = outlier_hosts.size() - 1;
      finding.advice = std::string(check.what) +
                       " far above its peers' for the same traffic: " + check.remedy +
                       (others == 0 ? ""
                                    : "; " + Hosts(others) + " more of this kind " +
                                          (others == 1 ? "is" : "are") + " reported too");
      findings.push_back(std::move(finding));
    }
  }
}

// --- hosts missing ----------------------------------------------------------------------------

std::string ClusterOf(const Snapshot& now) {
  for (const char* name : {"up", "rdmascope_collector_success", "rdma_device_info"}) {
    const auto series = now.Find(name);
    if (!series.empty()) return series.front()->Label("cluster");
  }
  return "";
}

void MissingHosts(const std::map<std::string, Snapshot>& now, std::vector<Finding>& findings) {
  std::vector<std::string> down;
  struct Cluster {
    std::vector<std::string> answering, without_device;
  };
  std::map<std::string, Cluster> clusters;
  for (const auto& [instance, snapshot] : now) {
    if (snapshot.Value("up") == 0.0) {
      down.push_back(instance);
      continue;
    }
    Cluster& cluster = clusters[ClusterOf(snapshot)];
    cluster.answering.push_back(instance);
    if (snapshot.Find("rdma_device_info").empty()) cluster.without_device.push_back(instance);
  }
  for (const std::string& instance : down) {
    Finding finding =
        Make("fleet.host_down", kArea, Severity::kCrit, {{"instance", instance}}, "rdmascopedown");
    finding.observed = "up 0: Prometheus could not scrape it";
    finding.expected = "up 1, as " + Num(static_cast<double>(now.size() - down.size())) +
                       " of the " + Num(static_cast<double>(now.size())) + " targets";
    finding.advice =
        "none of its RDMA series are fresh: its own checks and the fleet comparisons leave it "
        "out, and every RDMA alert for it is blind (RdmascopeDown). On the host: systemctl "
        "status rdmascope, journalctl -u rdmascope, curl it at /metrics; rdmascope check prints "
        "what fails";
    finding.fix = "systemctl restart rdmascope";
    findings.push_back(std::move(finding));
  }
  if (down.empty()) {
    Finding finding =
        Make("fleet.host_down", kArea, Severity::kOk, {{"instance", "*"}}, "rdmascopedown");
    finding.observed = "all " + Num(static_cast<double>(now.size())) + " targets answer";
    finding.expected = "up 1";
    findings.push_back(std::move(finding));
  }
  for (const auto& [name, cluster] : clusters) {
    const size_t answering = cluster.answering.size();
    const size_t with = answering - cluster.without_device.size();
    const std::string where = name.empty() ? "" : " of cluster " + name;
    Scope group{{"instance", "*"}};
    if (!name.empty()) group.emplace_back("cluster", name);
    const std::string runbook = "rdmafleethostwithoutrdmadevice";
    // As RdmaFleetHostWithoutRdmaDevice: more than half of the answering targets export one.
    if (2 * with <= answering) {
      if (cluster.without_device.empty()) continue;
      Finding finding = Make("fleet.no_rdma_device", kArea, Severity::kInfo, group, runbook);
      finding.observed = Num(static_cast<double>(with)) + " of the " +
                         Num(static_cast<double>(answering)) + " answering hosts" + where +
                         " export an RDMA device: not more than half, so those without are not "
                         "called missing";
      finding.expected = "more than half of the answering hosts with an RDMA device";
      findings.push_back(std::move(finding));
      continue;
    }
    if (cluster.without_device.empty()) {
      Finding finding = Make("fleet.no_rdma_device", kArea, Severity::kOk, group, runbook);
      finding.observed = "all " + Num(static_cast<double>(answering)) + " answering hosts" + where +
                         " export RDMA devices";
      finding.expected = "an RDMA device on every host";
      findings.push_back(std::move(finding));
      continue;
    }
    for (const std::string& instance : cluster.without_device) {
      Finding finding =
          Make("fleet.no_rdma_device", kArea, Severity::kWarn, {{"instance", instance}}, runbook);
      finding.observed = "rdmascope answers but exports no RDMA device (no rdma_device_info)";
      finding.expected = "an RDMA device, as " + Num(static_cast<double>(with)) + " of the " +
                         Num(static_cast<double>(answering)) + " answering hosts" + where;
      finding.advice =
          "its NIC is lost to RDMA (the provider module not loaded, the NIC gone from the PCI "
          "bus, its firmware failed, another image booted): jobs placed on it cannot use RDMA. "
          "rdma link show, ibv_devices, lspci and dmesg on the host; drain it from RDMA jobs "
          "until fixed";
      // The host collector names the provider that is not loaded (host.kernel_modules).
      const Snapshot& snapshot = now.at(instance);
      std::string modules;
      for (const Sample* module : snapshot.Find("rdma_host_kernel_module_loaded")) {
        if (module->value == 0) modules += " " + module->Label("module");
      }
      if (!modules.empty()) finding.fix = "modprobe -a" + modules;
      findings.push_back(std::move(finding));
    }
  }
}

}  // namespace

std::vector<Finding> FleetDrift(const std::map<std::string, Snapshot>& now,
                                const std::map<std::string, Snapshot>& before,
                                const DoctorOptions& options) {
  std::vector<Finding> findings;
  MissingHosts(now, findings);
  std::vector<Host> hosts;
  for (const auto& [instance, snapshot] : now) {
    if (snapshot.Value("up") == 0.0) continue;  // down: reported above, no fresh series
    const auto earlier = before.find(instance);
    hosts.push_back(
        MakeHost(instance, snapshot, earlier == before.end() ? nullptr : &earlier->second));
  }
  for (const Setting& setting : Settings(options)) {
    Groups groups;
    for (const Host& host : hosts) setting.collect(host, groups);
    if (groups.empty()) {
      // Every check appears in every report, as the per-host ones do.
      findings.push_back(Skip(setting.id, kArea, {{"instance", "*"}}, setting.runbook, kNothing));
      continue;
    }
    Judge(setting, groups, findings);
  }
  std::map<std::string, std::map<Kind, std::vector<ErrorEntry>>> errors;
  for (const Host& host : hosts) {
    if (host.before != nullptr) CollectErrors(host, errors);
  }
  for (const ErrorCheck& check : kErrorChecks) {
    if (before.empty()) {
      findings.push_back(Skip(check.id, kArea, {{"instance", "*"}}, kErrorRunbook, kNeedsWindow));
      continue;
    }
    if (errors[check.id].empty()) {
      findings.push_back(Skip(check.id, kArea, {{"instance", "*"}}, kErrorRunbook, kNothing));
      continue;
    }
    JudgeErrors(check, errors[check.id], findings);
  }
  return findings;
}

}  // namespace rdmascope::doctor
