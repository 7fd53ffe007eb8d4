// Fleet drift (`doctor --prometheus`, issue 29): the checks only a fleet allows, each host
// compared with its peers of the same kind. The per-host checks (checks.h) see one host, which
// is "fine" alone; a job spanning the one host whose firmware, MTU, PFC, DSCP, ECN or link rate
// differs from its peers' runs at the pace of that host.
//
// The judgement is the fleet rules' (rules/rdmascope.fleet.rules.yml, group
// rdmascope.fleet-drift), so that a report and the alerts agree: where that Prometheus records
// rdma:fleet_setting:value and rdma:fleet_error_rate:rate5m, doctor judges those rows; where
// it does not, it computes the same rows from the hosts' series (fleet_rules.h holds what both
// share; a test checks it against the rules file). Peers are the hosts of the same NIC model
// (board_id, with hca_type) in the same cluster (the target label --prometheus.cluster-label
// names, empty where the targets carry none). Each setting's majority is the value more hosts
// have than any other (a host counts once per value it has), and only the NIC objects with
// another value are reported, with the rules' severities and runbook anchors; an error rate is
// an outlier above 10 times its peers' ports' median and above the error's floor, per second.
// Where the rules' group figures are recorded too (FleetReference), each row is judged against
// them, the whole cluster's, as the alert judges it; else against the group of the hosts the
// report covers. A tie for the most hosts gives no majority: one info finding for the group, no
// drift. A kind seen on one host only has no peers: one info finding, unless that host's own
// objects differ among themselves (two firmwares on one host), which the alert reports too. A
// group without outliers gives one ok finding, not one per host, so that the report of 1,000
// hosts stays short. Group findings have instance "*" and
// the group's labels (cluster, board_id, hca_type) in their scope. docs/doctor.md lists every
// check ("Fleet drift").
#pragma once

#include <map>
#include <string>
#include <vector>

#include "doctor/finding.h"
#include "doctor/options.h"
#include "doctor/samples.h"

namespace rdmascope::doctor {

// The fleet rules' group figures (fleet_rules::kSettingHostsSeries, kErrorMedianSeries) as
// that Prometheus records them: series without instance or job, as the rules aggregate them
// (a scraped series of the same name would carry both, and is not read).
struct FleetReference {
  std::vector<Sample> setting_hosts;
  std::vector<Sample> error_medians;
};

// `now` and `before` (the evaluation one --window earlier; empty with --window 0s, and it may
// lack instances): instance -> its snapshot (doctor/prometheus_snapshots.h). Targets whose
// `up` is 0 are reported down and left out of every comparison. `reference`: the rules' group
// figures, used with the rules' recorded rows (empty: doctor computes them from the rows).
std::vector<Finding> FleetDrift(const std::map<std::string, Snapshot>& now,
                                const std::map<std::string, Snapshot>& before,
                                const DoctorOptions& options, const FleetReference& reference = {});

}  // namespace rdmascope::doctor
