// The profile's advice is doctor's: the same checks (doctor/checks.h) run over the profile's
// first and last collections. What a profile adds is measurements doctor otherwise assumes:
// this turns them into doctor's options.
#pragma once

#include <optional>
#include <string>

#include "doctor/options.h"
#include "profile/profile_data.h"

namespace rdmascope::profile {

// Doctor's default thresholds, with the round trip of queues.qp_depth's bandwidth-delay product
// (port rate x round trip / message size; --doctor.rtt, 80 us by default) replaced by the
// completion latency the preload library sampled for this process. Post to poll includes the
// time a request waits behind the others in a full send queue: by Little's law that wait is
// (sends in flight) / (send rate), so a p50 or mean tracks the depth the queue already has and
// "needed depth" would follow the current one. The requests that waited least are closest to
// the round trip: its p10 (interpolated in its log2 bucket). The message size that check takes
// from the same preload counters itself.
doctor::DoctorOptions MeasuredOptions(const ProfileData& data);

// What Little's law says of the window, for the report's notes: the process's send rate
// (every posted send WR over the window) times its mean post-to-poll latency is the number of
// sends in flight on average; with the p50 and p10 it tells how much of the latency is queueing
// rather than round trip. nullopt without sends or latency samples.
std::optional<std::string> QueueingNote(const ProfileData& data);

}  // namespace rdmascope::profile
