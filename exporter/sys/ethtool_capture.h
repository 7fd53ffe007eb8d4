// SIOCETHTOOL answers in a capture (docs/capture.md "ethtool"): as the text the ethtool tool
// prints, so a capture can be assembled from `ethtool -S/-i/-c/--show-priv-flags` output on a
// host without rdmascope. Recording writes the text of what Ethtool's reads returned; replay
// answers Ethtool's ioctls from that text, so GetStats & co. run unchanged on it.
#pragma once

#include <expected>
#include <string>
#include <string_view>

#include "sys/ethtool_ioctl.h"

namespace rdmascope::capture {
class Session;
}

namespace rdmascope::sys {

// Files of samples/NNNN/ethtool/IFNAME/.
inline constexpr std::string_view kEthtoolStatsFile = "statistics";      // ethtool -S
inline constexpr std::string_view kEthtoolDriverFile = "driver";         // ethtool -i
inline constexpr std::string_view kEthtoolCoalesceFile = "coalesce";     // ethtool -c
inline constexpr std::string_view kEthtoolPrivFlagsFile = "priv-flags";  // --show-priv-flags
// SIOCGIFMTU and SIOCGIFINDEX: one decimal number each (as /sys/class/net/IF/mtu, ifindex).
inline constexpr std::string_view kEthtoolMtuFile = "mtu";
inline constexpr std::string_view kEthtoolIfindexFile = "ifindex";

// The tool's output for one reading, and back. Parsers take what the tool prints (extra
// lines of `ethtool -i` and `-c` are skipped) and refuse anything else with EBADMSG.
std::string FormatEthtoolStats(const EthtoolStats& stats);
std::expected<EthtoolStats, int> ParseEthtoolStats(std::string_view text);
std::string FormatDriverInfo(const DriverInfo& info);
std::expected<DriverInfo, int> ParseDriverInfo(std::string_view text);
std::string FormatCoalesce(std::string_view ifname, const CoalesceSettings& settings);
std::expected<CoalesceSettings, int> ParseCoalesce(std::string_view text);
std::string FormatPrivateFlags(std::string_view ifname, const PrivateFlags& flags);
std::expected<PrivateFlags, int> ParsePrivateFlags(std::string_view text);

// "ethtool/IFNAME/FILE" (nullopt for a name that is no interface name).
std::expected<std::string, int> EthtoolCapturePath(std::string_view ifname, std::string_view file);

// The ioctls of Ethtool::WithIoctl answered from the session's capture (replay).
EthtoolIoctl ReplayEthtoolIoctl(const capture::Session& session);
InterfaceIoctl ReplayInterfaceIoctl(const capture::Session& session);

}  // namespace rdmascope::sys
