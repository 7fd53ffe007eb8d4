// rtnetlink link notifications (RTNLGRP_LINK): the kernel's RTM_NEWLINK on every change of an
// interface (carrier, flags, operstate, name: rtmsg_ifinfo() from netdev_state_change,
// linkwatch_do_dev, dev_change_name...) and RTM_DELLINK when one goes away; the same messages
// answer an RTM_GETLINK dump. A socket that fell behind gets ENOBUFS from recvmsg (the
// notifications since are lost): the caller then dumps every link again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <vector>

struct mnl_socket;

namespace rdmascope::sys {

// One interface as an RTM_NEWLINK or RTM_DELLINK (struct ifinfomsg + IFLA_* attributes) says.
struct LinkNotice {
  bool deleted = false;              // RTM_DELLINK
  int ifindex = 0;                   // ifi_index
  std::string name;                  // IFLA_IFNAME (empty when absent)
  uint32_t flags = 0;                // ifi_flags: IFF_UP, IFF_RUNNING, IFF_LOWER_UP (dev_get_flags)
  std::optional<uint8_t> carrier;    // IFLA_CARRIER: netif_carrier_ok (Linux 3.10)
  std::optional<uint8_t> operstate;  // IFLA_OPERSTATE: IF_OPER_* (RFC 2863)
  std::optional<uint32_t> carrier_changes;     // IFLA_CARRIER_CHANGES (Linux 4.0): up + down
  std::optional<uint32_t> carrier_down_count;  // IFLA_CARRIER_DOWN_COUNT (Linux 4.20)
  bool dump_done = false;                      // NLMSG_DONE of a dump (no interface)
  // Whether the link is up as `ip link` shows LOWER_UP on an UP interface: the kernel sets
  // IFF_LOWER_UP only while the device runs with its carrier on (dev_get_flags:
  // netif_running && netif_carrier_ok), so an interface set down is down here too.
  bool up() const;
};

// RTM_GETLINK with NLM_F_DUMP: every interface of the namespace.
size_t BuildLinkDumpRequest(uint32_t seq, std::vector<char>& buf);

// The RTM_NEWLINK / RTM_DELLINK messages (and a dump's NLMSG_DONE) of one receive buffer,
// appended to `out`; other message types are skipped. EBADMSG for bytes that are not whole
// netlink messages, or an attribute of the wrong size (what was read before it is kept).
// An NLMSG_ERROR gives its errno.
int ParseLinkMessages(const void* data, size_t len, std::vector<LinkNotice>& out);

// A socket subscribed to RTNLGRP_LINK.
class RtnetlinkLinks {
 public:
  static std::expected<RtnetlinkLinks, int> Open();
  RtnetlinkLinks(RtnetlinkLinks&& other) noexcept;
  RtnetlinkLinks(const RtnetlinkLinks&) = delete;
  RtnetlinkLinks& operator=(const RtnetlinkLinks&) = delete;
  RtnetlinkLinks& operator=(RtnetlinkLinks&&) = delete;
  ~RtnetlinkLinks();

  int fd() const;
  // Asks for a dump; its replies come through Receive like notifications.
  int RequestDump();
  // One receive buffer's notices, without blocking: 0, EAGAIN (nothing waiting), ENOBUFS
  // (notifications were lost: RequestDump), or another errno.
  int Receive(std::vector<LinkNotice>& out);

 private:
  explicit RtnetlinkLinks(mnl_socket* socket) : socket_(socket) {}
  mnl_socket* socket_ = nullptr;
  uint32_t seq_ = 1;
  std::vector<char> buffer_;
};

}  // namespace rdmascope::sys
