// A bound libmnl netlink socket with a receive timeout, shared by the DCB and RDMA netlink
// clients: a scrape must never hang on a reply that does not come.
#pragma once

#include <expected>

struct mnl_socket;

namespace rdmascope::sys {

// Opens and binds a socket of `protocol` (NETLINK_ROUTE, NETLINK_RDMA...); errno on failure
// (EPROTONOSUPPORT: the kernel has no such netlink family).
std::expected<mnl_socket*, int> OpenNetlinkSocket(int protocol);

}  // namespace rdmascope::sys
