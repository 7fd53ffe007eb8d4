#include "collectors/link.h"

#include <algorithm>
#include <exception>
#include <utility>

#include "core/capture.h"
#include "core/log.h"
#include "sys/ethtool_netlink.h"

namespace rdmascope {

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

LinkCollector::LinkCollector(const LinkOptions& options, std::unique_ptr<LinkPortSource> ports,
                             ModuleReads::Read read, ModuleReads::Clock clock,
                             LinkEthtoolRead ethtool)
    : options_(options),
      port_source_(std::move(ports)),
      clock_(clock),
      reads_({options.refresh_interval, options.static_refresh_interval}, std::move(read),
             std::move(clock)),
      ethtool_read_(std::move(ethtool)) {
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
  return changed;
}

LinkSnapshot LinkCollector::SnapshotLocked() const { return {ports_, reads_.states(), fec_}; }

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
