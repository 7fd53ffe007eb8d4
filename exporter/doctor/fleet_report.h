// `rdmascope doctor --prometheus URL`: doctor's checks on every host a Prometheus scrapes,
// each fed from instant queries (doctor/prometheus_snapshots.h) instead of a local collection:
// the same check code over a snapshot per instance, counter rates between two evaluation
// times --window apart, and each host against its peers (doctor/fleet_drift.h). Every finding
// has the instance in its scope.
//
// A partial answer (the API's `warnings`: Thanos and Mimir when a store did not answer) is
// never taken as data: fleet drift says "could not judge", and the report carries the
// warnings. The history checks need PromQL's @ modifier (Prometheus 2.33): where it is missing
// they skip, saying so, and the rest of the report is made.
#pragma once

#include "doctor/options.h"
#include "doctor/promql_client.h"
#include "doctor/report.h"

namespace rdmascope::doctor {

// The fleet's report from the Prometheus of --prometheus and its --prometheus.* options.
// Throws std::runtime_error saying why when it cannot be made (Prometheus down, slow, an error
// answer to a query the checks need, no rdmascope series for the selector).
ParsedReport ReportFromPrometheus(const DoctorOptions& options);

// The same through `prometheus` (recorded answers in tests).
ParsedReport ReportFromPrometheus(const DoctorOptions& options, PromqlTransport& prometheus);

}  // namespace rdmascope::doctor
