// Sizing checks that compare what the application created with what its host and workload
// need: QP send depth against the bandwidth-delay product, QPs per core, SRQ depth and limit
// against nodes x flows x 1.2, and registration churn. checks_sizing.cc; thresholds and their
// sources in docs/doctor.md.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "doctor/finding.h"
#include "doctor/options.h"
#include "doctor/samples.h"

namespace rdmascope::doctor {

std::vector<Finding> CheckQpDepth(const Snapshot&, const Snapshot*, const DoctorOptions&);
std::vector<Finding> CheckQpsPerCore(const Snapshot&, const Snapshot*, const DoctorOptions&);
std::vector<Finding> CheckSrqSizing(const Snapshot&, const Snapshot*, const DoctorOptions&);
std::vector<Finding> CheckRegistrationChurn(const Snapshot&, const Snapshot*, const DoctorOptions&);

// What queues.qp_depth computes for one process's QPs on one device: the send depth needed to
// keep the device's fastest active port busy over the round trip with the process's message
// size (measured by the preload library, else --doctor.message-size), and its power of two.
struct QpDepthNeed {
  double rate_bytes_per_second = 0;
  double rtt_seconds = 0;
  double message_bytes = 0;
  std::string message_source;  // "measured by the preload library over N sends" / "assumed..."
  double needed = 0;           // BdpWorkRequests(rate, rtt, message)
  double recommended = 0;      // the power of two at or above `needed`
};
// nullopt when no port of `device` is active (its rate, the bandwidth to fill, is unknown).
// Used by CheckQpDepth and by `rdmascope profile` for each QP it saw created.
std::optional<QpDepthNeed> QpDepthNeeded(const Snapshot& now, const std::string& device,
                                         const std::string& pid, const std::string& comm,
                                         const DoctorOptions& options);

// Send WRs one QP needs in flight to keep `rate_bytes_per_second` busy for `rtt_seconds`
// with `message_bytes` per WR: ceil(rate x rtt / message size). 100 Gb/s, 80 us, 4 KiB: 245.
double BdpWorkRequests(double rate_bytes_per_second, double rtt_seconds, double message_bytes);

}  // namespace rdmascope::doctor
