#include "collectors/link_events.h"

#include <linux/if.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "core/capture.h"
#include "core/log.h"

namespace rdmascope {

std::pair<std::string, std::string> DownReason(
    bool admin_up, const std::expected<sys::LinkStateReading, int>& reading) {
  // linkstate_prepare_data asks get_link_ext_state only `if (dev->flags & IFF_UP)`.
  if (!admin_up) return {"admin_down", ""};
  if (!reading || !reading->ext_state) return {"none", ""};
  const uint8_t state = *reading->ext_state;
  std::string substate;
  if (reading->ext_substate) {
    substate = std::string(sys::LinkExtSubstateName(state, *reading->ext_substate));
  }
  return {std::string(sys::LinkExtStateName(state)), substate};
}

std::string OperstateName(uint8_t operstate) {
  switch (operstate) {
    case IF_OPER_UNKNOWN:
      return "unknown";
    case IF_OPER_NOTPRESENT:
      return "notpresent";
    case IF_OPER_DOWN:
      return "down";
    case IF_OPER_LOWERLAYERDOWN:
      return "lowerlayerdown";
    case IF_OPER_TESTING:
      return "testing";
    case IF_OPER_DORMANT:
      return "dormant";
    case IF_OPER_UP:
      return "up";
    default:
      return "other";
  }
}

void LinkEventLog::Follow(const std::vector<std::string>& netdevs) {
  const std::lock_guard lock(mutex_);
  std::set<std::string> followed;
  for (const std::string& netdev : netdevs) {
    if (followed.size() >= kMaxEventPorts) break;
    followed.insert(netdev);
  }
  if (std::ranges::any_of(followed, [&](const auto& n) { return !followed_.contains(n); })) {
    dump_wanted_ = true;
  }
  followed_ = std::move(followed);
  std::erase_if(carrier_, [&](const auto& entry) { return !followed_.contains(entry.first); });
  std::erase_if(ports_, [&](const auto& entry) { return !followed_.contains(entry.first); });
}

bool LinkEventLog::Follows(const std::string& netdev) const {
  const std::lock_guard lock(mutex_);
  return followed_.contains(netdev);
}

std::vector<std::string> LinkEventLog::Followed() const {
  const std::lock_guard lock(mutex_);
  return {followed_.begin(), followed_.end()};
}

std::optional<bool> LinkEventLog::Observe(const sys::LinkNotice& notice) {
  const std::lock_guard lock(mutex_);
  if (!followed_.contains(notice.name)) {
    // Not ours; if it carries a followed interface's index, that one was renamed away: what
    // was known of it no longer says anything of the name.
    std::erase_if(carrier_,
                  [&](const auto& entry) { return entry.second.ifindex == notice.ifindex; });
    return std::nullopt;
  }
  if (notice.deleted) {
    carrier_.erase(notice.name);
    return std::nullopt;
  }
  seen_in_dump_.insert(notice.name);
  if (notice.carrier_changes) ports_[notice.name].carrier_changes = *notice.carrier_changes;
  const bool up = notice.up();
  const auto it = carrier_.find(notice.name);
  // First sight, or another interface now under the name (renamed in, recreated): no edge
  // was seen.
  if (it == carrier_.end() || it->second.ifindex != notice.ifindex) {
    carrier_[notice.name] = {notice.ifindex, up};
    return std::nullopt;
  }
  if (it->second.up == up) return std::nullopt;
  it->second.up = up;
  return !up;
}

void LinkEventLog::BeginDump() {
  const std::lock_guard lock(mutex_);
  seen_in_dump_.clear();
}

void LinkEventLog::DumpDone() {
  const std::lock_guard lock(mutex_);
  std::erase_if(carrier_, [&](const auto& entry) { return !seen_in_dump_.contains(entry.first); });
  seen_in_dump_.clear();
}

std::optional<bool> LinkEventLog::ObserveLink(const std::string& netdev, bool up) {
  const std::lock_guard lock(mutex_);
  if (!followed_.contains(netdev)) return std::nullopt;
  const auto it = carrier_.find(netdev);
  if (it == carrier_.end()) {
    carrier_[netdev] = {0, up};
    return std::nullopt;
  }
  if (it->second.up == up) return std::nullopt;
  it->second.up = up;
  return !up;
}

void LinkEventLog::Record(const std::string& netdev, LinkEvent event) {
  const std::lock_guard lock(mutex_);
  if (!followed_.contains(netdev)) return;
  PortEvents& port = ports_[netdev];
  if (event.down) {
    ++port.down_by_reason[{event.reason, event.substate}];
    if (event.reason != "admin_down") {
      // The driver was asked (the interface was up): whether it can say why.
      port.ext_state_available = event.reason != "none";
    }
  }
  port.recent.push_back(std::move(event));
  while (port.recent.size() > kEventsPerPort) port.recent.pop_front();
}

void LinkEventLog::NoteLinkState(const std::string& netdev, const sys::LinkStateReading& reading) {
  const std::lock_guard lock(mutex_);
  if (!followed_.contains(netdev)) return;
  if (reading.down_count) ports_[netdev].phy_down_count = *reading.down_count;
}

void LinkEventLog::NoteCarrierChanges(const std::string& netdev, uint64_t changes) {
  const std::lock_guard lock(mutex_);
  if (!followed_.contains(netdev)) return;
  ports_[netdev].carrier_changes = changes;
}

std::map<std::string, PortEvents> LinkEventLog::Snapshot() const {
  const std::lock_guard lock(mutex_);
  std::map<std::string, PortEvents> out = ports_;
  for (const auto& [netdev, carrier] : carrier_) out[netdev].carrier_up = carrier.up;
  return out;
}

LinkWatcher::LinkWatcher(LinkEventLog& log, LinkEventReads reads,
                         std::chrono::milliseconds phy_count_interval)
    : log_(log),
      reads_(std::move(reads)),
      phy_count_interval_(phy_count_interval),
      // Wakes the thread to stop: it sleeps in poll() until a notice, the next PHY count or
      // kIdleWake, not in 100 ms steps (an idle exporter's watcher costs nothing). Without one
      // (EMFILE), the thread polls every kStopCheck instead.
      wake_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  thread_ = std::thread([this] { Run(); });
}

LinkWatcher::~LinkWatcher() {
  stop_ = true;
  if (wake_fd_ >= 0) {
    const uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof one);
  }
  thread_.join();
  if (wake_fd_ >= 0) close(wake_fd_);
}

bool LinkWatcher::WaitReady(std::chrono::milliseconds timeout) const {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (!ready_.load()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

void LinkWatcher::Handle(LinkEventLog& log, const LinkEventReads& reads,
                         const std::vector<sys::LinkNotice>& notices,
                         std::chrono::steady_clock::time_point arrived) {
  for (const sys::LinkNotice& notice : notices) {
    if (notice.dump_done) {
      log.DumpDone();
      continue;
    }
    const auto edge = log.Observe(notice);
    if (!edge) continue;
    LinkEvent event;
    event.time = std::chrono::system_clock::now();
    event.down = *edge;
    if (notice.operstate) event.operstate = OperstateName(*notice.operstate);
    if (event.down) {
      // The extended state is readable only while the link is down: asked first, at once.
      const auto reading =
          reads.link_state ? reads.link_state(notice.name)
                           : std::expected<sys::LinkStateReading, int>(std::unexpected(EOPNOTSUPP));
      event.query_seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - arrived).count();
      std::tie(event.reason, event.substate) = DownReason((notice.flags & IFF_UP) != 0, reading);
      if (reading) {
        log.NoteLinkState(notice.name, *reading);
        event.phy_down_count = reading->down_count;
      } else if ((notice.flags & IFF_UP) != 0) {
        event.linkstate_error = capture::ErrnoName(reading.error());
      }
      if (reads.module) event.module = reads.module(notice.name);
      if (reads.fec) event.fec = reads.fec(notice.name);
    }
    log.Record(notice.name, std::move(event));
  }
}

void LinkWatcher::Run() {
  auto socket = sys::RtnetlinkLinks::Open();
  if (!socket) {
    log::Warn("link: no rtnetlink link notifications; link-down events are not followed",
              {{"error", capture::ErrnoName(socket.error())}});
    return;
  }
  bool dumping = true;
  bool dump_again = false;
  log_.BeginDump();
  socket->RequestDump();
  auto next_count = std::chrono::steady_clock::now() + phy_count_interval_;
  std::vector<sys::LinkNotice> notices;
  while (!stop_.load()) {
    if (!dumping && log_.TakeDumpWanted()) {
      log_.BeginDump();
      dumping = socket->RequestDump() == 0;
    } else if (dumping && log_.TakeDumpWanted()) {
      dump_again = true;  // asked again when the dump in flight ends
    }
    // Until a notice, the stop, the next PHY count, or kIdleWake: interfaces newly followed
    // (Follow, from the collector's refresh) are dumped within that.
    auto timeout = wake_fd_ >= 0 ? kIdleWake : kStopCheck;
    if (reads_.link_state && phy_count_interval_.count() > 0) {
      const auto until_count = std::chrono::ceil<std::chrono::milliseconds>(
          next_count - std::chrono::steady_clock::now());
      timeout = std::clamp(until_count, std::chrono::milliseconds(0), timeout);
    }
    pollfd fds[2] = {{.fd = socket->fd(), .events = POLLIN, .revents = 0},
                     {.fd = wake_fd_, .events = POLLIN, .revents = 0}};
    poll(fds, wake_fd_ >= 0 ? 2 : 1, static_cast<int>(timeout.count()));
    for (;;) {
      if (stop_.load()) return;
      notices.clear();
      const int error = socket->Receive(notices);
      const auto arrived = std::chrono::steady_clock::now();
      if (error == EAGAIN || error == EWOULDBLOCK) break;
      if (error == ENOBUFS || error == ENOSPC) {
        // Notifications were lost (ENOBUFS: the socket overflowed; ENOSPC: a message larger
        // than the receive buffer, cut by the kernel): a whole dump says where every link
        // stands (a dump in flight is asked again when it ends: one at a time per socket).
        log_.CountResync();
        if (dumping) {
          dump_again = true;
        } else {
          log_.BeginDump();
          dumping = socket->RequestDump() == 0;
        }
        continue;
      }
      if (error != 0 && notices.empty()) {
        log::Debug("link: an rtnetlink message was not read",
                   {{"error", capture::ErrnoName(error)}});
        continue;
      }
      Handle(log_, reads_, notices, arrived);
      if (std::ranges::any_of(notices, [](const auto& n) { return n.dump_done; })) {
        ready_ = true;
        dumping = false;
        if (dump_again) {
          dump_again = false;
          log_.BeginDump();
          dumping = socket->RequestDump() == 0;
        }
      }
    }
    // The PHY's own down count moves without a notice reaching us (a flap shorter than the
    // carrier's debounce): read again now and then.
    if (reads_.link_state && phy_count_interval_.count() > 0 &&
        std::chrono::steady_clock::now() >= next_count) {
      next_count = std::chrono::steady_clock::now() + phy_count_interval_;
      for (const std::string& netdev : log_.Followed()) {
        if (stop_.load()) return;
        if (const auto reading = reads_.link_state(netdev)) log_.NoteLinkState(netdev, *reading);
      }
    }
  }
}

}  // namespace rdmascope
