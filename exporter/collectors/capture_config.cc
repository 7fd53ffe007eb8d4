#include "collectors/capture_config.h"

#include <algorithm>

#include "core/log.h"

namespace rdmascope {
void ConfigureForCapture(CollectorsConfig& config) {
  // Each sample holds the settings it replays: none is served from an earlier reading.
  config.ethtool.refresh_interval = std::chrono::nanoseconds(0);
  // Likewise the container runtime's and the kubelet's answers: asked at each collection, on
  // its thread (sys/background_refresh.h, interval 0), so each sample records its own.
  config.workload.cri_refresh_interval = std::chrono::milliseconds(0);
  config.workload_kubelet.refresh_interval = std::chrono::milliseconds(0);
  // The occupancy collector's walks of /proc for other pid namespaces happen when a pid is not
  // known, at most once per interval: a replay's scrapes come at other times than the
  // capture's samples, so under both a walk is made whenever one is wanted, alike.
  config.occupancy.pid_walk_interval = std::chrono::milliseconds(0);
  // Likewise the mr collector's scan for uverbs holders (collectors/probe_capture.h): each
  // sample holds the holders it replays, whenever its scrape comes.
  config.mr.pinned_rescan_seconds = 0;
  // Each sample reads every module's pages, static ones too: no background thread, and a
  // replay reads what its sample holds.
  config.link.refresh_interval = std::chrono::nanoseconds(0);
  config.link.static_refresh_interval = std::chrono::nanoseconds(0);
}

void KeepRecordedCollectors(CollectorsConfig& config, const std::vector<std::string>& recorded) {
  if (recorded.empty()) return;
  for (auto& [name, enabled] : config.collector_enabled) {
    if (!enabled || std::ranges::find(recorded, name) != recorded.end()) continue;
    enabled = false;
    log::Info("collector off under replay", {{"source", name},
                                             {"why", "the capture did not record it (--collector." +
                                                         name + " was off when it was taken)"}});
  }
}

void ConfigureForReplay(CollectorsConfig& config, const std::vector<std::string>& recorded) {
  ConfigureForCapture(config);
  KeepRecordedCollectors(config, recorded);
}

}  // namespace rdmascope
