#include "sys/rtnetlink_links.h"

#include <libmnl/libmnl.h>
#include <linux/if.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "sys/netlink_socket.h"

namespace rdmascope::sys {
namespace {

// One receive buffer: a RTM_NEWLINK is ~1-3 KiB with its stats and attributes; 32 KiB takes
// a dozen at a time, and is what bounds the memory of a storm (the rest waits in the
// socket, then overflows it: ENOBUFS, one dump).
constexpr size_t kReceiveBytes = 32 * 1024;
// The socket's receive buffer: a burst of some hundred notifications before ENOBUFS.
constexpr int kSocketBufferBytes = 1 << 20;

struct ParseState {
  std::vector<LinkNotice>* out;
  LinkNotice* notice = nullptr;
  bool malformed = false;
};

int OnAttribute(const nlattr* attr, void* data) {
  auto* state = static_cast<ParseState*>(data);
  LinkNotice& notice = *state->notice;
  bool ok = true;
  switch (mnl_attr_get_type(attr)) {
    case IFLA_IFNAME:
      ok = mnl_attr_validate(attr, MNL_TYPE_NUL_STRING) >= 0 &&
           mnl_attr_get_payload_len(attr) <= IFNAMSIZ;
      if (ok) notice.name = mnl_attr_get_str(attr);
      break;
    case IFLA_CARRIER:
      ok = mnl_attr_validate(attr, MNL_TYPE_U8) >= 0;
      if (ok) notice.carrier = mnl_attr_get_u8(attr);
      break;
    case IFLA_OPERSTATE:
      ok = mnl_attr_validate(attr, MNL_TYPE_U8) >= 0;
      if (ok) notice.operstate = mnl_attr_get_u8(attr);
      break;
    case IFLA_CARRIER_CHANGES:
      ok = mnl_attr_validate(attr, MNL_TYPE_U32) >= 0;
      if (ok) notice.carrier_changes = mnl_attr_get_u32(attr);
      break;
    case IFLA_CARRIER_DOWN_COUNT:
      ok = mnl_attr_validate(attr, MNL_TYPE_U32) >= 0;
      if (ok) notice.carrier_down_count = mnl_attr_get_u32(attr);
      break;
    default:
      break;
  }
  if (!ok) {
    state->malformed = true;
    return MNL_CB_ERROR;
  }
  return MNL_CB_OK;
}

int OnMessage(const nlmsghdr* message, void* data) {
  auto* state = static_cast<ParseState*>(data);
  if (message->nlmsg_type != RTM_NEWLINK && message->nlmsg_type != RTM_DELLINK) return MNL_CB_OK;
  if (mnl_nlmsg_get_payload_len(message) < sizeof(ifinfomsg)) {
    state->malformed = true;
    return MNL_CB_ERROR;
  }
  const auto* info = static_cast<const ifinfomsg*>(mnl_nlmsg_get_payload(message));
  LinkNotice notice;
  notice.deleted = message->nlmsg_type == RTM_DELLINK;
  notice.ifindex = info->ifi_index;
  notice.flags = info->ifi_flags;
  state->notice = &notice;
  if (mnl_attr_parse(message, sizeof(ifinfomsg), OnAttribute, state) < 0) {
    state->malformed = true;
    return MNL_CB_ERROR;
  }
  state->out->push_back(std::move(notice));
  return MNL_CB_OK;
}

int OnDone(const nlmsghdr* /*message*/, void* data) {
  LinkNotice done;
  done.dump_done = true;
  static_cast<ParseState*>(data)->out->push_back(std::move(done));
  return MNL_CB_STOP;
}

// NLMSG_ERROR, as libmnl's own control callback (which a control array replaces): the
// kernel's errno, or the end of an acknowledged request.
int OnError(const nlmsghdr* message, void* data) {
  if (mnl_nlmsg_get_payload_len(message) < sizeof(nlmsgerr)) {
    static_cast<ParseState*>(data)->malformed = true;
    return MNL_CB_ERROR;
  }
  const auto* error = static_cast<const nlmsgerr*>(mnl_nlmsg_get_payload(message));
  if (error->error == 0) return MNL_CB_STOP;
  errno = ReplyErrno(error->error);
  return MNL_CB_ERROR;
}

}  // namespace

bool LinkNotice::up() const { return (flags & IFF_UP) != 0 && (flags & IFF_LOWER_UP) != 0; }

size_t BuildLinkDumpRequest(uint32_t seq, std::vector<char>& buf) {
  buf.assign(MNL_SOCKET_BUFFER_SIZE, '\0');
  nlmsghdr* message = mnl_nlmsg_put_header(buf.data());
  message->nlmsg_type = RTM_GETLINK;
  message->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  message->nlmsg_seq = seq;
  auto* info = static_cast<ifinfomsg*>(mnl_nlmsg_put_extra_header(message, sizeof(ifinfomsg)));
  info->ifi_family = AF_UNSPEC;
  return message->nlmsg_len;
}

int ParseLinkMessages(const void* data, size_t len, std::vector<LinkNotice>& out) {
  if (len == 0 || !WholeNetlinkMessages(data, len)) return EBADMSG;
  ParseState state{.out = &out};
  // NLMSG_DONE and NLMSG_ERROR through their callbacks (the others, NOOP and OVERRUN, skipped).
  mnl_cb_t controls[NLMSG_MIN_TYPE] = {};
  controls[NLMSG_DONE] = OnDone;
  controls[NLMSG_ERROR] = OnError;
  errno = 0;
  // Port id and sequence 0: notifications and a dump's replies alike.
  if (mnl_cb_run2(data, len, 0, 0, OnMessage, &state, controls, NLMSG_MIN_TYPE) < 0) {
    if (state.malformed) return EBADMSG;
    return errno != 0 ? errno : EBADMSG;
  }
  return state.malformed ? EBADMSG : 0;
}

std::expected<RtnetlinkLinks, int> RtnetlinkLinks::Open() {
  mnl_socket* socket = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (socket == nullptr) return std::unexpected(errno);
  if (mnl_socket_bind(socket, RTMGRP_LINK, MNL_SOCKET_AUTOPID) < 0) {
    const int error = errno;
    mnl_socket_close(socket);
    return std::unexpected(error);
  }
  // Best effort: a smaller buffer overflows sooner, and that is a dump, not a failure.
  setsockopt(mnl_socket_get_fd(socket), SOL_SOCKET, SO_RCVBUF, &kSocketBufferBytes,
             sizeof kSocketBufferBytes);
  return RtnetlinkLinks(socket);
}

RtnetlinkLinks::RtnetlinkLinks(RtnetlinkLinks&& other) noexcept
    : socket_(std::exchange(other.socket_, nullptr)),
      seq_(other.seq_),
      buffer_(std::move(other.buffer_)) {}

RtnetlinkLinks::~RtnetlinkLinks() {
  if (socket_ != nullptr) mnl_socket_close(socket_);
}

int RtnetlinkLinks::fd() const { return mnl_socket_get_fd(socket_); }

int RtnetlinkLinks::RequestDump() {
  std::vector<char> request;
  const size_t len = BuildLinkDumpRequest(seq_++, request);
  return mnl_socket_sendto(socket_, request.data(), len) < 0 ? errno : 0;
}

int RtnetlinkLinks::Receive(std::vector<LinkNotice>& out) {
  buffer_.resize(kReceiveBytes);
  const ssize_t n = mnl_socket_recvfrom(socket_, buffer_.data(), buffer_.size());
  if (n < 0) return errno;
  return ParseLinkMessages(buffer_.data(), static_cast<size_t>(n), out);
}

}  // namespace rdmascope::sys
