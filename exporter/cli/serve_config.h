// Everything `rdmascope serve` is configured with, filled from flags (cli/serve_flags.h): the
// collectors' part (collectors/config.h), the web part (http/web_options.h) and what only the
// serving process itself uses. Each room takes its own part, never the whole.
#pragma once

#include <optional>

#include "collectors/config.h"
#include "core/capabilities.h"
#include "core/log.h"
#include "doctor/options.h"
#include "http/web_options.h"

namespace rdmascope {

struct ServeConfig : CollectorsConfig {
  WebOptions web;
  log::Level log_level = log::Level::kInfo;
  // --doctor.lookback: what /doctor judges counter rates over (docs/doctor.md, "History mode").
  double doctor_lookback_seconds = doctor::kDefaultLookbackSeconds;
  // --capabilities.keep: what `serve` keeps once the collectors are built. Unset: what the
  // enabled collectors need while serving (caps::ServingNeeds).
  std::optional<caps::CapabilitySet> capabilities_keep;
  // --[no-]capabilities.broker: CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH of the kept set go to
  // the capability broker (sys/capability_broker.h) rather than stay in the serving process.
  bool capability_broker = true;
  // --replay: a capture (docs/capture.md) every collector reads instead of the host.
  std::filesystem::path replay;
};

}  // namespace rdmascope
