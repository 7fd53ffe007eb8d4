// A bound libmnl netlink socket with a receive timeout, shared by the DCB and RDMA netlink
// clients: a scrape must never hang on a reply that does not come.
#pragma once

#include <cstddef>
#include <expected>

struct mnl_socket;

namespace rdmascope::sys {

// Opens and binds a socket of `protocol` (NETLINK_ROUTE, NETLINK_RDMA...); errno on failure
// (EPROTONOSUPPORT: the kernel has no such netlink family).
std::expected<mnl_socket*, int> OpenNetlinkSocket(int protocol);

// True if `data` is whole netlink messages only, each header's length within what is left.
// Check before mnl_cb_run: libmnl 1.0.4's mnl_nlmsg_ok compares the length as an int, so a
// header claiming 2^31 bytes or more passes it and the attributes are read far past the buffer
// (found by fuzz/rdma_netlink_fuzzer and fuzz/dcb_netlink_fuzzer).
bool WholeNetlinkMessages(const void* data, size_t len);

// The errno an NLMSG_ERROR reply carried, from the reply's error field or from `errno` as
// libmnl's callback left it (negated): its magnitude when 1..4095, else EBADMSG. The field is
// the sender's to choose: INT_MIN cannot even be negated (found by fuzz/rdma_netlink_fuzzer
// and fuzz/link_events_fuzzer), and 0 here would read as success.
int ReplyErrno(int error);

}  // namespace rdmascope::sys
