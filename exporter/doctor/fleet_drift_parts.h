// The pieces of fleet drift (fleet_drift.h) its files share: what makes hosts peers, a host as
// the checks read it, and the judgement of a setting's majority. fleet_drift.cc has the hosts
// and the judgement, fleet_drift_settings.cc the table of settings compared,
// fleet_drift_rates.cc the error and congestion rates against the peers' median.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "doctor/finding.h"
#include "doctor/fleet_drift.h"
#include "doctor/options.h"
#include "doctor/samples.h"

namespace rdmascope::doctor::fleet_drift {

inline constexpr const char* kArea = "fleet";

inline constexpr const char* kNothing =
    "no answering host has what this check compares (none of the series it reads, or no RDMA "
    "device of a known kind to group it by; rates: none measured over the window)";

// What makes hosts peers: a NIC model in a cluster, and for some checks one more label (the
// link layer of a port).
struct Kind {
  std::string cluster, board_id, hca_type, extra_name, extra;
  auto operator<=>(const Kind&) const = default;
};

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

// "board_id MT_0000000359", "hca_type MT4125" or "no board_id or hca_type", and the cluster.
std::string ModelText(const Kind& kind);
// The scope of a finding about a whole group: instance "*" and the group's labels.
Scope GroupScope(const Kind& kind);
// A measured figure for a person: whole numbers from 100 up, 3 significant digits below.
std::string Figure(double value);
std::string Hosts(size_t count);
Host MakeHost(const std::string& instance, const Snapshot& now, const Snapshot* before);
Scope PortScopeWithNetdev(const Snapshot& now, const Sample& series);
std::string DriverOf(const Snapshot& now, const std::string& netdev);

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

// Each group's majority and the hosts without it (or one ok, info or skip for the group).
void Judge(const Setting& setting, const Groups& groups, std::vector<Finding>& findings);

// The settings compared (fleet_drift_settings.cc).
std::vector<Setting> Settings(const DoctorOptions& options);

// The error and congestion rates of the hosts measured over the window (`windowed`: there was
// one) against their peers' median (fleet_drift_rates.cc).
void JudgeErrorRates(const std::vector<Host>& hosts, bool windowed, std::vector<Finding>& findings);

}  // namespace rdmascope::doctor::fleet_drift
