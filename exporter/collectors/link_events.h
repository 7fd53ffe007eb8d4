// Why a link went down (issue 40, link-down reasons): each followed interface's carrier, its
// down and up edges, and on each down edge what the kernel and the module said at that
// moment: the driver's extended link state (ETHTOOL_MSG_LINKSTATE_GET,
// sys/ethtool_linkstate.h), the module's state and RX power per lane, FEC (hook). Kept per
// interface: a ring of the last kEventsPerPort events (/debug/links), down edges counted by
// reason and substate, the PHY's own down count and the kernel's carrier changes.
//
// Two ways in, one log:
// - live (refresh interval > 0): LinkWatcher's thread reads rtnetlink notifications
//   (sys/rtnetlink_links.h) and asks LINKSTATE the moment a carrier-down edge arrives;
// - capture and replay (interval 0): every collection asks LINKSTATE of every interface
//   (recorded, replayed) and an edge is a change of its `link` between collections.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <expected>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "sys/ethtool_linkstate.h"
#include "sys/rtnetlink_links.h"

namespace rdmascope {

// Bounds: events kept per interface, interfaces followed (the link collector's
// --collector.link.max-netdevs bounds them first).
constexpr size_t kEventsPerPort = 16;
constexpr size_t kMaxEventPorts = 64;

// What the module said at a down edge (the link collector's module reader, dynamic pages).
struct ModuleAtEvent {
  std::string state;                                  // CMIS module state named; "" for SFF modules
  std::vector<std::optional<double>> rx_power_watts;  // per lane, from lane 1
  std::string error;                                  // why it was not read ("EIO": no module)
  bool operator==(const ModuleAtEvent&) const = default;
};

struct LinkEvent {
  std::chrono::system_clock::time_point time;
  bool down = false;
  // Down edges: the kernel's extended state named (sys::LinkExtStateName), "none" when the
  // reply held none (a driver without get_link_ext_state: veth, rxe; or the query failed:
  // linkstate_error), "admin_down" when the interface itself was set down (the kernel does
  // not ask the driver then). "" on up edges.
  std::string reason;
  std::string substate;         // named within the reason's enum; "" when none was sent
  std::string operstate;        // IF_OPER_* named, when the notice said it
  std::string linkstate_error;  // the LINKSTATE query's errno name, when it failed
  std::optional<uint32_t> phy_down_count;
  std::optional<ModuleAtEvent> module;
  std::string fec;  // the FEC totals then (collectors/link_fec.h FecAtEvent), "" when none
  // From the notice's arrival to the LINKSTATE answer (live only).
  std::optional<double> query_seconds;
  bool operator==(const LinkEvent&) const = default;
};

// Per interface: what the series and /debug/links show.
struct PortEvents {
  std::deque<LinkEvent> recent;  // oldest first, at most kEventsPerPort
  std::map<std::pair<std::string, std::string>, uint64_t> down_by_reason;  // (reason, substate)
  std::optional<uint32_t> phy_down_count;   // the last ETHTOOL_A_LINKSTATE_EXT_DOWN_CNT
  std::optional<uint64_t> carrier_changes;  // IFLA_CARRIER_CHANGES / sysfs carrier_changes
  // source="link_ext_state": known once a down interface (admin up) was asked: 1 if the
  // reply held the extended state, 0 if not.
  std::optional<bool> ext_state_available;
  std::optional<bool> carrier_up;  // as last seen (Snapshot), none before the first notice
  bool operator==(const PortEvents&) const = default;
};

// The reason and substate labels of a down edge.
std::pair<std::string, std::string> DownReason(bool admin_up,
                                               const std::expected<sys::LinkStateReading, int>& r);
// IF_OPER_* (include/uapi/linux/if.h) named as `ip link` prints them, lower case.
std::string OperstateName(uint8_t operstate);

// The events of every followed interface; thread-safe, bounded.
class LinkEventLog {
 public:
  // The interfaces to follow (at most kMaxEventPorts); the others' state is dropped.
  // Newly followed interfaces want a dump (their carrier is not known until a notice).
  void Follow(const std::vector<std::string>& netdevs);
  bool TakeDumpWanted() { return dump_wanted_.exchange(false); }
  bool Follows(const std::string& netdev) const;
  std::vector<std::string> Followed() const;

  // A notice: the edge it makes (true: down, false: up), or nullopt (first sight, no change,
  // an interface not followed, renamed away, deleted). Remembers the carrier changes.
  std::optional<bool> Observe(const sys::LinkNotice& notice);
  // A dump asked (after ENOBUFS) and ended: the interfaces it did not list are gone
  // (deleted while notices were lost), their carrier forgotten.
  void BeginDump();
  void DumpDone();
  // Capture and replay: the `link` of a LINKSTATE reply as the carrier; the edge it makes.
  std::optional<bool> ObserveLink(const std::string& netdev, bool up);

  // An edge's event (a down edge counted under its reason).
  void Record(const std::string& netdev, LinkEvent event);
  // What a LINKSTATE answer says besides an edge: the PHY's down count.
  void NoteLinkState(const std::string& netdev, const sys::LinkStateReading& reading);
  void NoteCarrierChanges(const std::string& netdev, uint64_t changes);

  std::map<std::string, PortEvents> Snapshot() const;
  uint64_t resyncs() const { return resyncs_.load(); }
  void CountResync() { ++resyncs_; }

 private:
  struct Carrier {
    int ifindex = 0;
    bool up = false;
  };
  mutable std::mutex mutex_;
  std::set<std::string> followed_;
  std::map<std::string, Carrier> carrier_;  // by netdev, followed only
  std::set<std::string> seen_in_dump_;
  std::map<std::string, PortEvents> ports_;  // followed only
  std::atomic<uint64_t> resyncs_{0};
  std::atomic<bool> dump_wanted_{false};
};

// The live reads a down edge takes, each on the watcher's thread: LINKSTATE of one interface,
// its module's pages now, its FEC totals (collectors/link_fec.h FecAtEvent).
struct LinkEventReads {
  std::function<std::expected<sys::LinkStateReading, int>(const std::string&)> link_state;
  std::function<ModuleAtEvent(const std::string&)> module;
  std::function<std::string(const std::string&)> fec;
  // Capture and replay (interval 0) only: the software carrier changes
  // (class/net/X/carrier_changes) and whether the interface is administratively up
  // (class/net/X/flags), read through core/sysfs so they are recorded and replayed.
  std::function<std::optional<uint64_t>(const std::string&)> carrier_changes;
  std::function<std::optional<bool>(const std::string&)> admin_up;
};

// The live watcher: its own thread on an RTNLGRP_LINK socket. Why a thread of its own rather
// than the module refresher's: a down edge must be asked within 100 ms, and the refresher may
// be in the middle of a module pass of seconds (64 modules, I2C timeouts). The thread holds
// the log's lock only to update it, never across a read: a storm of notices costs the scrape
// nothing but copies of a bounded log.
class LinkWatcher {
 public:
  LinkWatcher(LinkEventLog& log, LinkEventReads reads,
              std::chrono::milliseconds phy_count_interval);
  ~LinkWatcher();
  LinkWatcher(const LinkWatcher&) = delete;
  LinkWatcher& operator=(const LinkWatcher&) = delete;
  // Whether the socket opened and the first dump was read (tests, host tests).
  bool WaitReady(std::chrono::milliseconds timeout) const;
  // Handles one batch of notices as the thread does (unit tests drive this directly).
  static void Handle(LinkEventLog& log, const LinkEventReads& reads,
                     const std::vector<sys::LinkNotice>& notices,
                     std::chrono::steady_clock::time_point arrived);

 private:
  void Run();
  LinkEventLog& log_;
  LinkEventReads reads_;
  std::chrono::milliseconds phy_count_interval_;
  // The longest the thread sleeps with nothing to do; without an eventfd to wake it, how
  // long the destructor may wait.
  static constexpr std::chrono::milliseconds kIdleWake{1000};
  static constexpr std::chrono::milliseconds kStopCheck{100};
  std::atomic<bool> stop_{false};
  std::atomic<bool> ready_{false};
  int wake_fd_ = -1;
  std::thread thread_;
};

}  // namespace rdmascope
