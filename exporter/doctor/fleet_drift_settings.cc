// Fleet drift's settings: the rows of rdma:fleet_setting:value (read where the fleet rules run,
// else computed here as the rule computes them), each judged against the majority of its own
// setting in its group as the rule does, and shown together per NIC object with the command
// that gives an outlier the majority's values.
#include <algorithm>
#include <cmath>
#include <set>

#include "core/sysfs.h"
#include "doctor/check_util.h"
#include "doctor/fleet_drift_parts.h"
#include "doctor/fleet_rules.h"

namespace rdmascope::doctor::fleet_drift {
namespace {

using fleet_rules::PromNumber;
using Values = std::map<std::string, std::string>;

std::string Get(const Values& values, const std::string& name) {
  const auto it = values.find(name);
  return it == values.end() ? "" : it->second;
}

// "3,4": the priorities whose setting is 1; "none".
std::string OnPriorities(const Values& values, const std::function<std::string(int)>& setting) {
  std::string text;
  for (int priority = 0; priority < fleet_rules::kPriorities; ++priority) {
    if (Get(values, setting(priority)) == "1") {
      text += (text.empty() ? "" : ",") + std::to_string(priority);
    }
  }
  return text.empty() ? "none" : text;
}

std::string OnOff(const std::string& value) {
  return value == "1" ? "on" : value == "0" ? "off" : value;
}

Row MakeRow(const Host& host, const Kind& kind, Object object, std::string name, std::string value,
            double number = 1) {
  return {host.instance, kind, std::move(object), std::move(name), std::move(value), number};
}

// A row of each RoCE netdev per series of `metric` on it; `name` of the series, its value.
void NetdevRows(const Host& host, std::string_view metric, const Matchers& matchers,
                const std::function<std::string(const Sample&)>& name, std::vector<Row>& rows) {
  for (const RoceNetdev& roce : host.roce) {
    Matchers on_netdev = matchers;
    on_netdev.emplace_back("device", roce.object.netdev);
    for (const Sample* series : host.now->Find(metric, on_netdev)) {
      rows.push_back(
          MakeRow(host, roce.kind, roce.object, name(*series), PromNumber(series->value)));
    }
  }
}

std::vector<std::string> Names(const std::function<std::string(int)>& setting) {
  std::vector<std::string> names;
  for (int priority = 0; priority < fleet_rules::kPriorities; ++priority) {
    names.push_back(setting(priority));
  }
  return names;
}

// One value a check shows: a setting's own for a one-setting check, else "setting value".
std::string ShowOne(const Setting& setting, const std::string& name, const std::string& value) {
  return setting.names.size() == 1 ? setting.show({{name, value}}) : name + " " + value;
}

std::vector<Setting> MakeSettings() {
  using fleet_rules::CoalesceAdaptiveSetting;
  using fleet_rules::CoalesceUsecsSetting;
  using fleet_rules::DscpPrioritySetting;
  using fleet_rules::EcnSetting;
  using fleet_rules::PfcSetting;
  std::vector<Setting> settings;
  settings.push_back(
      {"fleet.firmware",
       "rdmafleetfirmwaredrift",
       Severity::kWarn,
       false,
       "firmware",
       "firmware changes congestion control and error recovery, and a job spanning this host "
       "runs at the pace of its odd NIC; flash the majority's version (IMAGE: its image for "
       "this board) or move the whole fleet to one newer version, then mlxfwreset or reboot",
       On::kDevice,
       {"firmware_version"},
       [](const Host& host, std::vector<Row>& rows) {
         for (const Sample* info : host.now->Find("rdma_device_info")) {
           const std::string& version = info->Label("firmware_version");
           const Kind* kind = host.KindOf(info->Label("device"));
           if (version.empty() || kind == nullptr) continue;
           rows.push_back(MakeRow(host, *kind, host.DeviceObject(info->Label("device")),
                                  "firmware_version", version));
         }
       },
       [](const Values& values) { return Get(values, "firmware_version"); },
       [](const Object& object, const Kind& kind, const Values&, const Values&) -> std::string {
         // mlxfwmanager names a device by its PCI address; without -d it would update every NIC.
         if (!kind.board_id.starts_with("MT_")) return "";
         if (object.pci_address.empty()) return "mlxfwmanager -u -d PCI_ADDRESS -i IMAGE";
         return FixLine({"mlxfwmanager -u -d ", HostValue(object.pci_address), " -i IMAGE"});
       }});
  settings.push_back(
      {"fleet.driver",
       "rdmafleetdriverdrift",
       Severity::kWarn,
       false,
       "driver",
       "the driver (and, for an inbox driver, the kernel whose release it reports) differs: "
       "install the fleet's driver package (MLNX_OFED, DOCA-OFED) or boot the fleet's kernel; "
       "ethtool -i shows it",
       On::kNetdev,
       {"driver_version"},
       [](const Host& host, std::vector<Row>& rows) {
         for (const RoceNetdev& roce : host.roce) {
           const auto info = host.now->Find("rdma_netdev_info", {{"device", roce.object.netdev}});
           if (info.empty() || info.front()->Label("driver_version").empty()) continue;
           // label_join(..., " ", "driver", "driver_version")
           rows.push_back(MakeRow(
               host, roce.kind, roce.object, "driver_version",
               info.front()->Label("driver") + " " + info.front()->Label("driver_version")));
         }
       },
       [](const Values& values) { return Get(values, "driver_version"); },
       nullptr});
  settings.push_back(
      {"fleet.link_rate",
       "rdmafleetlinkratebelowpeers",
       Severity::kWarn,
       true,
       "link rate",
       "the link trained low (a cable or transceiver that negotiated down, fewer lanes, a switch "
       "port set slower) and every collective spanning it runs at its rate; compare ibstat or "
       "ethtool (speed, lanes) with a peer's, reseat or replace the cable or transceiver, check "
       "the switch port's speed and FEC",
       On::kPort,
       {"link_rate_gbps"},
       [](const Host& host, std::vector<Row>& rows) {
         for (const Sample* rate : host.now->Find("rdma_port_rate_bytes_per_second")) {
           const Kind* kind = host.KindOf(rate->Label("device"));
           if (kind == nullptr) continue;
           const double gbps = rate->value * 8 / 1e9;
           rows.push_back(MakeRow(host, *kind,
                                  host.DeviceObject(rate->Label("device"), rate->Label("port")),
                                  "link_rate_gbps", PromNumber(gbps), gbps));
         }
       },
       [](const Values& values) { return Get(values, "link_rate_gbps") + " Gb/s"; },
       nullptr});
  for (const bool width : {false, true}) {
    const char* name = width ? "pcie_width_lanes" : "pcie_speed_gts";
    settings.push_back(
        {width ? "fleet.pcie_width" : "fleet.pcie_speed",
         "rdmafleetpciebelowpeers",
         Severity::kWarn,
         true,
         width ? "PCIe link width" : "PCIe link speed",
         "the NIC cannot reach the rate its peers do (a slower or narrower slot, a riser, a BIOS "
         "setting, or a link that trained low); compare lspci -vv (LnkSta, LnkCap) with a peer's "
         "and move the card to a slot like its peers' or fix the BIOS PCIe settings",
         On::kDevice,
         {name},
         [width, name](const Host& host, std::vector<Row>& rows) {
           // max without (pci_address, end, kind): one figure per RDMA device
           std::map<std::string, double> by_device;
           for (const Sample* link :
                host.now->Find(width ? "rdma_pcie_link_width_lanes"
                                     : "rdma_pcie_link_speed_transfers_per_second",
                               {{"end", "device"}, {"kind", "current"}})) {
             const double value = width ? link->value : link->value / 1e9;
             const auto [it, fresh] = by_device.try_emplace(link->Label("device"), value);
             if (!fresh) it->second = std::max(it->second, value);
           }
           for (const auto& [device, value] : by_device) {
             const Kind* kind = host.KindOf(device);
             if (kind == nullptr) continue;  // a PCI netdev without an RDMA device
             rows.push_back(
                 MakeRow(host, *kind, host.DeviceObject(device), name, PromNumber(value), value));
           }
         },
         [width, name](const Values& values) {
           return width ? "x" + Get(values, name) : Get(values, name) + " GT/s";
         },
         nullptr});
  }
  settings.push_back(
      {"fleet.netdev_mtu",
       "rdmafleetmtudrift",
       Severity::kWarn,
       false,
       "netdev MTU",
       "lower, this host cuts every message into more packets; higher, it sends frames its "
       "peers' path may drop: set the peers' MTU, and make it persistent",
       On::kNetdev,
       {"netdev_mtu_bytes"},
       [](const Host& host, std::vector<Row>& rows) {
         NetdevRows(
             host, "rdma_netdev_mtu_bytes", {}, [](const Sample&) { return "netdev_mtu_bytes"; },
             rows);
       },
       [](const Values& values) { return Get(values, "netdev_mtu_bytes"); },
       [](const Object& object, const Kind&, const Values&, const Values& majority) {
         return FixLine({"ip link set dev ", HostValue(object.netdev), " mtu ",
                         HostValue(Get(majority, "netdev_mtu_bytes"))});
       }});
  settings.push_back(
      {"fleet.active_mtu",
       "rdmafleetmtudrift",
       Severity::kWarn,
       false,
       "active MTU",
       "RDMA messages are cut into packets of another size than on its peers; the RoCE active "
       "MTU follows the netdev MTU (fleet.netdev_mtu, roce.netdev_mtu), the InfiniBand one the "
       "peer port (links.active_mtu)",
       On::kPort,
       {"active_mtu_bytes"},
       [](const Host& host, std::vector<Row>& rows) {
         for (const Sample* mtu : host.now->Find("rdma_port_active_mtu_bytes")) {
           const Kind* kind = host.KindOf(mtu->Label("device"));
           if (kind == nullptr) continue;
           rows.push_back(MakeRow(host, *kind,
                                  host.DeviceObject(mtu->Label("device"), mtu->Label("port")),
                                  "active_mtu_bytes", PromNumber(mtu->value), mtu->value));
         }
       },
       [](const Values& values) { return Get(values, "active_mtu_bytes"); },
       nullptr});
  settings.push_back(
      {"fleet.pfc", "rdmafleetpfcdrift", Severity::kWarn, false, "PFC-enabled priorities",
       "without PFC on its peers' lossless priority this host drops RoCE under congestion "
       "(retransmissions for every job across it); with PFC where its peers have none it pauses "
       "a class the fabric does not expect: set PFC as on its peers and the switches",
       On::kNetdev, Names(PfcSetting),
       [](const Host& host, std::vector<Row>& rows) {
         NetdevRows(
             host, "rdma_netdev_pfc_enabled", {},
             [](const Sample& series) { return "pfc_priority_" + series.Label("priority"); }, rows);
       },
       [](const Values& values) { return OnPriorities(values, PfcSetting); },
       [](const Object& object, const Kind&, const Values& own, const Values& majority) {
         const bool mlx5 = object.driver == "mlx5_core";
         std::string flags;
         for (int priority = 0; priority < fleet_rules::kPriorities; ++priority) {
           // A priority without a majority keeps its own setting.
           const std::string name = PfcSetting(priority);
           const bool on = (majority.contains(name) ? Get(majority, name) : Get(own, name)) == "1";
           flags += mlx5 ? (priority == 0 ? "" : ",") + std::string(on ? "1" : "0")
                         : " " + std::to_string(priority) + (on ? ":on" : ":off");
         }
         return mlx5 ? FixLine({"mlnx_qos -i ", HostValue(object.netdev), " --pfc ", flags})
                     : FixLine({"dcb pfc set dev ", HostValue(object.netdev), " prio-pfc", flags});
       }});
  std::vector<std::string> dscp_names{"dscp_trust"};
  for (const char* dscp : fleet_rules::kDscps) dscp_names.push_back(DscpPrioritySetting(dscp));
  settings.push_back(
      {"fleet.dscp", "rdmafleetdscpdrift", Severity::kWarn, false, "DSCP trust and map",
       "this host classifies RoCE unlike its peers, so its RoCE traffic (and CNPs, DSCP 48) lands "
       "on another priority than theirs, without their PFC and ECN: trust and map DSCP as on its "
       "peers",
       On::kNetdev, dscp_names,
       [](const Host& host, std::vector<Row>& rows) {
         NetdevRows(
             host, "rdma_netdev_dscp_trust", {}, [](const Sample&) { return "dscp_trust"; }, rows);
         for (const RoceNetdev& roce : host.roce) {
           for (const char* dscp : fleet_rules::kDscps) {
             for (const Sample* priority :
                  host.now->Find("rdma_netdev_dscp_priority_info",
                                 {{"device", roce.object.netdev}, {"dscp", dscp}})) {
               rows.push_back(MakeRow(host, roce.kind, roce.object, DscpPrioritySetting(dscp),
                                      priority->Label("priority")));
             }
           }
         }
       },
       [](const Values& values) {
         const std::string trust = Get(values, "dscp_trust");
         if (trust == "0") return std::string("trust pcp");
         std::string text = trust == "1" ? "trust dscp" : "";
         for (const char* dscp : fleet_rules::kDscps) {
           const std::string priority = Get(values, DscpPrioritySetting(dscp));
           text += (text.empty() ? "" : ", ") + std::string("DSCP ") + dscp + " on priority " +
                   (priority.empty() ? "none" : priority);
         }
         return text;
       },
       [](const Object& object, const Kind&, const Values& own, const Values& majority) {
         const bool mlx5 = object.driver == "mlx5_core";
         if (Get(majority, "dscp_trust") == "0") {
           return mlx5 ? FixLine({"mlnx_qos -i ", HostValue(object.netdev), " --trust pcp"})
                       : FixLine({"dcb app flush dev ", HostValue(object.netdev), " dscp-prio"});
         }
         std::string fix;
         if (mlx5 && Get(own, "dscp_trust") != "1") {
           fix = FixLine({"mlnx_qos -i ", HostValue(object.netdev), " --trust dscp"});
           if (fix.empty()) return fix;
         }
         // "DSCP:PRIORITY ...": the priorities are the majority's labels, each word quoted.
         std::string map;
         for (const char* dscp : fleet_rules::kDscps) {
           const std::string priority = Get(majority, DscpPrioritySetting(dscp));
           if (!priority.empty())
             map += (map.empty() ? "" : " ") + std::string(dscp) + ":" + priority;
         }
         if (!map.empty()) {
           const std::string words = QuotedWords(map);
           const std::string replace =
               words.empty()
                   ? ""
                   : FixLine({"dcb app replace dev ", HostValue(object.netdev), " dscp-prio "});
           if (replace.empty()) return std::string();
           fix += (fix.empty() ? "" : " && ") + replace + words;
         }
         return fix;
       }});
  settings.push_back(
      {"fleet.default_tos",
       "rdmafleetdscpdrift",
       Severity::kWarn,
       false,
       "default RoCE ToS",
       "rdma_cm connections that set no ToS leave this host with another DSCP than its peers', "
       "on another priority (0: configfs shows no setting, the kernel's default)",
       On::kPort,
       {"default_roce_tos"},
       [](const Host& host, std::vector<Row>& rows) {
         std::set<std::pair<std::string, std::string>> set;
         const auto add = [&](const std::string& device, const std::string& port, double tos) {
           const Kind* kind = host.KindOf(device);
           if (kind == nullptr || !set.emplace(device, port).second) return;
           rows.push_back(MakeRow(host, *kind, host.DeviceObject(device, port), "default_roce_tos",
                                  PromNumber(tos), tos));
         };
         for (const Sample* tos : host.now->Find("rdma_port_default_roce_tos")) {
           add(tos->Label("device"), tos->Label("port"), tos->value);
         }
         // As the rule: the kernel's default 0 on an Ethernet port where the exporter sees
         // configfs and the device has no directory there.
         if (host.now->Value("rdma_host_rdma_cm_configfs") != 1.0) return;
         for (const Sample* port : host.now->Find("rdma_port_info", {{"link_layer", "Ethernet"}})) {
           add(port->Label("device"), port->Label("port"), 0);
         }
       },
       [](const Values& values) { return Get(values, "default_roce_tos"); },
       [](const Object& object, const Kind&, const Values&, const Values& majority) {
         const std::string dir = "/sys/kernel/config/rdma_cm/" + object.device;
         return FixLine({"mkdir -p ", HostValue(dir), " && echo ",
                         HostValue(Get(majority, "default_roce_tos")), " > ",
                         HostValue(dir + "/ports/" + object.port + "/default_roce_tos")});
       }});
  std::vector<std::string> ecn_names;
  for (const char* point : {"np", "rp"}) {
    for (std::string& name : Names([point](int p) { return EcnSetting(point, p); })) {
      ecn_names.push_back(std::move(name));
    }
  }
  settings.push_back(
      {"fleet.ecn", "rdmafleetecndrift", Severity::kWarn, false, "ECN",
       "DCQCN does not work for this host's flows as for its peers' (no CNPs sent for marked "
       "packets, or CNPs ignored), and PFC pauses take over: enable ECN as on its peers, and "
       "persist it as they do",
       On::kNetdev, ecn_names,
       [](const Host& host, std::vector<Row>& rows) {
         NetdevRows(
             host, "rdma_netdev_ecn_enabled", {},
             [](const Sample& series) {
               return "ecn_" + series.Label("point") + "_priority_" + series.Label("priority");
             },
             rows);
       },
       [](const Values& values) {
         return "notification point on priorities " +
                OnPriorities(values, [](int p) { return EcnSetting("np", p); }) +
                ", reaction point on " +
                OnPriorities(values, [](int p) { return EcnSetting("rp", p); });
       },
       [](const Object& object, const Kind&, const Values& own, const Values& majority) {
         std::string fix;
         for (const char* point : {"np", "rp"}) {
           for (int priority = 0; priority < fleet_rules::kPriorities; ++priority) {
             const std::string name = EcnSetting(point, priority);
             const std::string want = Get(majority, name);
             if (want.empty() || Get(own, name) == want) continue;
             const std::string one =
                 FixLine({"echo ", HostValue(want), " > ",
                          HostValue("/sys/class/net/" + object.netdev + "/ecn/roce_" + point +
                                    "/enable/" + std::to_string(priority))});
             if (one.empty()) return std::string();  // a value that cannot be quoted: no fix
             fix += (fix.empty() ? "" : " && ") + one;
           }
         }
         return fix;
       }});
  settings.push_back(
      {"fleet.coalescing",
       "rdmafleetcoalescingdrift",
       Severity::kInfo,
       false,
       "interrupt coalescing",
       "it moderates the interface's Ethernet queues only (RDMA completions are moderated per "
       "CQ): unlike its peers this host spends more CPU on interrupts, or adds latency, for its "
       "IP traffic",
       On::kNetdev,
       {CoalesceUsecsSetting("rx"), CoalesceUsecsSetting("tx"), CoalesceAdaptiveSetting("rx"),
        CoalesceAdaptiveSetting("tx")},
       [](const Host& host, std::vector<Row>& rows) {
         NetdevRows(
             host, "rdma_netdev_coalesce_usecs", {},
             [](const Sample& series) { return CoalesceUsecsSetting(series.Label("direction")); },
             rows);
         NetdevRows(
             host, "rdma_netdev_coalesce_adaptive", {},
             [](const Sample& series) {
               return CoalesceAdaptiveSetting(series.Label("direction"));
             },
             rows);
       },
       [](const Values& values) {
         std::string text;
         for (const char* direction : {"rx", "tx"}) {
           const std::string usecs = Get(values, CoalesceUsecsSetting(direction));
           const std::string adaptive = Get(values, CoalesceAdaptiveSetting(direction));
           if (!usecs.empty()) {
             text += (text.empty() ? "" : ", ") + std::string(direction) + "-usecs " + usecs;
           }
           if (!adaptive.empty()) {
             text += (text.empty() ? "" : ", ") + std::string("adaptive-") + direction + " " +
                     OnOff(adaptive);
           }
         }
         return text;
       },
       [](const Object& object, const Kind&, const Values& own, const Values& majority) {
         // ethtool -C's knobs, the adaptive ones first.
         std::string knobs;
         for (const bool adaptive : {true, false}) {
           for (const char* direction : {"rx", "tx"}) {
             const std::string name =
                 adaptive ? CoalesceAdaptiveSetting(direction) : CoalesceUsecsSetting(direction);
             const std::string want = Get(majority, name);
             if (want.empty() || Get(own, name) == want) continue;
             // The value is the fleet's, read from Prometheus (a recorded row's label): quoted
             // like every host value, never pasted into the line as it came; one that cannot be
             // quoted leaves no fix, not a fix without that knob.
             const std::string knob =
                 adaptive ? FixLine({" adaptive-", direction, " ", HostValue(OnOff(want))})
                          : FixLine({" ", direction, "-usecs ", HostValue(want)});
             if (knob.empty()) return std::string();
             knobs += knob;
           }
         }
         return knobs.empty() ? "" : FixLine({"ethtool -C ", HostValue(object.netdev), knobs});
       }});
  settings.push_back(
      {"fleet.cqe_compression",
       "rdmafleetcoalescingdrift",
       Severity::kInfo,
       false,
       "rx_cqe_compress",
       "the interface's Ethernet receive completions are compressed unlike its peers': more "
       "interrupts and PCIe traffic per IP packet on the host without it",
       On::kNetdev,
       {"rx_cqe_compress"},
       [](const Host& host, std::vector<Row>& rows) {
         NetdevRows(
             host, "rdma_netdev_private_flag", {{"flag", "rx_cqe_compress"}},
             [](const Sample&) { return "rx_cqe_compress"; }, rows);
       },
       [](const Values& values) { return OnOff(Get(values, "rx_cqe_compress")); },
       [](const Object& object, const Kind&, const Values&, const Values& majority) {
         return FixLine({"ethtool --set-priv-flags ", HostValue(object.netdev), " rx_cqe_compress ",
                         HostValue(OnOff(Get(majority, "rx_cqe_compress")))});
       }});
  // Pluggable modules (issue 40): each RDMA port's module as "VENDOR PART", and a CMIS module's
  // firmware as "VENDOR PART FIRMWARE" (the rule's label_join of rdma_link_module_info).
  settings.push_back(
      {"fleet.module",
       "rdmafleetmoduledrift",
       Severity::kInfo,
       false,
       "pluggable module",
       "optics of another vendor, part or firmware differ in power, temperature and FEC margins, "
       "and a module firmware fix may not have reached this one: check it is a qualified part "
       "(ethtool -m), replace it with the fleet's part or update its firmware "
       "(ethtool --flash-module-firmware)",
       On::kPort,
       {"module_type", "module_firmware"},
       [](const Host& host, std::vector<Row>& rows) {
         for (const Sample* info : host.now->Find("rdma_link_module_info")) {
           const std::string& device = info->Label("device");
           const std::string& vendor = info->Label("vendor");
           const Kind* kind = host.KindOf(device);
           if (device.empty() || vendor.empty() || kind == nullptr) continue;
           const Object object = host.DeviceObject(device, info->Label("port"));
           const std::string type = vendor + " " + info->Label("part");
           rows.push_back(MakeRow(host, *kind, object, "module_type", type));
           if (!info->Label("firmware").empty()) {
             rows.push_back(MakeRow(host, *kind, object, "module_firmware",
                                    type + " " + info->Label("firmware")));
           }
         }
       },
       [](const Values& values) {
         const std::string firmware = Get(values, "module_firmware");
         return firmware.empty() ? Get(values, "module_type") : firmware;
       },
       nullptr});
  return settings;
}

// The rule's rows of `host`, read from rdma:fleet_setting:value: `by_name` finds each one's
// check; the object is the host's (its scope, PCI address and driver from its own series).
void RecordedRows(const Host& host, const std::map<std::string, size_t>& by_name,
                  const std::string& cluster_label, std::vector<std::vector<Row>>& rows) {
  for (const Sample* series : host.now->Find(fleet_rules::kSettingSeries)) {
    const auto check = by_name.find(series->Label("setting"));
    if (check == by_name.end()) continue;  // a setting this doctor does not know
    const Setting& setting = Settings()[check->second];
    const std::string& device = series->Label("device");
    Object object;
    if (setting.on == On::kNetdev) {
      const RoceNetdev* roce = host.RoceOf(device);
      object =
          roce != nullptr ? roce->object : Object{.netdev = device, .scope = {{"netdev", device}}};
    } else {
      object = host.DeviceObject(device, setting.on == On::kPort ? series->Label("port") : "");
    }
    rows[check->second].push_back(MakeRow(host, KindOfRow(*series, cluster_label),
                                          std::move(object), series->Label("setting"),
                                          series->Label("setting_value"), series->value));
  }
}

// setting -> value -> the hosts of a group with that value, as the fleet rules record them for
// the whole cluster (kSettingHostsSeries).
using Tally = std::map<std::string, std::map<std::string, double>>;

// The rule's majority per setting of one group, and the objects whose rows differ from it.
// `cluster`: the rules' count of hosts per value over the whole cluster, which the alert
// compares with; nullptr: the group's hosts in this report are counted.
Verdict JudgeSetting(const Setting& setting, const Kind& kind, const std::vector<const Row*>& rows,
                     size_t hosts, const Tally* cluster) {
  struct Majority {
    std::string value;
    double number = 0;
    size_t hosts = 0;
  };
  // setting -> value -> hosts with it (a host counts once per value it has)
  std::map<std::string, std::map<std::string, std::set<std::string>>> seen_on;
  std::map<std::string, std::map<std::string, double>> numbers;
  for (const Row* row : rows) {
    seen_on[row->name][row->value].insert(row->instance);
    numbers[row->name].try_emplace(row->value, row->number);
  }
  std::map<std::string, std::map<std::string, size_t>> tally;
  for (const auto& [name, by_value] : seen_on) {
    const auto recorded = cluster != nullptr ? cluster->find(name) : Tally::const_iterator{};
    if (cluster != nullptr && recorded != cluster->end()) {
      for (const auto& [value, count] : recorded->second) {
        tally[name][value] = static_cast<size_t>(count);
        // A value only other hosts have: its figure is the one its label writes.
        if (!numbers[name].contains(value)) {
          numbers[name][value] = sysfs::ParseDouble(value).value_or(0);
        }
      }
    } else {
      for (const auto& [value, with] : by_value) tally[name][value] = with.size();
    }
  }
  std::map<std::string, Majority> majority;
  std::vector<std::string> tied;
  for (const auto& [name, by_value] : tally) {
    size_t most = 0;
    for (const auto& [value, count] : by_value) most = std::max(most, count);
    std::vector<std::string> top;
    for (const auto& [value, count] : by_value) {
      if (count == most) top.push_back(value);
    }
    if (top.size() > 1) {
      tied.push_back(name);
    } else {
      majority[name] = {top.front(), numbers[name][top.front()], most};
    }
  }
  Values majority_values;
  size_t fewest = hosts;
  for (const auto& [name, chosen] : majority) {
    majority_values[name] = chosen.value;
    fewest = std::min(fewest, chosen.hosts);
  }
  const std::string what = setting.what;
  const std::string model = ModelText(kind);
  const std::string majority_text = setting.show(majority_values);

  // Each NIC object's values, and the first of its rows that differs from its majority.
  struct Seen {
    const Row* row;
    Values own;
    std::string odd;  // empty: none differs
  };
  std::map<std::pair<std::string, Scope>, Seen> objects;
  std::vector<std::pair<std::string, Scope>> order;
  for (const Row* row : rows) {
    const auto key = std::make_pair(row->instance, row->object.scope);
    auto [it, fresh] = objects.try_emplace(key, Seen{row, {}, ""});
    if (fresh) order.push_back(key);
    std::string& value = it->second.own[row->name];
    value += (value.empty() ? "" : "/") + row->value;
    const auto chosen = majority.find(row->name);
    if (chosen == majority.end() || !it->second.odd.empty()) continue;
    const bool odd = setting.below_only ? row->number < chosen->second.number
                                        : row->value != chosen->second.value;
    if (odd) it->second.odd = row->name;
  }

  Verdict verdict;
  verdict.cluster_wide = cluster != nullptr;
  // Who holds the majority: the group's hosts in this report, or the rules' whole cluster.
  const auto holders = [&](size_t most) {
    return cluster != nullptr
               ? Hosts(most) + " with " + model + " in the cluster (the fleet rules' count)"
               : Num(static_cast<double>(most)) + " of the " + Hosts(hosts) + " with " + model;
  };
  for (const auto& key : order) {
    const Seen& seen = objects.at(key);
    if (seen.odd.empty()) continue;
    const size_t most = majority.at(seen.odd).hosts;
    const std::string own = setting.show(seen.own);
    Verdict::Outlier outlier{seen.row->instance,
                             seen.row->object.scope,
                             what + " " + own,
                             what + " " + majority_text + ", as " + holders(most) + " have",
                             what + " " + own + (setting.below_only ? " below" : " unlike") +
                                 " its peers' majority (" + majority_text + "): " + setting.why,
                             ""};
    if (setting.fix) outlier.fix = setting.fix(seen.row->object, kind, seen.own, majority_values);
    verdict.outliers.push_back(std::move(outlier));
  }
  const std::string among = cluster != nullptr ? "the hosts with " + model + " in the cluster"
                                               : "the " + Hosts(hosts) + " with " + model;
  if (!tied.empty()) {
    std::string split;
    for (const auto& [value, count] : tally.at(tied.front())) {
      split += (split.empty() ? "" : ", ") + ShowOne(setting, tied.front(), value) + " on " +
               Hosts(count);
    }
    verdict.group =
        Verdict::Group{Severity::kInfo, "no majority " + what + " among " + among + ": " + split,
                       "one value on more hosts than any other",
                       "a tie is not drift of one host: decide which value the fleet should have"};
  } else if (verdict.outliers.empty()) {
    std::string observed;
    if (cluster != nullptr) {
      observed = "none of the " + Hosts(hosts) + " with " + model + " apart from " + what + " " +
                 majority_text + ", the majority of " + among;
    } else if (fewest == hosts) {
      observed = "all " + Hosts(hosts) + " with " + model + ": " + what + " " + majority_text;
    } else {
      observed = Num(static_cast<double>(fewest)) + " of the " + Hosts(hosts) + " with " + model +
                 ": " + what + " " + majority_text +
                 (setting.below_only ? ", the others above it"
                                     : ", the others without some of these settings");
    }
    verdict.group =
        Verdict::Group{Severity::kOk, std::move(observed),
                       setting.below_only ? "none below the majority's" : "one value", ""};
  }
  return verdict;
}

}  // namespace

const std::vector<Setting>& Settings() {
  static const std::vector<Setting> settings = MakeSettings();
  return settings;
}

void JudgeSettings(const std::vector<Host>& hosts, const std::string& cluster_label,
                   const std::vector<Sample>& setting_hosts, std::vector<Finding>& findings) {
  const std::vector<Setting>& settings = Settings();
  // Where the fleet rules run, their rows are what the alerts judged: doctor judges the same,
  // against the same counts of hosts per value where those are recorded too.
  std::vector<std::vector<Row>> rows(settings.size());
  std::map<Kind, Tally> cluster_tally;
  if (Recorded(hosts, fleet_rules::kSettingSeries)) {
    for (const Sample& count : setting_hosts) {
      if (!std::isfinite(count.value) || count.value < 0) continue;
      cluster_tally[KindOfRow(count, cluster_label)][count.Label("setting")]
                   [count.Label("setting_value")] = count.value;
    }
    std::map<std::string, size_t> by_name;
    for (size_t i = 0; i < settings.size(); ++i) {
      for (const std::string& name : settings[i].names) by_name.emplace(name, i);
    }
    for (const Host& host : hosts) RecordedRows(host, by_name, cluster_label, rows);
  } else {
    for (size_t i = 0; i < settings.size(); ++i) {
      for (const Host& host : hosts) settings[i].collect(host, rows[i]);
    }
  }
  for (size_t i = 0; i < settings.size(); ++i) {
    const Setting& setting = settings[i];
    Groups groups;
    for (const Row& row : rows[i]) groups[row.kind].push_back(&row);
    if (groups.empty()) {
      // Every check appears in every report, as the per-host ones do.
      findings.push_back(Skip(setting.id, kArea, {{"instance", "*"}}, setting.runbook, kNothing));
      continue;
    }
    JudgeGroups(
        {setting.id, setting.runbook, setting.severity, "majority " + std::string(setting.what)},
        groups,
        [&](const Kind& kind, const std::vector<const Row*>& group, size_t count) {
          const auto tally = cluster_tally.find(kind);
          return JudgeSetting(setting, kind, group, count,
                              tally == cluster_tally.end() ? nullptr : &tally->second);
        },
        findings);
  }
}

}  // namespace rdmascope::doctor::fleet_drift
