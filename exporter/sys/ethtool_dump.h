// Dumps of ethtool's generic netlink family (issue 40, FEC and link modes): one request with
// NLM_F_DUMP answers for every interface of the network namespace whose driver implements
// the command; the kernel skips the others silently (net/ethtool/netlink.c,
// ethnl_default_dumpit: a device's -EOPNOTSUPP is not an error of the dump), so "not in the
// dump" is how a driver says it has no such source. The request header's flags apply to every
// interface of the dump (ethnl_default_start parses the header as a GET's). Shared by
// sys/ethtool_fec and sys/ethtool_linkmodes.
#pragma once

#include <libmnl/libmnl.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace rdmascope::sys {

// A dump request of `command` with the header nest `header_attr` holding `flags`
// (ETHTOOL_FLAG_*); `family` is the id resolved by EthtoolNetlink::Open (0 under replay: the
// capture keys requests by command, never by family id).
size_t BuildEthtoolDumpRequest(uint16_t family, uint8_t command, uint16_t header_attr,
                               uint32_t flags, uint32_t seq, std::vector<char>& buf);

// One interface's reply message in a dump: the header nest's index and name, and the
// message whose attributes follow the 4-byte genlmsghdr.
struct EthtoolDumpEntry {
  uint32_t ifindex = 0;
  std::string ifname;
  const nlmsghdr* message = nullptr;
};

// Walks a dump's bytes (whole messages of one or more receive buffers) and hands each reply
// of `reply_command` to `on_entry`, which returns false for a malformed one. Returns 0 at
// NLMSG_DONE, 1 when the bytes end before it (more to receive), -errno for an NLMSG_ERROR or
// -EBADMSG for bytes that are no whole netlink messages, a reply without a valid header
// nest (index and a name of at most IFNAMSIZ - 1 bytes), or one `on_entry` refused.
int RunEthtoolDump(const void* data, size_t len, uint8_t reply_command, uint16_t header_attr,
                   const std::function<bool(const EthtoolDumpEntry&)>& on_entry);

// Whether a receive buffer ends the dump (holds NLMSG_DONE or NLMSG_ERROR), as far as its
// headers are whole; the transport stops receiving there.
bool EndsEthtoolDump(const void* data, size_t len);

}  // namespace rdmascope::sys
