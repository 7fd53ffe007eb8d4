// Fleet drift: see fleet_drift.h, and docs/doctor.md ("Fleet drift") for the table of checks
// with the fleet rule of each. This file: hosts, the verdict of each group (both judgements'),
// hosts missing, and the entry point.
#include "doctor/fleet_drift.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <optional>
#include <set>

#include "doctor/check_util.h"
#include "doctor/fleet_drift_parts.h"

namespace rdmascope::doctor {
namespace fleet_drift {

// "board_id MT_0000000359", "hca_type MT4125" or "no board_id or hca_type", and the cluster.
std::string ModelText(const Kind& kind) {
  std::string text = !kind.board_id.empty()   ? "board_id " + kind.board_id
                     : !kind.hca_type.empty() ? "hca_type " + kind.hca_type
                                              : std::string("no board_id or hca_type");
  if (!kind.cluster.empty()) text += " in cluster " + kind.cluster;
  return text;
}

namespace {

// The scope of a finding about a whole group: instance "*" and the group's labels.
Scope GroupScope(const Kind& kind) {
  Scope scope{{"instance", "*"}};
  if (!kind.cluster.empty()) scope.emplace_back("cluster", kind.cluster);
  if (!kind.board_id.empty()) scope.emplace_back("board_id", kind.board_id);
  if (!kind.hca_type.empty()) scope.emplace_back("hca_type", kind.hca_type);
  if (kind.board_id.empty() && kind.hca_type.empty()) scope.emplace_back("model", "unknown");
  return scope;
}

}  // namespace

// A measured figure for a person: whole numbers from 100 up, 3 significant digits below.
std::string Figure(double value) {
  return Num(std::fabs(value) >= 100 ? std::round(value) : value);
}

std::string Hosts(size_t count) {
  return Num(static_cast<double>(count)) + (count == 1 ? " host" : " hosts");
}

Object Host::DeviceObject(const std::string& device, const std::string& port) const {
  Object object{.device = device, .port = port};
  object.scope.emplace_back("device", device);
  if (!port.empty()) {
    object.scope.emplace_back("port", port);
    const auto info = now->Find("rdma_port_info", {{"device", device}, {"port", port}});
    if (!info.empty() && !info.front()->Label("netdev").empty()) {
      object.netdev = info.front()->Label("netdev");
      object.scope.emplace_back("netdev", object.netdev);
    }
  }
  const auto pci = now->Find("rdma_pcie_link_width_lanes", {{"device", device}});
  if (!pci.empty()) object.pci_address = pci.front()->Label("pci_address");
  if (port.empty() && !object.pci_address.empty()) {
    object.scope.emplace_back("pci_address", object.pci_address);
  }
  return object;
}

Host MakeHost(const std::string& instance, const Snapshot& now, const Snapshot* before,
              const std::string& cluster_label) {
  Host host{instance, &now, before, {}, {}};
  for (const Sample* info : now.Find("rdma_device_info")) {
    host.kinds[info->Label("device")] = {info->Label(cluster_label), info->Label("board_id"),
                                         info->Label("hca_type")};
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
    it->second = {host.DeviceObject(port->Label("device"), port->Label("port")), *kind};
    const auto info = now.Find("rdma_netdev_info", {{"device", netdev}});
    if (!info.empty()) it->second.object.driver = info.front()->Label("driver");
  }
  for (auto& [netdev, roce] : by_netdev) {
    if (!ambiguous.contains(netdev)) host.roce.push_back(std::move(roce));
  }
  return host;
}

Kind KindOfRow(const Sample& row, const std::string& cluster_label) {
  return {row.Label(cluster_label), row.Label("board_id"), row.Label("hca_type")};
}

bool Recorded(const std::vector<Host>& hosts, std::string_view name) {
  return std::ranges::any_of(hosts,
                             [name](const Host& host) { return !host.now->Find(name).empty(); });
}

// --- the verdict of each group ------------------------------------------------------------------

void JudgeGroups(
    const GroupCheck& check, const Groups& groups,
    const std::function<Verdict(const Kind&, const std::vector<const Row*>&, size_t hosts)>& judge,
    std::vector<Finding>& findings) {
  for (const auto& [kind, rows] : groups) {
    std::set<std::string> hosts;
    for (const Row* row : rows) hosts.insert(row->instance);
    Verdict verdict = judge(kind, rows, hosts.size());
    // One host and its cluster's figures not recorded: nothing to compare its objects with but
    // each other, which the judgement did (the alert would fire on an odd one among them).
    if (hosts.size() == 1 && !verdict.cluster_wide && verdict.outliers.empty()) {
      verdict.group = Verdict::Group{Severity::kInfo,
                                     "1 host with " + ModelText(kind) + ": no peers, no " +
                                         check.compared + " to compare it with",
                                     "other hosts of this kind", ""};
    }
    if (verdict.group) {
      Finding finding =
          Make(check.id, kArea, verdict.group->severity, GroupScope(kind), check.runbook);
      finding.observed = std::move(verdict.group->observed);
      finding.expected = std::move(verdict.group->expected);
      finding.advice = std::move(verdict.group->advice);
      findings.push_back(std::move(finding));
    }
    std::set<std::string> outlier_hosts;
    for (const Verdict::Outlier& outlier : verdict.outliers) outlier_hosts.insert(outlier.instance);
    for (Verdict::Outlier& outlier : verdict.outliers) {
      Scope scope{{"instance", outlier.instance}};
      scope.insert(scope.end(), outlier.scope.begin(), outlier.scope.end());
      Finding finding = Make(check.id, kArea, check.severity, std::move(scope), check.runbook);
      finding.observed = std::move(outlier.observed);
      finding.expected = std::move(outlier.expected);
      const size_t others = outlier_hosts.size() - 1;
      finding.advice = std::move(outlier.advice) +
                       (others == 0 ? ""
                                    : "; " + Hosts(others) + " more of this kind " +
                                          (others == 1 ? "is" : "are") + " reported too");
      finding.fix = std::move(outlier.fix);
      findings.push_back(std::move(finding));
    }
  }
}

namespace {

// --- hosts missing ----------------------------------------------------------------------------

std::string ClusterOf(const Snapshot& now, const std::string& cluster_label) {
  for (const char* name : {"up", "rdmascope_collector_success", "rdma_device_info"}) {
    const auto series = now.Find(name);
    if (!series.empty()) return series.front()->Label(cluster_label);
  }
  return "";
}

void MissingHosts(const std::map<std::string, Snapshot>& now, const std::string& cluster_label,
                  std::vector<Finding>& findings) {
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
    Cluster& cluster = clusters[ClusterOf(snapshot, cluster_label)];
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
      // Module names are the remote host's series: each quoted, or no fix.
      std::string modules;
      bool quotable = true;
      for (const Sample* module : snapshot.Find("rdma_host_kernel_module_loaded")) {
        if (module->value != 0) continue;
        const std::string word = FixLine({" ", HostValue(module->Label("module"))});
        quotable = quotable && !word.empty();
        modules += word;
      }
      if (!modules.empty() && quotable) finding.fix = "modprobe -a" + modules;
      findings.push_back(std::move(finding));
    }
  }
}

}  // namespace
}  // namespace fleet_drift

std::vector<Finding> FleetDrift(const std::map<std::string, Snapshot>& now,
                                const std::map<std::string, Snapshot>& before,
                                const DoctorOptions& options, const FleetReference& reference) {
  using namespace fleet_drift;
  const std::string& cluster_label = options.prometheus_cluster_label;
  std::vector<Finding> findings;
  MissingHosts(now, cluster_label, findings);
  std::vector<Host> hosts;
  for (const auto& [instance, snapshot] : now) {
    if (snapshot.Value("up") == 0.0) continue;  // down: reported above, no fresh series
    const auto earlier = before.find(instance);
    hosts.push_back(MakeHost(instance, snapshot,
                             earlier == before.end() ? nullptr : &earlier->second, cluster_label));
  }
  JudgeSettings(hosts, cluster_label, reference.setting_hosts, findings);
  // The window: between the two evaluations (from Prometheus, every snapshot of one is taken
  // at one time; captures each have their own, and each host's rates use its own).
  double window = 0;
  for (const Host& host : hosts) {
    if (host.before != nullptr) {
      window = std::max(window, host.now->seconds() - host.before->seconds());
    }
  }
  JudgeErrorRates(hosts, window, cluster_label, reference.error_medians, findings);
  return findings;
}

}  // namespace rdmascope::doctor
