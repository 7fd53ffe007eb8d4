#include "profile/profile_advice.h"

#include <cmath>

#include "doctor/check_util.h"

namespace rdmascope::profile {

// The quantile of post-to-poll latency taken as the round trip (see the header).
constexpr double kRoundTripQuantile = 0.1;

doctor::DoctorOptions MeasuredOptions(const ProfileData& data) {
  doctor::DoctorOptions options;
  // Interpolated, not the bucket's upper bound, which overstated it by up to 2x (issue 26
  // item 6); a low quantile, not the p50, which holds the queueing of a full send queue.
  if (const auto rtt = data.messages.completion_latency_ns.Interpolated(kRoundTripQuantile);
      rtt && *rtt > 0) {
    options.rtt_seconds = *rtt / 1e9;
  }
  return options;
}

std::optional<std::string> QueueingNote(const ProfileData& data) {
  const Log2Histogram& latency = data.messages.completion_latency_ns;
  const Log2Histogram& sends = data.messages.send_bytes;
  if (latency.count == 0 || sends.count == 0 || data.duration_seconds <= 0) return std::nullopt;
  const auto p50 = latency.Interpolated(0.5);
  const auto p10 = latency.Interpolated(kRoundTripQuantile);
  if (!p50 || !p10) return std::nullopt;
  const double rate = static_cast<double>(sends.count) / data.duration_seconds;  // sends/s
  const double mean_seconds = latency.sum / static_cast<double>(latency.count) / 1e9;
  const double in_flight = rate * mean_seconds;  // Little's law: L = lambda x W
  using doctor::Num;
  std::string note = "Little's law: " + Num(std::round(rate)) + " sends/s x " +
                     Num(mean_seconds * 1e6) + " us mean post-to-poll = " + Num(in_flight) +
                     " sends in flight on average. Post to poll p50 " + Num(*p50 / 1e3) +
                     " us, p10 " + Num(*p10 / 1e3) + " us";
  if (*p50 > 2 * *p10) {
    note +=
        ": most of the latency is waiting behind other sends in the send queue, not the "
        "round trip; queues.qp_depth takes the p10 as the round trip, so its depth does not "
        "follow the queue's";
  } else {
    note += ": little queueing; queues.qp_depth takes the p10 as the round trip";
  }
  return note + " (latency sampled by the preload library, in log2 buckets)";
}

}  // namespace rdmascope::profile
