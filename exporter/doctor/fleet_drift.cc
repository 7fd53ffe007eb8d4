// Fleet drift: see fleet_drift.h, and docs/doctor.md ("Fleet: doctor --prometheus") for the
// table of checks with the fleet rule of each. This file: hosts, groups, the majority's
// judgement, hosts missing, and the entry point.
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

namespace {

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
                                const DoctorOptions& options) {
  using namespace fleet_drift;
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
  JudgeErrorRates(hosts, !before.empty(), findings);
  return findings;
}

}  // namespace rdmascope::doctor
