// The link collector (issue 40), first slice: each port's pluggable module (SFP, QSFP,
// QSFP-DD, OSFP) read through ethtool netlink's MODULE_EEPROM_GET, decoded per lane against
// the module's own thresholds, with identity, CMIS state, and whether the source is there at
// all (rdma_link_source_available): a port without it has no series, never a 0 that reads as
// healthy. A background thread reads the modules (collectors/link_modules.h, on
// collectors/link_schedule.h's staggered slots); a scrape serves the last readings and never
// waits for a module. FEC and link modes: collectors/link_fec.h (one dump each per interval);
// link-down reasons and IB counters are the next slices.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "collectors/link_events.h"
#include "collectors/link_fec.h"
#include "collectors/link_modules.h"
#include "collectors/link_ports.h"
#include "core/collector.h"
#include "sys/background_refresh.h"

namespace rdmascope {

struct LinkOptions {
  // --collector.link.refresh-interval: how often each module's dynamic pages (temperature,
  // supply, lanes, CMIS state) are read, staggered across modules; 0 reads every module at
  // every scrape (capture and replay: each sample holds the pages it replays).
  std::chrono::nanoseconds refresh_interval = std::chrono::seconds(30);
  // --collector.link.static-refresh-interval: identity, thresholds and advertisements.
  std::chrono::nanoseconds static_refresh_interval = std::chrono::hours(1);
  // --collector.link.max-netdevs: interfaces whose modules are read at most.
  size_t max_netdevs = 64;
};

// What a scrape maps: the ports, and the module state of each interface read.
struct LinkSnapshot {
  std::vector<LinkPort> ports;
  std::map<std::string, ModuleState> modules;  // by netdev
  LinkFecSnapshot fec;                         // FEC and link modes (collectors/link_fec.h)
  std::map<std::string, PortEvents> events;    // by netdev (collectors/link_events.h)
  std::optional<uint64_t> resyncs;             // the live watcher's ENOBUFS re-dumps
};

// rdma_link_source_available's help, one text for every source (link_metrics.cc, the ports'
// sources; link_events_metrics.cc, link_ext_state).
inline constexpr std::string_view kLinkSourceAvailableHelp =
    "1 when the port's link source answers (source=\"module\": a module's management pages "
    "were read and decoded; \"fec\": the driver reports FEC counters; \"fec_hist\": the FEC "
    "histogram; \"linkmodes\": speed and link modes; \"ib_counters\": the InfiniBand port's "
    "PMA counters; \"link_ext_state\": the driver said why the link was down at its last down "
    "edge), 0 when it does not (no module, no module access through ethtool: rxe, veth, native "
    "InfiniBand; CAP_NET_ADMIN missing; a driver or kernel without FEC statistics or "
    "get_link_ext_state): its series are then absent.";

// Snapshot -> rdma_link_* series (collectors/link_metrics.cc). Exposed for tests.
void MapLinks(const LinkSnapshot& snapshot, MetricSet& out);
// The link-down series of the snapshot's events (collectors/link_events_metrics.cc).
void MapLinkEvents(const LinkSnapshot& snapshot, MetricSet& out);

// The host's module reads: ethtool netlink, its socket opened at the first read and kept (the
// refresher's thread only, or a capture's collection); never opened while a capture is
// replayed, which answers every read.
ModuleReads::Read SystemModuleRead();

// The host's reads for link-down events (collectors/link_events.h): LINKSTATE through its own
// ethtool netlink socket, the module's pages through another, the interface's carrier_changes
// and flags from sysfs (capture and replay); each function used by one thread only.
LinkEventReads SystemLinkEventReads(const std::filesystem::path& sysfs);

// When a link event seen now happened: the clock, live and under capture; under replay the
// replayed sample's time from the capture's index.json (an edge between samples 1 and 2 is
// sample 2's time on /debug/links, whenever the replay runs).
std::chrono::system_clock::time_point LinkEventTime();

// CMIS module state named ("ready", "fault"...), as rdma_link_module_state_info labels it.
const char* CmisModuleStateName(uint8_t state);
// What /debug/links shows of a module read: the state and the RX power per lane.
ModuleAtEvent ModuleAtEventOf(const ModuleState& state);
class LinkCollector : public Collector {
 public:
  // `ethtool`: the FEC and link-mode dumps, once per refresh interval (none: not read).
  // `events`: the link-down reads (none: no link-down events are followed). Live (refresh
  // interval > 0) a LinkWatcher thread follows rtnetlink; with interval 0 each pass asks
  // LINKSTATE of every interface.
  LinkCollector(const LinkOptions& options, std::unique_ptr<LinkPortSource> ports,
                ModuleReads::Read read, ModuleReads::Clock clock = std::chrono::steady_clock::now,
                LinkEthtoolRead ethtool = nullptr, LinkEventReads events = {});
  ~LinkCollector() override;
  CollectResult Collect(MetricSet& out) const override;
  // /debug/links (JSON) and /debug/links.html (collectors/debug_links.h).
  void AddDebugRoutes(DebugRoutes& routes) override;
  // The link-down watcher read its first dump (tests, host tests); true without a watcher.
  bool WaitForWatcher(std::chrono::milliseconds timeout) const;

  // Waits until the refresher made `passes` passes in all (tests).
  bool WaitForPasses(uint64_t passes, std::chrono::milliseconds timeout) const;

 private:
  // One pass (with read_mutex_ held): the ports again when due, then the modules due.
  // Returns whether anything a scrape shows changed.
  bool Pass() const;
  LinkSnapshot SnapshotLocked() const;
  // Interval 0: LINKSTATE of every followed interface, edges between passes.
  void PollLinkStates() const;
  // Live: the watcher's thread, started once (under refresh_->Lock()).
  void StartWatcherLocked() const;

  const LinkOptions options_;
  const std::unique_ptr<LinkPortSource> port_source_;
  const ModuleReads::Clock clock_;
  mutable std::mutex read_mutex_;  // the reading state below: one pass at a time
  mutable ModuleReads reads_;
  mutable std::vector<LinkPort> ports_;
  mutable std::optional<std::chrono::steady_clock::time_point> ports_read_;
  mutable bool changed_once_ = false;   // the first port reading is a change, even if empty
  const LinkEthtoolRead ethtool_read_;  // FEC and link modes: one dump each per interval
  mutable std::optional<std::chrono::steady_clock::time_point> ethtool_read_at_;
  mutable LinkFecSnapshot fec_;
  // Background mode (refresh_interval > 0): the last pass's snapshot, under refresh_->Lock().
  mutable LinkSnapshot pending_;  // the refresher's, between fetch and after
  mutable bool pending_changed_ = false;
  mutable LinkSnapshot published_;
  mutable bool published_once_ = false;
  std::atomic<bool> stopping_{false};
  mutable std::unique_ptr<sys::BackgroundRefresh> refresh_;
  // Link-down events: the log (its own lock), the reads, the live watcher.
  mutable LinkEventLog events_;
  const LinkEventReads event_reads_;
  mutable std::map<std::string, PortEvents> published_events_;  // under read_mutex_
  mutable std::unique_ptr<LinkWatcher> watcher_;                // started by the first scrape
};

}  // namespace rdmascope
