// Link modes of every interface in one ethtool netlink dump (issue 40: line bit rate for
// pre-FEC BER, degraded links): ETHTOOL_MSG_LINKMODES_GET (Linux 5.6; ETHTOOL_A_LINKMODES_LANES
// since 5.13), as net/ethtool/linkmodes.c builds the reply: AUTONEG (u8), OURS (a bitset:
// value = advertised modes, mask = supported modes), SPEED (u32 Mb/s; SPEED_UNKNOWN, ~0, while
// the link is down), DUPLEX (u8), LANES (u32, only when the driver says). The kernel does not
// report which link mode is active: its signalling is read from speed / lanes (below).
// Requested with ETHTOOL_FLAG_COMPACT_BITSETS: a bitset is SIZE (bits) and VALUE / MASK
// arrays of 32-bit words (net/ethtool/bitset.c, ethnl_put_bitset).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rdmascope::sys {

struct LinkModesReading {
  uint32_t ifindex = 0;
  std::string ifname;
  std::optional<bool> autoneg;
  std::optional<uint32_t> speed_mbps;  // none while the link is down (SPEED_UNKNOWN) or 0
  std::optional<uint32_t> lanes;       // none when the driver does not say
  std::vector<uint32_t> supported;     // link mode bit indices, ascending
  std::vector<uint32_t> advertised;
  std::vector<uint32_t> peer;  // what the link partner advertised (autonegotiation); may be empty
  bool operator==(const LinkModesReading&) const = default;
};

// ETHTOOL_MSG_LINKMODES_GET as a dump of every interface, compact bitsets.
size_t BuildLinkModesDumpRequest(uint16_t family, uint32_t seq, std::vector<char>& buf);

// As ParseFecDump (sys/ethtool_fec.h): 0 done, 1 more to come, -errno; a bitset of more than
// 1024 bits or whose arrays do not match its size is -EBADMSG.
int ParseLinkModesDump(const void* data, size_t len, std::vector<LinkModesReading>& out);

// The speed and lane count of a link mode bit (the kernel's link_mode_params table,
// net/ethtool/common.c); none for bits that are no speed (Autoneg, Pause, FEC_*, ports) and
// for bits this table does not know.
struct LinkModeParams {
  uint32_t speed_mbps;
  uint32_t lanes;
};
std::optional<LinkModeParams> LinkModeParamsOf(uint32_t bit);

// Bits per second one lane signals for a per-lane data rate (IEEE 802.3 clauses 82, 107/108,
// 134/135, 161/162/172, 186): 10G NRZ 10.3125, 25G NRZ 25.78125, 50G PAM4 53.125, 100G PAM4
// 106.25, 200G PAM4 212.5 Gb/s; none for other rates (1G, 2.5G, 14G FDR-like 56G modes).
std::optional<double> LaneSignallingRate(uint32_t lane_speed_mbps);

// The link's line rate in bits per second: lanes x the lanes' signalling rate. Lanes from
// ETHTOOL_A_LINKMODES_LANES, else from the advertised (then the supported) modes of the active
// speed when they all have the same lane count; none while down or when that is ambiguous.
std::optional<double> LineRateBitsPerSecond(const LinkModesReading& reading);
// The lanes LineRateBitsPerSecond used.
std::optional<uint32_t> ActiveLanes(const LinkModesReading& reading);

// The highest speed among the supported link modes (Mb/s): the port's maximum; none when no
// supported bit is a speed (veth, rxe's netdev).
std::optional<uint32_t> MaxSupportedSpeedMbps(const LinkModesReading& reading);
// The highest speed both ends advertise (our advertised modes and the partner's); none
// without a partner's modes (autonegotiation off, a DAC forced to a speed, link down).
std::optional<uint32_t> CommonMaxSpeedMbps(const LinkModesReading& reading);

}  // namespace rdmascope::sys
