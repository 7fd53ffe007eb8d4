#include "collectors/capture_config.h"

#include <algorithm>
#include <array>

#include "core/log.h"

namespace rdmascope {
namespace {

constexpr std::array<UnreplayableSource, 5> kUnreplayable{{
    {"mr", "eBPF probes: the kernel's answers are not file, ioctl or netlink bytes", true},
    {"verbs", "eBPF probes: the kernel's answers are not file, ioctl or netlink bytes", true},
    {"occupancy", "the preload library's shared stats files are not recorded in format 1", true},
    {"workload: container runtime",
     "the CRI socket's gRPC answers are not recorded in format 1 (container names)", false},
    {"workload: kubelet PodResources",
     "the kubelet's gRPC answers are not recorded in format 1 (devices of pods)", false},
}};

}  // namespace

std::span<const UnreplayableSource> UnreplayableSources() { return kUnreplayable; }

std::vector<UnreplayableSource> ConfigureForCapture(CollectorsConfig& config,
                                                    std::string_view mode) {
  std::vector<UnreplayableSource> off;
  config.replayable_only = true;
  for (const UnreplayableSource& source : kUnreplayable) {
    const std::string collector(source.source.substr(0, source.source.find(':')));
    const auto enabled = config.collector_enabled.find(collector);
    if (enabled == config.collector_enabled.end() || !enabled->second) continue;
    if (source.whole_collector) enabled->second = false;
    log::Info(source.whole_collector ? "collector off under " + std::string(mode)
                                     : "source off under " + std::string(mode),
              {{"source", std::string(source.source)}, {"why", std::string(source.why)}});
    off.push_back(source);
  }
  // Each sample holds the settings it replays: none is served from an earlier reading.
  config.ethtool.refresh_interval = std::chrono::nanoseconds(0);
  // Each sample reads every module's pages, static ones too: no background thread, and a
  // replay reads what its sample holds.
  config.link.refresh_interval = std::chrono::nanoseconds(0);
  config.link.static_refresh_interval = std::chrono::nanoseconds(0);
  return off;
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
  ConfigureForCapture(config, "replay");
  KeepRecordedCollectors(config, recorded);
}

}  // namespace rdmascope
