// Link health checks (issue 40): the optics of each module against its own thresholds (else the
// defaults), and InfiniBand links' post-FEC symbol BER and trained width and speed. The same
// figures as the rdmascope.link alerts (rules/rdmascope.rules.yml), on one snapshot.
#pragma once

#include <vector>

#include "doctor/finding.h"
#include "doctor/options.h"
#include "doctor/samples.h"

namespace rdmascope::doctor {

// The rules' defaults for a module whose threshold table is not valid (or absent).
inline constexpr double kDefaultRxLowWarningDbm = -7;
inline constexpr double kDefaultRxLowAlarmDbm = -11;
inline constexpr double kDefaultTemperatureHighWarning = 70;
inline constexpr double kDefaultTemperatureHighAlarm = 80;
// Under 1 uW (-30 dBm) a receiver has no light: 0 W or its noise floor.
inline constexpr double kNoLightWatts = 1e-6;
// UFM's BER validation (2.88 errors in 12 minutes at NDR 4X, 400 Gb/s: docs/runbook.md).
inline constexpr double kPostFecBerThreshold = 1e-14;
// Lanes of 50 Gb/s and more (HDR, NDR, XDR): symbol_error counts errors after FEC.
inline constexpr double kPostFecLaneBitsPerSecond = 50e9;

// checks_link_optics.cc: a finding per lane (RX power) or per module (temperature, state).
std::vector<Finding> CheckOpticsRxPower(const Snapshot&, const Snapshot*, const DoctorOptions&);
std::vector<Finding> CheckOpticsTemperature(const Snapshot&, const Snapshot*, const DoctorOptions&);
std::vector<Finding> CheckOpticsModuleState(const Snapshot&, const Snapshot*, const DoctorOptions&);
// checks_link_ib.cc: a finding per InfiniBand port.
std::vector<Finding> CheckIbSymbolBer(const Snapshot&, const Snapshot*, const DoctorOptions&);
std::vector<Finding> CheckIbLinkDegraded(const Snapshot&, const Snapshot*, const DoctorOptions&);

}  // namespace rdmascope::doctor
