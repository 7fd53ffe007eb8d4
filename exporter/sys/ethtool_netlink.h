// ethtool's generic netlink family (Linux 5.6; the `ethtool` tool's own interface since 5.x),
// for what the SIOCETHTOOL ioctl cannot say: module EEPROM pages by I2C address, page and bank
// (ETHTOOL_MSG_MODULE_EEPROM_GET, Linux 5.13), and next FEC statistics and the link's extended
// state (issue 40). Built on libmnl, as the RDMA and DCB clients; a receive timeout bounds each
// request (sys/netlink_socket.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <expected>
#include <string>
#include <string_view>
#include <vector>

#include "sys/ethtool_linkstate.h"
#include "sys/module_eeprom.h"

struct mnl_socket;

namespace rdmascope::sys {

// CTRL_CMD_GETFAMILY for "ethtool": the request, and the family id from its reply (ENOENT:
// a kernel without ethtool netlink; EBADMSG: malformed).
size_t BuildEthtoolFamilyRequest(uint32_t seq, std::vector<char>& buf);
std::expected<uint16_t, int> ParseFamilyReply(const void* data, size_t len);

// ETHTOOL_MSG_MODULE_EEPROM_GET of `length` bytes at `offset` of `key` on `ifname` (0 for a
// name that is no interface name, or a range the kernel refuses: across bytes 127/128, or the
// lower half of a page other than 0).
size_t BuildModuleEepromRequest(uint16_t family, std::string_view ifname, const ModulePageKey& key,
                                uint8_t offset, uint8_t length, uint32_t seq,
                                std::vector<char>& buf);
// The bytes of the reply's ETHTOOL_A_MODULE_EEPROM_DATA, exactly `length` of them: fewer
// (mlx5 answered success with 0 bytes until a 2025 fix) is EIO, not a page of zeros; an
// NLMSG_ERROR is its errno (EOPNOTSUPP: the driver reads no module; EIO: no module plugged).
std::expected<std::string, int> ParseModuleEepromReply(const void* data, size_t len, size_t length);

class EthtoolNetlink {
 public:
  // The socket and the family id; errno when there is neither (EPROTONOSUPPORT, ENOENT).
  static std::expected<EthtoolNetlink, int> Open();
  EthtoolNetlink(EthtoolNetlink&& other) noexcept;
  EthtoolNetlink(const EthtoolNetlink&) = delete;
  EthtoolNetlink& operator=(const EthtoolNetlink&) = delete;
  EthtoolNetlink& operator=(EthtoolNetlink&&) = delete;
  ~EthtoolNetlink();

  std::expected<std::string, int> ReadModule(std::string_view ifname, const ModulePageKey& key,
                                             uint8_t offset, uint8_t length);
  // ETHTOOL_MSG_LINKSTATE_GET of `ifname` (sys/ethtool_linkstate.{h,cc}): recorded as raw
  // netlink bytes under ethtool/linkstate_get-IF, and answered from them under replay.
  std::expected<LinkStateReading, int> ReadLinkState(std::string_view ifname);

  // Issue 40, FEC and link modes: a dump request built by `build(family, seq, buf)`
  // (sys/ethtool_fec.h, sys/ethtool_linkmodes.h) sent, and its replies received until
  // NLMSG_DONE or NLMSG_ERROR, concatenated (at most kMaxNetlinkReplyBytes). Recorded under
  // capture as netlink/ethtool/<command>.bin; under replay answered from the capture (ENOENT:
  // a capture without it), the socket never opened.
  using DumpBuilder = size_t (*)(uint16_t family, uint32_t seq, std::vector<char>& buf);
  std::expected<std::string, int> Dump(DumpBuilder build);

 private:
  EthtoolNetlink(mnl_socket* socket, uint16_t family) : socket_(socket), family_(family) {}
  // Sends one request and returns the reply to it (replies to earlier requests skipped).
  std::expected<std::vector<char>, int> Exchange(const std::vector<char>& request, size_t len,
                                                 uint32_t seq);
  mnl_socket* socket_ = nullptr;
  uint16_t family_ = 0;
  uint32_t seq_ = 1;
  bool linkstate_stats_refused_ = false;  // a kernel before 6.2: LINKSTATE without STATS
};

}  // namespace rdmascope::sys
