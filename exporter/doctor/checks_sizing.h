// Sizing checks that compare what the application created with what its host and workload
// need: QP send depth against the bandwidth-delay product, QPs per core, SRQ depth and limit
// against nodes x flows x 1.2, and registration churn. checks_sizing.cc; thresholds and their
// sources in docs/doctor.md.
#pragma once

#include <vector>

#include "doctor/finding.h"
#include "doctor/options.h"
#include "doctor/samples.h"

namespace rdmascope::doctor {

std::vector<Finding> CheckQpDepth(const Snapshot&, const Snapshot*, const DoctorOptions&);
std::vector<Finding> CheckQpsPerCore(const Snapshot&, const Snapshot*, const DoctorOptions&);
std::vector<Finding> CheckSrqSizing(const Snapshot&, const Snapshot*, const DoctorOptions&);
std::vector<Finding> CheckRegistrationChurn(const Snapshot&, const Snapshot*, const DoctorOptions&);

// Send WRs one QP needs in flight to keep `rate_bytes_per_second` busy for `rtt_seconds`
// with `message_bytes` per WR: ceil(rate x rtt / message size). 100 Gb/s, 80 us, 4 KiB: 245.
double BdpWorkRequests(double rate_bytes_per_second, double rtt_seconds, double message_bytes);

}  // namespace rdmascope::doctor
