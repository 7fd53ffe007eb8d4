// ETHTOOL_MSG_LINKSTATE_GET (net/ethtool/linkstate.c): whether the link is up and, while it is
// down, why, as the driver's get_link_ext_state() says (ETHTOOL_A_LINKSTATE_EXT_STATE and
// _EXT_SUBSTATE, the enums of include/uapi/linux/ethtool.h), with the PHY's own count of link
// down events (ETHTOOL_A_LINKSTATE_EXT_DOWN_CNT, Linux 6.2, sent only when the request's header
// asks ETHTOOL_FLAG_STATS and the driver has get_link_ext_stats: mlx5's PPCNT
// link_down_events). The kernel asks the driver for the extended state only while the
// interface is administratively up (`dev->flags & IFF_UP`), and a driver without
// get_link_ext_state (veth, rxe's netdevs, virtio) or one that answers -ENODATA (mlx5 with the
// link up) gives a reply without the attribute: "no reason" is an absent attribute, never 0
// (0 is ETHTOOL_LINK_EXT_STATE_AUTONEG).
#pragma once

#include <cstddef>
#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rdmascope::sys {

// What one LINKSTATE_GET reply holds; each field absent when the kernel did not send it.
struct LinkStateReading {
  std::optional<bool> link;             // ETHTOOL_A_LINKSTATE_LINK (__ethtool_get_link)
  std::optional<uint8_t> ext_state;     // enum ethtool_link_ext_state
  std::optional<uint8_t> ext_substate;  // the state's substate enum (never 0: not sent then)
  std::optional<uint32_t> down_count;   // ETHTOOL_A_LINKSTATE_EXT_DOWN_CNT
  auto operator<=>(const LinkStateReading&) const = default;
};

// The request for `ifname`, its header asking for statistics when `stats` (a kernel before
// 6.2 refuses ETHTOOL_FLAG_STATS on this message with EINVAL: its header policy is
// ethnl_header_policy, not ethnl_header_policy_stats). 0 for a name that is no interface name.
size_t BuildLinkStateRequest(uint16_t family, std::string_view ifname, bool stats, uint32_t seq,
                             std::vector<char>& buf);

// The reply: its errno for an NLMSG_ERROR (ENODEV: the interface went away), EBADMSG for bytes
// that are not whole netlink messages or an attribute of the wrong size.
std::expected<LinkStateReading, int> ParseLinkStateReply(const void* data, size_t len);

// "no_cable" for ETHTOOL_LINK_EXT_STATE_NO_CABLE...; "unknown" for a number the enum (as of
// Linux 6.18) does not hold. Bounded label values.
std::string_view LinkExtStateName(uint8_t state);
// The substate's name within its state's enum ("kr_frame_lock_not_acquired" for
// LINK_TRAINING_FAILURE 1); "unknown" for a number that enum does not hold, or a state
// without substates.
std::string_view LinkExtSubstateName(uint8_t state, uint8_t substate);

}  // namespace rdmascope::sys
