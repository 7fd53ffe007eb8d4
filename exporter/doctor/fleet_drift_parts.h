// The pieces of fleet drift (fleet_drift.h) its files share: what makes hosts peers, a host as
// the checks read it, a row (one setting or error rate of one NIC object, as the fleet rules
// record it), and the group verdict both judgements report through. fleet_drift.cc has the
// hosts, the verdicts and the entry point, fleet_drift_settings.cc the settings' majority,
// fleet_drift_rates.cc the error and congestion rates against the peers' median.
#pragma once

#include <functional>
#include <map>
#include <optional>
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

// What makes hosts peers, as the fleet rules group them: a NIC model in a cluster (the value of
// --prometheus.cluster-label).
struct Kind {
  std::string cluster, board_id, hca_type;
  auto operator<=>(const Kind&) const = default;
};

// What a setting or a rate belongs to, and what a fix addresses: an RDMA device, one of its
// ports, or the netdev of an Ethernet RDMA port (then device and port are that port's).
struct Object {
  std::string device, port, netdev;
  std::string pci_address;  // of the device, where exported
  std::string driver;       // of the netdev (rdma_netdev_info), where exported
  Scope scope;              // device, port, netdev as the per-host checks name them
};

// An RDMA port's interface, the subject of the Ethernet settings (rdma:roce_netdev_board:info).
struct RoceNetdev {
  Object object;
  Kind kind;
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
  const RoceNetdev* RoceOf(const std::string& netdev) const {
    for (const RoceNetdev& netdev_of : roce) {
      if (netdev_of.object.netdev == netdev) return &netdev_of;
    }
    return nullptr;
  }
  // The object of an RDMA device, or of one of its ports (port not empty).
  Object DeviceObject(const std::string& device, const std::string& port = "") const;
};

// One series of rdma:fleet_setting:value or rdma:fleet_error_rate:rate5m: read from the
// Prometheus where the fleet rules run there, else computed from the host's own series as the
// rule computes it.
struct Row {
  std::string instance;
  Kind kind;
  Object object;
  std::string name;   // the rule's setting (pfc_priority_3) or error (crc)
  std::string value;  // a setting's setting_value, as the rule writes it ("9000", "1")
  double number = 0;  // the sample: a setting's figure (compared by size), an error's rate per s
};

using Groups = std::map<Kind, std::vector<const Row*>>;

// "board_id MT_0000000359", "hca_type MT4125" or "no board_id or hca_type", and the cluster.
std::string ModelText(const Kind& kind);
// A measured figure for a person: whole numbers from 100 up, 3 significant digits below.
std::string Figure(double value);
std::string Hosts(size_t count);
Host MakeHost(const std::string& instance, const Snapshot& now, const Snapshot* before,
              const std::string& cluster_label);

// What one judgement says of one group: an ok or info finding for the whole group (none when
// every host it judged is reported), and the members apart from their peers.
struct Verdict {
  struct Group {
    Severity severity;  // ok: nobody apart; info: no reference to compare with (a tie)
    std::string observed, expected, advice;
  };
  struct Outlier {
    std::string instance;
    Scope scope;
    std::string observed, expected, advice, fix;
  };
  std::optional<Group> group;
  std::vector<Outlier> outliers;
  // Judged against the rules' figures for the whole cluster (FleetReference), not only the
  // group's hosts in this report.
  bool cluster_wide = false;
};

// A check judged group by group: its id, runbook anchor (the fleet rule's) and the severity of
// an outlier (the rule's severity label).
struct GroupCheck {
  const char* id;
  const char* runbook;
  Severity severity;
  std::string compared;  // "majority firmware", "median": what one host alone lacks
};

// The one verdict helper of both judgements: for each group `judge` (the group's kind, its rows,
// its host count) decides; each outlier is a finding on its host (advice naming how many more of
// its kind are reported); a group of one host without outliers, judged without the cluster's
// figures, is one info finding (no peers).
void JudgeGroups(
    const GroupCheck& check, const Groups& groups,
    const std::function<Verdict(const Kind&, const std::vector<const Row*>&, size_t hosts)>& judge,
    std::vector<Finding>& findings);

// Where a setting lives: the rule's `device` label is the RDMA device, with `port` one of its
// ports, or the netdev.
enum class On { kDevice, kPort, kNetdev };

// One check of settings: the rule's settings it compares (each row judged against its own
// setting's majority, as the rule does), shown together per NIC object.
struct Setting {
  const char* id;
  const char* runbook;  // the anchor of the fleet rule of the same drift
  Severity severity;    // of an outlier: the rule's severity label
  bool below_only;      // link rate, PCIe: only a lower value than the majority's is drift
  const char* what;     // "firmware", "netdev MTU"
  const char* why;      // what it costs and what to do, for the advice
  On on;
  std::vector<std::string> names;  // the rule's `setting` values this check compares
  // The host's rows as the rule computes them.
  std::function<void(const Host&, std::vector<Row>&)> collect;
  // One object's settings (name -> value) for a person: "3,4", "trust dscp, DSCP 26 on ...".
  std::function<std::string(const std::map<std::string, std::string>&)> show;
  // The command that gives `object` the majority's values (`own`: its values now).
  std::function<std::string(const Object& object, const Kind& kind,
                            const std::map<std::string, std::string>& own,
                            const std::map<std::string, std::string>& majority)>
      fix;
};

// The settings compared (fleet_drift_settings.cc).
const std::vector<Setting>& Settings();

// The settings, each from the rule's rows (fleet_drift_settings.cc).
void JudgeSettings(const std::vector<Host>& hosts, const std::string& cluster_label,
                   const std::vector<Sample>& setting_hosts, std::vector<Finding>& findings);

// The error and congestion rates over the window (`window_seconds`, 0: none) against the
// peers' median (fleet_drift_rates.cc).
void JudgeErrorRates(const std::vector<Host>& hosts, double window_seconds,
                     const std::string& cluster_label, const std::vector<Sample>& error_medians,
                     std::vector<Finding>& findings);

// The kind a recorded row names (its cluster label, board_id, hca_type).
Kind KindOfRow(const Sample& row, const std::string& cluster_label);
// True when any host holds a series of `name`: the rule that records it runs there.
bool Recorded(const std::vector<Host>& hosts, std::string_view name);

}  // namespace rdmascope::doctor::fleet_drift
