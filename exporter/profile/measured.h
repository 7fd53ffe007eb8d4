// Which parts of a ProfileData were measured, for the writers: a figure of a source that was
// not active is "not measured" (null in profile.json, said so in the HTML), never a 0.
#pragma once

#include <algorithm>
#include <string_view>

#include "profile/profile_data.h"

namespace rdmascope::profile {

// Registrations, latencies, sizes, alignment, churn, flags: only the MR probes see calls.
inline bool MrCallsMeasured(const ProfileData& data) { return data.probes_active; }

// A call-derived MrSummary field the session could not measure even with the probes
// (MrSummary::unmeasured: "aligned_2mib", "churn_registrations"...).
inline bool MrFieldMeasured(const ProfileData& data, std::string_view field) {
  return MrCallsMeasured(data) && std::find(data.mr.unmeasured.begin(), data.mr.unmeasured.end(),
                                            field) == data.mr.unmeasured.end();
}

// Regions still registered: the probes, or restrack's view of them in --pid mode.
inline bool MrOutstandingMeasured(const ProfileData& data) {
  return data.probes_active || data.mr.from_restrack_only;
}

// Message sizes and completion latency come from the preload library only.
inline bool MessagesMeasured(const ProfileData& data) { return data.preload_active; }

}  // namespace rdmascope::profile
