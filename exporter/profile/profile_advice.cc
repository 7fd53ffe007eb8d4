#include "profile/profile_advice.h"

namespace rdmascope::profile {

doctor::DoctorOptions MeasuredOptions(const ProfileData& data) {
  doctor::DoctorOptions options;
  // Interpolated, not the bucket's upper bound, which overstated the RTT (and so the depth
  // advised) by up to 2x (issue 26 item 6); the log2 buckets bound its error to their width.
  if (const auto p50 = data.messages.completion_latency_ns.Interpolated(0.5); p50 && *p50 > 0) {
    options.rtt_seconds = *p50 / 1e9;
  }
  return options;
}

}  // namespace rdmascope::profile
