#include "profile/profile_advice.h"

namespace rdmascope::profile {

doctor::DoctorOptions MeasuredOptions(const ProfileData& data) {
  doctor::DoctorOptions options;
  if (const auto p50 = data.messages.completion_latency_ns.Quantile(0.5); p50 && *p50 > 0) {
    options.rtt_seconds = *p50 / 1e9;
  }
  return options;
}

}  // namespace rdmascope::profile
