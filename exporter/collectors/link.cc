#include "collectors/link.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <utility>

#include "collectors/debug_links.h"
#include "core/capture.h"
#include "core/log.h"
#include "core/sysfs.h"
#include "sys/ethtool_netlink.h"
#include "sys/module_eeprom_source.h"

namespace rdmascope {

std::chrono::system_clock::time_point LinkEventTime() {
  // Replaying: the event happened when the capture took the sample that shows it, not when
  // this replay reads it (the edge is between two samples; the later one saw it). An index
  // whose times do not read leaves the clock: the events' order is still right.
  if (const capture::Session* session = capture::Active(); session && session->replaying()) {
    if (const auto seconds = session->sample_seconds()) {
      return std::chrono::system_clock::time_point(
          std::chrono::milliseconds(static_cast<int64_t>(std::llround(*seconds * 1000))));
    }
  }
  return std::chrono::system_clock::now();
}

ModuleReads::Read SystemModuleRead() {
  // Shared by the copies of the function; used by one pass at a time (LinkCollector's lock).
  auto netlink = std::make_shared<std::optional<sys::EthtoolNetlink>>();
  return [netlink](std::string_view netdev, const sys::ModulePageKey& key, uint8_t offset,
                   uint8_t length) -> std::expected<std::string, int> {
    if (!netlink->has_value()) {
      auto opened = sys::EthtoolNetlink::Open();
      if (!opened) return std::unexpected(opened.error());
      netlink->emplace(std::move(*opened));
    }
    return (*netlink)->ReadModule(netdev, key, offset, length);
  };
}

LinkEventReads SystemLinkEventReads(const std::filesystem::path& sysfs) {
  LinkEventReads reads;
  auto linkstate = std::make_shared<std::optional<sys::EthtoolNetlink>>();
  reads.link_state =
      [linkstate](const std::string& netdev) -> std::expected<sys::LinkStateReading, int> {
    if (!linkstate->has_value()) {
      auto opened = sys::EthtoolNetlink::Open();
      if (!opened) return std::unexpected(opened.error());
      linkstate->emplace(std::move(*opened));
    }
    return (*linkstate)->ReadLinkState(netdev);
  };
  // The module at a down edge (live only: under capture the pass's own module read is used):
  // every page through the decoder, on the watcher's own socket.
  auto read = SystemModuleRead();
  reads.module = [read](const std::string& netdev) {
    sys::ModuleEepromSource source(
        netdev, [&](const sys::ModulePageKey& key, uint8_t offset, uint8_t length) {
          return read(netdev, key, offset, length);
        });
    ModuleState state;
    auto reading = sys::DecodeModule(source.Reader());
    if (reading.standard != sys::ModuleReading::Standard::kUnknown) {
      state.available = true;
      state.reading = std::move(reading);
    }
    ModuleAtEvent at = ModuleAtEventOf(state);
    if (!state.available) at.error = capture::ErrnoName(source.first_error());
    return at;
  };
  // The FEC counters at a down edge: one FEC and link-mode dump on the watcher's own socket
  // (a down edge is rare; the refresher's dumps are at the refresh interval).
  reads.fec = [ethtool = SystemLinkEthtoolRead()](const std::string& netdev) {
    return FecAtEvent(MakeLinkFecSnapshot(ethtool()), netdev);
  };
  reads.carrier_changes = [sysfs](const std::string& netdev) {
    return sysfs::ReadUnsigned(sysfs / "class" / "net" / netdev / "carrier_changes");
  };
  reads.admin_up = [sysfs](const std::string& netdev) -> std::optional<bool> {
    // class/net/X/flags: ifi_flags in hex (net/core/net-sysfs.c format_flags).
    const auto flags = sysfs::ReadUnsigned(sysfs / "class" / "net" / netdev / "flags");
    if (!flags) return std::nullopt;
    return (*flags & 0x1) != 0;  // IFF_UP
  };
  return reads;
}

ModuleAtEvent ModuleAtEventOf(const ModuleState& state) {
  ModuleAtEvent at;
  if (!state.available || !state.reading) {
    at.error = state.why.empty() ? "not read" : state.why;
    return at;
  }
  const sys::ModuleReading& r = *state.reading;
  if (r.cmis_module_state) at.state = CmisModuleStateName(*r.cmis_module_state);
  for (const sys::ModuleLane& lane : r.lanes) at.rx_power_watts.push_back(lane.rx_power_watts);
  return at;
}

LinkCollector::LinkCollector(const LinkOptions& options, std::unique_ptr<LinkPortSource> ports,
                             ModuleReads::Read read, ModuleReads::Clock clock,
                             LinkEthtoolRead ethtool, LinkEventReads events)
    : options_(options),
      port_source_(std::move(ports)),
      clock_(clock),
      reads_({options.refresh_interval, options.static_refresh_interval}, std::move(read),
             std::move(clock)),
      ethtool_read_(std::move(ethtool)),
      event_reads_(std::move(events)) {
  if (options_.refresh_interval.count() <= 0) return;
  // The refresher wakes up often enough to keep each module's slot within a tenth of the
  // interval (at most every second); a wake-up with nothing due costs a clock read.
  const auto tick = std::clamp(
      std::chrono::duration_cast<std::chrono::milliseconds>(options_.refresh_interval / 10),
      std::chrono::milliseconds(1), std::chrono::milliseconds(1000));
  refresh_ = std::make_unique<sys::BackgroundRefresh>(
      sys::BackgroundRefresh::Options{
          .refresh_interval = tick,
          .miss_interval = tick,
          .failed_message = "link: reading the ports failed; the last readings are kept",
          .recovered_message = "link: the ports read again",
          .endpoint = "ethtool netlink"},
      sys::BackgroundRefresh::Steps{.before = nullptr,
                                    .fetch =
                                        [this] {
                                          const std::lock_guard lock(read_mutex_);
                                          try {
                                            pending_changed_ = Pass();
                                            if (pending_changed_) pending_ = SnapshotLocked();
                                          } catch (const std::exception& e) {
                                            return std::string(e.what());
                                          }
                                          return std::string();
                                        },
                                    .after =
                                        [this](bool) {
                                          // Nothing changed: pending_ was not refilled, the
                                          // published snapshot stands.
                                          if (pending_changed_) published_ = std::move(pending_);
                                          pending_changed_ = false;
                                          published_once_ = true;
                                        }});
}

LinkCollector::~LinkCollector() {
  // The pass in flight ends after the module it reads now; then the thread is joined.
  stopping_ = true;
  refresh_.reset();
  watcher_.reset();
}

bool LinkCollector::Pass() const {
  const auto now = clock_();
  bool changed = false;
  if (!ports_read_ || options_.refresh_interval.count() <= 0 ||
      now - *ports_read_ >= options_.refresh_interval) {
    std::vector<LinkPort> ports = port_source_->Read();
    ports_read_ = now;
    if (ports != ports_ || !changed_once_) {
      ports_ = std::move(ports);
      changed_once_ = true;
      changed = true;
      std::vector<std::string> netdevs;
      for (const LinkPort& port : ports_) {
        if (port.netdev.empty() || port.native_ib || port.over_limit) continue;
        if (std::ranges::find(netdevs, port.netdev) == netdevs.end()) {
          netdevs.push_back(port.netdev);
        }
      }
      reads_.SetNetdevs(netdevs);
      if (event_reads_.link_state) events_.Follow(netdevs);
    }
  }
  changed |= reads_.Pass([this] { return stopping_.load(); }) > 0;
  // FEC and link modes of every interface: one dump each per refresh interval (cheap: the
  // kernel answers from the drivers' counters), every pass under capture and replay.
  if (ethtool_read_ && !stopping_ &&
      (!ethtool_read_at_ || options_.refresh_interval.count() <= 0 ||
       now - *ethtool_read_at_ >= options_.refresh_interval)) {
    LinkFecSnapshot fec = MakeLinkFecSnapshot(ethtool_read_());
    // A failed dump leaves every port's "fec" source 0: say why once, when it changes.
    if (fec.fec_error != 0 && fec.fec_error != fec_.fec_error) {
      log::Warn("link: the FEC dump failed; rdma_link_source_available{source=\"fec\"} is 0",
                {{"error", capture::ErrnoName(fec.fec_error)}});
    }
    if (fec.modes_error != 0 && fec.modes_error != fec_.modes_error) {
      log::Warn("link: the link-modes dump failed",
                {{"error", capture::ErrnoName(fec.modes_error)}});
    }
    fec_ = std::move(fec);
    ethtool_read_at_ = now;
    changed = true;
  }
  if (event_reads_.link_state && options_.refresh_interval.count() <= 0) PollLinkStates();
  // The watcher's events since: a scrape shows them at the next pass (a tenth of the interval).
  const bool live_events = event_reads_.link_state && options_.refresh_interval.count() > 0;
  if (live_events && events_.Snapshot() != published_events_) changed = true;
  return changed;
}

void LinkCollector::PollLinkStates() const {
  const auto& modules = reads_.states();
  for (const std::string& netdev : events_.Followed()) {
    if (event_reads_.carrier_changes) {
      if (const auto changes = event_reads_.carrier_changes(netdev)) {
        events_.NoteCarrierChanges(netdev, *changes);
      }
    }
    const auto reading = event_reads_.link_state(netdev);
    if (!reading) continue;  // EOPNOTSUPP, ENODEV: no carrier seen, no edge
    events_.NoteLinkState(netdev, *reading);
    if (!reading->link) continue;
    const auto edge = events_.ObserveLink(netdev, *reading->link);
    if (!edge) continue;
    LinkEvent event;
    event.time = LinkEventTime();
    event.down = *edge;
    if (event.down) {
      const std::optional<bool> admin_up =
          event_reads_.admin_up ? event_reads_.admin_up(netdev) : std::nullopt;
      std::tie(event.reason, event.substate) = DownReason(admin_up.value_or(true), reading);
      event.phy_down_count = reading->down_count;
      // The module as this pass read it, at the same sample.
      if (const auto it = modules.find(netdev); it != modules.end()) {
        event.module = ModuleAtEventOf(it->second);
      }
      // The FEC counters as this pass read them, at the same sample.
      event.fec = FecAtEvent(fec_, netdev);
    }
    events_.Record(netdev, std::move(event));
  }
}

LinkSnapshot LinkCollector::SnapshotLocked() const {
  LinkSnapshot snapshot{ports_, reads_.states(), fec_, events_.Snapshot()};
  if (event_reads_.link_state && options_.refresh_interval.count() > 0) {
    snapshot.resyncs = events_.resyncs();
  }
  published_events_ = snapshot.events;
  return snapshot;
}

void LinkCollector::StartWatcherLocked() const {
  // At the first scrape, as the refresher: no thread may run before the process drops its
  // capabilities (they are per thread). The PHY's down count is read again at the module
  // interval.
  if (watcher_ != nullptr || !event_reads_.link_state) return;
  watcher_ = std::make_unique<LinkWatcher>(
      events_, event_reads_,
      std::chrono::duration_cast<std::chrono::milliseconds>(options_.refresh_interval));
}

bool LinkCollector::WaitForWatcher(std::chrono::milliseconds timeout) const {
  return watcher_ == nullptr || watcher_->WaitReady(timeout);
}

void LinkCollector::AddDebugRoutes(DebugRoutes& routes) {
  if (!event_reads_.link_state) return;
  // What the last scrape would show (the published snapshot, or a pass now at interval 0).
  const auto snapshot = [this] {
    if (refresh_ == nullptr) {
      const std::lock_guard lock(read_mutex_);
      return LinkSnapshot{ports_, {}, {}, events_.Snapshot(), std::nullopt};
    }
    return LinkSnapshot{[this] {
                          const auto lock = refresh_->Lock();
                          return published_.ports;
                        }(),
                        {},
                        {},
                        events_.Snapshot(),
                        events_.resyncs()};
  };
  routes["/debug/links"] = [snapshot](std::string_view) { return LinkEventsJson(snapshot()); };
  routes["/debug/links.html"] = [snapshot](std::string_view) { return LinkEventsHtml(snapshot()); };
}

bool LinkCollector::WaitForPasses(uint64_t passes, std::chrono::milliseconds timeout) const {
  return refresh_ == nullptr || refresh_->WaitForAttempts(passes, timeout);
}

CollectResult LinkCollector::Collect(MetricSet& out) const {
  LinkSnapshot snapshot;
  if (refresh_ == nullptr) {
    const std::lock_guard lock(read_mutex_);
    Pass();
    snapshot = SnapshotLocked();
  } else {
    const auto lock = refresh_->Lock();
    refresh_->StartLocked();
    StartWatcherLocked();
    if (!published_once_) {
      return {.no_data = true, .detail = "the modules' first reading is under way"};
    }
    snapshot = published_;
  }
  MapLinks(snapshot, out);
  if (snapshot.ports.empty()) {
    return {.no_data = true, .detail = "no RDMA port and no physical network interface"};
  }
  size_t available = 0;
  for (const auto& [netdev, state] : snapshot.modules) available += state.available ? 1 : 0;
  return {.detail = std::to_string(snapshot.ports.size()) + " ports, " + std::to_string(available) +
                    " modules read"};
}

}  // namespace rdmascope
