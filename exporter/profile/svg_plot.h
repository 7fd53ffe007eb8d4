// A timeline as an inline SVG line plot: axes with ticks in the timeline's unit, the values as
// a polyline with a tooltip per point, and the limit (a CQ's capacity) as a dashed line.
#pragma once

#include <string>

#include "profile/profile_data.h"

namespace rdmascope::profile {

// An <svg> element; the caller has checked that the timeline has points.
std::string LinePlotSvg(const Timeline& timeline);

}  // namespace rdmascope::profile
