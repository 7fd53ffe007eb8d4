// NIC: the PCIe link each RDMA device trained against what the device and the slot above it
// support, and the firmware of NICs of one model (the same board_id, else hca_type).
#include <algorithm>
#include <map>
#include <set>

#include "doctor/check_util.h"
#include "doctor/checks_host_tuning.h"

namespace rdmascope::doctor {
namespace {

constexpr const char* kArea = "nic";

struct Link {
  std::optional<double> speed, width, max_speed, max_width, slot_speed, slot_width;
};

std::string Gts(double transfers_per_second) { return Num(transfers_per_second / 1e9) + " GT/s"; }

std::string Gbs(double bytes_per_second) {
  return Num(std::round(bytes_per_second / 1e8) / 10) + " GB/s";
}

double Min(const std::optional<double>& a, const std::optional<double>& b) {
  return a && b ? std::min(*a, *b) : a ? *a : *b;
}

}  // namespace

double PcieBytesPerSecond(double transfers_per_second, double lanes) {
  const double gts = transfers_per_second / 1e9;
  const double efficiency = gts <= 5 ? 8.0 / 10 : gts <= 32 ? 128.0 / 130 : 242.0 / 256;
  return transfers_per_second * lanes * efficiency / 8;
}

std::vector<long> FirmwareKey(std::string_view version) {
  std::vector<long> key;
  long part = 0;
  bool digits = false;
  for (char c : version) {
    if (c >= '0' && c <= '9') {
      part = part * 10 + (c - '0');
      digits = true;
    } else if (digits) {
      key.push_back(part);
      part = 0;
      digits = false;
    }
  }
  if (digits) key.push_back(part);
  return key;
}

std::vector<Finding> CheckPcieLink(const Snapshot& now, const Snapshot*, const DoctorOptions&) {
  const std::string id = "nic.pcie_link";
  const std::string runbook = "rdmapciedowntrained";
  std::map<std::pair<std::string, std::string>, Link> links;  // (device, pci_address)
  for (const char* name :
       {"rdma_pcie_link_speed_transfers_per_second", "rdma_pcie_link_width_lanes"}) {
    const bool speed = std::string_view(name).find("speed") != std::string_view::npos;
    for (const Sample* s : now.Find(name)) {
      Link& link = links[{s->Label("device"), s->Label("pci_address")}];
      const bool device = s->Label("end") == "device";
      const bool current = s->Label("kind") == "current";
      if (device && current) (speed ? link.speed : link.width) = s->value;
      if (device && !current) (speed ? link.max_speed : link.max_width) = s->value;
      if (!device && !current) (speed ? link.slot_speed : link.slot_width) = s->value;
    }
  }
  std::vector<Finding> findings;
  for (const auto& [key, link] : links) {
    const auto& [device, address] = key;
    const Scope scope{{"device", device}, {"pci_address", address}};
    if (!link.speed || !link.width || (!link.max_speed && !link.slot_speed) ||
        (!link.max_width && !link.slot_width)) {
      findings.push_back(Skip(id, kArea, scope, runbook,
                              "the link's current or maximum speed/width is not readable "
                              "(current_link_* / max_link_* absent or Unknown)"));
      continue;
    }
    // The link trains to the lower capability of its two ends.
    const double speed = Min(link.max_speed, link.slot_speed);
    const double width = Min(link.max_width, link.slot_width);
    const double have = PcieBytesPerSecond(*link.speed, *link.width);
    const double can = PcieBytesPerSecond(speed, width);
    const bool downtrained = *link.speed < speed || *link.width < width;
    const bool slot_limited = !downtrained && ((link.max_speed && speed < *link.max_speed) ||
                                               (link.max_width && width < *link.max_width));
    Severity severity = downtrained    ? Severity::kWarn
                        : slot_limited ? Severity::kInfo
                                       : Severity::kOk;
    // The port's data rate, when the device has one: a PCIe link below it caps the port.
    const double port_rate = FastestPortDataRate(now, device).value_or(0);
    Finding finding = Make(id, kArea, severity, scope, runbook);
    finding.observed = "x" + Num(*link.width) + " at " + Gts(*link.speed) + " (" + Gbs(have) + ")";
    finding.expected = "x" + Num(width) + " at " + Gts(speed) + " (" + Gbs(can) +
                       "), the lower of the device's and the upstream port's maximum";
    const std::string cap =
        port_rate > 0 && have < port_rate
            ? ": below the " + Gbs(port_rate) + " of its RDMA port, which it now caps"
            : "";
    if (downtrained) {
      finding.advice = device + " (" + address + ") trained to x" + Num(*link.width) + " at " +
                       Gts(*link.speed) + ", " + Percent(have / can) + " of the " + Gbs(can) +
                       " both ends support" + cap +
                       "; reseat the card or its riser, check the slot and BIOS link settings, "
                       "and confirm with `lspci -vv -s " +
                       address + "` (LnkSta vs LnkCap)";
      if (port_rate > 0 && have < port_rate) finding.severity = Severity::kCrit;
    } else if (slot_limited) {
      finding.advice = device + " (" + address + ") supports x" +
                       Num(link.max_width.value_or(width)) + " at " +
                       Gts(link.max_speed.value_or(speed)) + " but the port above it only x" +
                       Num(width) + " at " + Gts(speed) + cap +
                       "; move it to a slot with the card's capability (see `lspci -tv`)";
    }
    findings.push_back(std::move(finding));
  }
  return findings;
}

std::vector<Finding> CheckIrqAffinity(const Snapshot& now, const Snapshot*, const DoctorOptions&) {
  std::vector<Finding> findings;
  for (const Sample* ratio : now.Find("rdma_netdev_irq_local_node_ratio")) {
    const std::string& netdev = ratio->Label("device");
    const auto node = now.Value("rdma_netdev_numa_node", {{"device", netdev}});
    const std::string where = node ? "node " + Num(*node) : "its NUMA node";
    // mlx5 spreads one channel per CPU, local CPUs first (cpumask_local_spread()): on a
    // two-socket host half its interrupts land remote by default (info); most of them remote
    // means irqbalance or a script moved them (warn).
    const Severity severity = ratio->value < 0.5   ? Severity::kWarn
                              : ratio->value < 1.0 ? Severity::kInfo
                                                   : Severity::kOk;
    Finding finding =
        Make("nic.irq_affinity", kArea, severity, {{"netdev", netdev}}, "rdmairqsoffnicnode");
    finding.observed = Percent(ratio->value) + " of " + netdev + "'s interrupts on " + where;
    finding.expected = "100% on the device's node";
    if (severity != Severity::kOk) {
      finding.advice = Percent(1 - ratio->value) + " of " + netdev +
                       "'s interrupts run on another node than the NIC (" + where +
                       "): each completion crosses the socket interconnect; stop irqbalance (or "
                       "ban the NIC's IRQs), pin them to " +
                       where + "'s CPUs, and use no more channels than it has cores (ethtool -L " +
                       netdev + " combined N)";
      finding.fix = FixLine({"systemctl stop irqbalance && set_irq_affinity_bynode.sh ",
                             node ? Num(*node) : std::string("NODE"), " ", HostValue(netdev)});
    }
    findings.push_back(std::move(finding));
  }
  return findings;
}

// XPS picks the transmit queue of the netdev's own (IP) packets by sending CPU. RoCE and
// iWARP traffic is sent by the adapter from the QPs' send queues and never takes a netdev
// transmit queue, so XPS only matters where the interface sends IP traffic at a high rate.
std::vector<Finding> CheckXps(const Snapshot& now, const Snapshot* before, const DoctorOptions&) {
  std::vector<Finding> findings;
  for (const Sample* configured : now.Find("rdma_netdev_xps_configured_ratio")) {
    const std::string& netdev = configured->Label("device");
    const auto local = now.Value("rdma_netdev_xps_local_node_ratio", {{"device", netdev}});
    const auto rate = IpPacketRate(now, before, netdev, "tx");
    const bool busy = rate && *rate > kBusyIpPacketsPerSecond;
    Severity severity = Severity::kOk;
    if (busy && (configured->value < 1 || (local && *local < 1))) severity = Severity::kInfo;
    if (busy && local && *local < 0.5) severity = Severity::kWarn;
    Finding finding = Make("nic.xps", kArea, severity, {{"netdev", netdev}}, "rdmaxpsoffnicnode");
    finding.observed = Percent(configured->value) + " of the transmit queues have XPS" +
                       (local ? ", " + Percent(*local) + " of those on the NIC's node" : "") +
                       "; " + IpPacketRateText(rate, before, "tx");
    finding.expected =
        "every transmit queue mapped to CPUs of the NIC's node, where the "
        "interface sends more than " +
        Num(kBusyIpPacketsPerSecond) + " IP packets/s (RDMA traffic does not use these queues)";
    if (severity != Severity::kOk) {
      finding.advice =
          "a queue without XPS is chosen by flow hash, one mapped to remote CPUs sends from "
          "the other socket (IP traffic only: RDMA is sent from the QPs): map each tx queue "
          "(/sys/class/net/" +
          netdev +
          "/queues/tx-N/xps_cpus) to the CPU whose channel it belongs to, on the NIC's node (the "
          "mlx5 driver does so at load; a script or a changed channel count "
          "undid it). " +
          Percent(1 - configured->value) + " unmapped" +
          (local ? ", " + Percent(1 - *local) + " mapped off-node" : "");
      // No fix command: the mask depends on which CPU serves each queue's channel.
    }
    findings.push_back(std::move(finding));
  }
  return findings;
}

std::vector<Finding> CheckFirmwareUniform(const Snapshot& now, const Snapshot*,
                                          const DoctorOptions&) {
  const std::string id = "nic.firmware_uniform";
  const std::string runbook = "rdmafirmwaremismatch";
  struct Nic {
    std::string device, version;
  };
  std::map<std::string, std::vector<Nic>> models;  // "board_id X" / "hca_type Y" -> NICs
  for (const Sample* info : now.Find("rdma_device_info")) {
    const std::string& version = info->Label("firmware_version");
    if (version.empty()) continue;
    std::string model;
    if (!info->Label("board_id").empty()) {
      model = "board_id " + info->Label("board_id");
    } else if (!info->Label("hca_type").empty()) {
      model = "hca_type " + info->Label("hca_type");
    } else {
      continue;  // no model to compare within (a Soft-RoCE device, an unreadable board)
    }
    models[model].push_back({info->Label("device"), version});
  }
  std::vector<Finding> findings;
  for (const auto& [model, nics] : models) {
    const auto space = model.find(' ');
    const Scope model_scope{{model.substr(0, space), model.substr(space + 1)}};
    std::string newest = nics.front().version;
    std::set<std::string> versions;
    for (const Nic& nic : nics) {
      versions.insert(nic.version);
      if (FirmwareKey(nic.version) > FirmwareKey(newest)) newest = nic.version;
    }
    if (versions.size() == 1) {
      Finding finding = Make(id, kArea, Severity::kOk, model_scope, runbook);
      finding.observed = Num(static_cast<double>(nics.size())) + " NIC(s) of " + model +
                         ", all on firmware " + newest;
      finding.expected = "one firmware version per model";
      findings.push_back(std::move(finding));
      continue;
    }
    for (const Nic& nic : nics) {
      if (nic.version == newest) continue;
      Scope scope{{"device", nic.device}};
      scope.insert(scope.end(), model_scope.begin(), model_scope.end());
      Finding finding = Make(id, kArea, Severity::kWarn, std::move(scope), runbook);
      finding.observed = "firmware " + nic.version + "; " +
                         Num(static_cast<double>(versions.size())) + " versions among the " +
                         Num(static_cast<double>(nics.size())) + " NICs of " + model;
      finding.expected = "the same firmware on every NIC of one model";
      finding.advice = "update " + nic.device + " from " + nic.version + " to " + newest +
                       " (the newest on this host for " + model +
                       "): mixed firmware behaves differently under congestion and in error "
                       "recovery, and vendors support tested combinations only";
      if (model.starts_with("board_id MT_")) {
        // mlxfwmanager names devices by PCI address; without one it would update every NIC.
        const auto pci = now.Find("rdma_pcie_link_width_lanes", {{"device", nic.device}});
        finding.fix = pci.empty() ? "mlxfwmanager --online -u"
                                  : FixLine({"mlxfwmanager --online -u -d ",
                                             HostValue(pci.front()->Label("pci_address"))});
      }
      findings.push_back(std::move(finding));
    }
  }
  return findings;
}

}  // namespace rdmascope::doctor
