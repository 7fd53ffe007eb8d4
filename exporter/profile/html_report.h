// The self-contained HTML report of `rdmascope profile`: one file with inline CSS and inline
// SVG (no script, no network: a Content-Security-Policy forbids both), readable offline and
// attachable to a ticket. Sections: summary, flame graphs of outstanding and registered bytes
// by call stack, the timelines (outstanding MR bytes, CQ occupancy against capacity, NIC
// throughput), queues, NIC counters, advice, notes.
#pragma once

#include <string>

#include "profile/profile_data.h"

namespace rdmascope::profile {

std::string HtmlReport(const ProfileData& data);

}  // namespace rdmascope::profile
