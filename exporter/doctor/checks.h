// The table of doctor checks. Each check is a pure function of snapshots: `now`, and `before`
// (the collection one --window earlier; null with --window 0s) for the counter-based ones.
// docs/doctor.md documents every id, threshold and source metric.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "doctor/finding.h"
#include "doctor/options.h"
#include "doctor/samples.h"

namespace rdmascope::doctor {

using CheckFn = std::vector<Finding> (*)(const Snapshot& now, const Snapshot* before,
                                         const DoctorOptions& options);

struct Check {
  std::string_view id;
  std::string_view area;
  // Collectors whose series the check reads: when one is disabled or failed, the check is
  // reported as skip with that reason instead of reading absent series as "healthy".
  std::span<const std::string_view> needs;
  std::string_view runbook;  // the anchor of its skip findings too
  CheckFn run;
};

// links: checks_links.cc
std::vector<Finding> CheckPortState(const Snapshot&, const Snapshot*, const DoctorOptions&);
std::vector<Finding> CheckActiveMtu(const Snapshot&, const Snapshot*, const DoctorOptions&);
std::vector<Finding> CheckCrcErrors(const Snapshot&, const Snapshot*, const DoctorOptions&);
std::vector<Finding> CheckSymbolErrors(const Snapshot&, const Snapshot*, const DoctorOptions&);
std::vector<Finding> CheckLinkDowned(const Snapshot&, const Snapshot*, const DoctorOptions&);
std::vector<Finding> CheckIbaErrors(const Snapshot&, const Snapshot*, const DoctorOptions&);
std::vector<Finding> CheckSaturated(const Snapshot&, const Snapshot*, const DoctorOptions&);
std::vector<Finding> CheckRetransmissions(const Snapshot&, const Snapshot*, const DoctorOptions&);
// links, FEC and speed (issue 40): checks_link_fec.cc
std::vector<Finding> CheckFecPreBer(const Snapshot&, const Snapshot*, const DoctorOptions&);
std::vector<Finding> CheckFecUncorrectable(const Snapshot&, const Snapshot*, const DoctorOptions&);
std::vector<Finding> CheckLinkSpeed(const Snapshot&, const Snapshot*, const DoctorOptions&);
// links: checks_link_down.cc
std::vector<Finding> CheckLinkFlapping(const Snapshot&, const Snapshot*, const DoctorOptions&);
// roce: checks_roce.cc
std::vector<Finding> CheckNetdevMtu(const Snapshot&, const Snapshot*, const DoctorOptions&);
std::vector<Finding> CheckPfc(const Snapshot&, const Snapshot*, const DoctorOptions&);
std::vector<Finding> CheckGlobalPause(const Snapshot&, const Snapshot*, const DoctorOptions&);
std::vector<Finding> CheckPauseStorm(const Snapshot&, const Snapshot*, const DoctorOptions&);
std::vector<Finding> CheckCoalescing(const Snapshot&, const Snapshot*, const DoctorOptions&);
// queues: checks_queues.cc
std::vector<Finding> CheckCqCapacity(const Snapshot&, const Snapshot*, const DoctorOptions&);
std::vector<Finding> CheckSrqLimit(const Snapshot&, const Snapshot*, const DoctorOptions&);
std::vector<Finding> CheckReceiveStarvation(const Snapshot&, const Snapshot*, const DoctorOptions&);
std::vector<Finding> CheckPeerReceiveStarvation(const Snapshot&, const Snapshot*,
                                                const DoctorOptions&);
// memory: checks_memory.cc
std::vector<Finding> CheckMrPageMultiple(const Snapshot&, const Snapshot*, const DoctorOptions&);
std::vector<Finding> CheckMrHugepage(const Snapshot&, const Snapshot*, const DoctorOptions&);
std::vector<Finding> CheckPinnedVsMemlock(const Snapshot&, const Snapshot*, const DoctorOptions&);
std::vector<Finding> CheckMrLeak(const Snapshot&, const Snapshot*, const DoctorOptions&);
std::vector<Finding> CheckPinnedGrowth(const Snapshot&, const Snapshot*, const DoctorOptions&);
// host: checks_host.cc
std::vector<Finding> CheckNumaPlacement(const Snapshot&, const Snapshot*, const DoctorOptions&);
std::vector<Finding> CheckCollectors(const Snapshot&, const Snapshot*, const DoctorOptions&);
std::vector<Finding> CheckProbes(const Snapshot&, const Snapshot*, const DoctorOptions&);

// Every check, in report order (areas: links, roce, queues, memory, host).
std::span<const Check> AllChecks();

// Runs every check; a check whose collectors are unavailable gives one skip with the reason.
std::vector<Finding> RunChecks(const Snapshot& now, const Snapshot* before,
                               const DoctorOptions& options);

}  // namespace rdmascope::doctor
