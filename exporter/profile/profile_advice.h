// The profile's advice is doctor's: the same checks (doctor/checks.h) run over the profile's
// first and last collections. What a profile adds is measurements doctor otherwise assumes:
// this turns them into doctor's options.
#pragma once

#include "doctor/options.h"
#include "profile/profile_data.h"

namespace rdmascope::profile {

// Doctor's default thresholds, with the round trip of queues.qp_depth's bandwidth-delay product
// (port rate x round trip / message size; --doctor.rtt, 80 us by default) replaced by the
// completion latency the preload library sampled for this process (its p50: post to poll of a
// signalled request, what one WR in flight costs). The message size that check takes from the
// same preload counters itself.
doctor::DoctorOptions MeasuredOptions(const ProfileData& data);

}  // namespace rdmascope::profile
