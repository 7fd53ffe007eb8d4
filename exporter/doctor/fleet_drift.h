// Fleet drift (`doctor --prometheus`, issue 29): the checks only a fleet allows, each host
// compared with its peers of the same kind. The per-host checks (checks.h) see one host, which
// is "fine" alone; a job spanning the one host whose firmware, MTU, PFC, DSCP, ECN or link rate
// differs from its peers' runs at the pace of that host.
//
// Peers are the hosts of the same NIC model (board_id, with hca_type: rdma_device_info) in the
// same cluster (the `cluster` label of the series, empty where the targets carry none), as in
// the fleet rules (rules/rdmascope.fleet.rules.yml, group rdmascope.fleet-drift): the majority
// is the value more hosts have than any other (a host counts once per value it has), and only
// the hosts without it are reported, with the rules' severities and runbook anchors. A tie for
// the most hosts, or fewer than kFleetMinHosts hosts of a kind, gives no majority: one info
// finding for the group, no drift. A group without outliers gives one ok finding, not one per
// host, so that the report of 1,000 hosts stays short. Group findings have instance "*" and
// the group's labels (cluster, board_id, hca_type...) in their scope. docs/doctor.md lists
// every check ("Fleet: doctor --prometheus").
#pragma once

#include <map>
#include <string>
#include <vector>

#include "doctor/finding.h"
#include "doctor/options.h"
#include "doctor/samples.h"

namespace rdmascope::doctor {

// Fewer hosts than this in a group: no majority to compare with (with two, neither is odd).
inline constexpr size_t kFleetMinHosts = 3;

// RdmaFleetErrorRateOutlier: more than 10 times the median of the peers' ports, and above a
// floor per second so that an idle fleet (median 0) does not flag a host for a few errors.
inline constexpr double kFleetErrorFactor = 10;

// `now` and `before` (the evaluation one --window earlier; empty with --window 0s, and it may
// lack instances): instance -> its snapshot (doctor/prometheus_snapshots.h). Targets whose
// `up` is 0 are reported down and left out of every comparison.
std::vector<Finding> FleetDrift(const std::map<std::string, Snapshot>& now,
                                const std::map<std::string, Snapshot>& before,
                                const DoctorOptions& options);

}  // namespace rdmascope::doctor
