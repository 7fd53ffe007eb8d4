// Netlink replies in a capture (docs/capture.md "netlink"): the bytes received for one request,
// concatenated across receive buffers, in samples/NNNN/netlink/<family>/<key>.bin, keyed by
// what was asked (the command and its u32 attributes: "rdma/res_qp_get-dev_index1"), with a
// decoded JSON beside it for people (replay never reads the JSON). Replay hands the bytes to
// the same parsers after rewriting each header's sequence number and port id to the request's,
// so their checks (sequence, WholeNetlinkMessages) run unchanged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <expected>
#include <string>
#include <string_view>

namespace rdmascope::capture {
class Session;
}

namespace rdmascope::sys {

// A dump's bytes are at most what this many full receive buffers hold (a large host's QP
// dump is a few MiB); a larger file in a capture is refused.
constexpr size_t kMaxNetlinkReplyBytes = 64 << 20;

// kEthtool: the ethtool generic netlink family (genlmsghdr, 4 bytes, before the attributes),
// keyed by command and the request header's interface name: "ethtool/linkstate_get-eth0".
enum class NetlinkFamily { kRdma, kDcb, kEthtool };

// "rdma/get", "rdma/port_get-dev_index3", "dcb/ieee_get-eth0", "ethtool/linkstate_get-eth0"; EINVAL
// for a request this cannot name (malformed, or an interface name that is no path component).
std::expected<std::string, int> NetlinkRequestKey(NetlinkFamily family, const void* request,
                                                  size_t len);

// The messages as JSON for review: header fields, an NLMSG_ERROR's errno name, attributes by
// number with their u32/u64/string reading and hex (nested attributes when they parse as such).
// `extra_header` is the family header's size after nlmsghdr (dcbmsg: 4; nldev: 0).
std::string DecodeNetlinkJson(std::string_view bytes, size_t extra_header);

// Sets every message's nlmsg_seq and nlmsg_pid, as far as the headers are whole.
void RewriteNetlinkHeaders(std::string& bytes, uint32_t seq, uint32_t portid);

// A socket that could not be opened (EPROTONOSUPPORT: a kernel without RDMA netlink; EPERM),
// recorded as netlink/<family>/socket.errno; replay returns it (0 when none was stored).
void RecordNetlinkOpen(NetlinkFamily family, int error);
int ReplayNetlinkOpen(const capture::Session& session, NetlinkFamily family);

// One request's replies, recorded as they arrive; written when the request is done.
class NetlinkRecording {
 public:
  // Records only while a capture is being recorded and the request has a key.
  NetlinkRecording(NetlinkFamily family, const void* request, size_t len);
  bool active() const { return !key_.empty(); }
  void Received(const void* data, size_t len) {
    if (active()) bytes_.append(static_cast<const char*>(data), len);
  }
  // The request's end: its bytes (and JSON), or the errno when nothing was received.
  void Finish(int error);

 private:
  NetlinkFamily family_;
  std::string key_;
  std::string bytes_;
};

// The recorded reply to a request, headers rewritten; the stored errno, or ENOENT.
std::expected<std::string, int> ReplayNetlink(const capture::Session& session, NetlinkFamily family,
                                              const void* request, size_t len, uint32_t seq);

}  // namespace rdmascope::sys
