#include "sys/dcb_netlink.h"

#include <libmnl/libmnl.h>
#include <linux/dcbnl.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include "core/capture.h"
#include "sys/netlink_capture.h"
#include "sys/netlink_socket.h"

namespace rdmascope::sys {
namespace {

// A reply to one IEEE_GET is a few hundred bytes; the APP table can add a few KiB.
constexpr size_t kReplyBufferBytes = 32 * 1024;

struct ParseState {
  std::expected<PfcConfig, int> result = std::unexpected(ENODATA);
  std::optional<DscpMap> dscp;  // set once an APP table was read whole
  std::string dscp_error;
};

// The APP table's entries, as `dcb app show` reads them (iproute2 dcb/dcb_app.c). Entries of
// other selectors (EtherType, ports, and since Linux 6.2 the non-IEEE PCP entries under
// DCB_ATTR_DCB_APP) are not about DSCP and are skipped. A short entry or a DSCP entry outside
// 0-63 / priority outside 0-7 makes the whole table unusable: which DSCP it meant is unknown.
std::expected<DscpMap, std::string> ParseAppTable(const nlattr* table) {
  DscpMap map;
  const auto* at = static_cast<const char*>(mnl_attr_get_payload(table));
  const char* end = at + mnl_attr_get_payload_len(table);
  const auto* entry = reinterpret_cast<const nlattr*>(at);
  for (; mnl_attr_ok(entry, static_cast<int>(end - reinterpret_cast<const char*>(entry)));
       entry = mnl_attr_next(entry)) {
    if (mnl_attr_get_type(entry) != DCB_ATTR_IEEE_APP) continue;
    if (mnl_attr_get_payload_len(entry) < sizeof(dcb_app)) {
      return std::unexpected("APP entry of " + std::to_string(mnl_attr_get_payload_len(entry)) +
                             " bytes, shorter than struct dcb_app");
    }
    dcb_app app;
    std::memcpy(&app, mnl_attr_get_payload(entry), sizeof app);
    if (app.selector != IEEE_8021QAZ_APP_SEL_DSCP) continue;
    if (app.protocol >= DscpMap::kDscps || app.priority >= 8) {
      return std::unexpected("DSCP APP entry " + std::to_string(app.protocol) + " -> priority " +
                             std::to_string(app.priority) + " out of range");
    }
    map.priorities[app.protocol] |= static_cast<uint8_t>(1U << app.priority);
    ++map.entries;
  }
  // Bytes left over that do not make an attribute: the nest was cut short.
  if (reinterpret_cast<const char*>(entry) < end) return std::unexpected("truncated APP table");
  return map;
}

int OnIeeeAttribute(const nlattr* attr, void* data) {
  auto* state = static_cast<ParseState*>(data);
  if (mnl_attr_get_type(attr) == DCB_ATTR_IEEE_APP_TABLE) {
    auto map = ParseAppTable(attr);
    if (map) {
      state->dscp = *map;
    } else {
      state->dscp_error = map.error();
    }
    return MNL_CB_OK;
  }
  if (mnl_attr_get_type(attr) != DCB_ATTR_IEEE_PFC) return MNL_CB_OK;
  if (mnl_attr_get_payload_len(attr) < sizeof(ieee_pfc)) {
    state->result = std::unexpected(EBADMSG);
    return MNL_CB_OK;
  }
  ieee_pfc pfc;
  std::memcpy(&pfc, mnl_attr_get_payload(attr), sizeof pfc);
  PfcConfig config;
  config.capability = pfc.pfc_cap;
  config.enabled_mask = pfc.pfc_en;
  for (int i = 0; i < 8; ++i) {
    config.requests[i] = pfc.requests[i];
    config.indications[i] = pfc.indications[i];
  }
  state->result = config;
  return MNL_CB_OK;
}

int OnTopAttribute(const nlattr* attr, void* data) {
  if (mnl_attr_get_type(attr) != DCB_ATTR_IEEE) return MNL_CB_OK;
  if (mnl_attr_validate(attr, MNL_TYPE_NESTED) < 0) {
    static_cast<ParseState*>(data)->result = std::unexpected(EBADMSG);
    return MNL_CB_OK;
  }
  mnl_attr_parse_nested(attr, OnIeeeAttribute, data);
  return MNL_CB_OK;
}

int OnMessage(const nlmsghdr* message, void* data) {
  auto* state = static_cast<ParseState*>(data);
  if (message->nlmsg_type != RTM_GETDCB || message->nlmsg_len < NLMSG_LENGTH(sizeof(dcbmsg))) {
    state->result = std::unexpected(EBADMSG);
    return MNL_CB_ERROR;
  }
  if (mnl_attr_parse(message, sizeof(dcbmsg), OnTopAttribute, data) < 0) {
    state->result = std::unexpected(EBADMSG);
    return MNL_CB_ERROR;
  }
  return MNL_CB_OK;
}

}  // namespace

size_t BuildIeeeGetRequest(std::string_view ifname, uint32_t seq, std::vector<char>& buf) {
  if (ifname.empty() || ifname.size() >= IFNAMSIZ) return 0;
  buf.assign(MNL_SOCKET_BUFFER_SIZE, '\0');
  nlmsghdr* message = mnl_nlmsg_put_header(buf.data());
  message->nlmsg_type = RTM_GETDCB;
  message->nlmsg_flags = NLM_F_REQUEST;
  message->nlmsg_seq = seq;
  auto* dcb = static_cast<dcbmsg*>(mnl_nlmsg_put_extra_header(message, sizeof(dcbmsg)));
  dcb->dcb_family = AF_UNSPEC;
  dcb->cmd = DCB_CMD_IEEE_GET;
  const std::string name(ifname);
  mnl_attr_put_strz(message, DCB_ATTR_IFNAME, name.c_str());
  return message->nlmsg_len;
}

std::expected<PfcConfig, int> ParseIeeeGetReply(const void* data, size_t len) {
  ParseState state;
  if (!WholeNetlinkMessages(data, len)) return std::unexpected(EBADMSG);
  errno = 0;
  if (mnl_cb_run(data, len, 0, 0, OnMessage, &state) < 0) {
    if (!state.result && state.result.error() == EBADMSG) return state.result;
    // An NLMSG_ERROR reply: libmnl sets errno to the kernel's error (EOPNOTSUPP, ENODEV...).
    return std::unexpected(ReplyErrno(errno));
  }
  if (state.result) {
    state.result->dscp = state.dscp;
    state.result->dscp_error = std::move(state.dscp_error);
  }
  return state.result;
}

std::expected<DcbNetlink, int> DcbNetlink::Open() {
  // Replaying a capture: no socket, the replies come from it (sys/netlink_capture.h).
  if (const capture::Session* session = capture::Active(); session && session->replaying()) {
    if (const int error = ReplayNetlinkOpen(*session, NetlinkFamily::kDcb); error != 0) {
      return std::unexpected(error);
    }
    return DcbNetlink(nullptr);
  }
  const auto socket = OpenNetlinkSocket(NETLINK_ROUTE);
  if (!socket) {
    RecordNetlinkOpen(NetlinkFamily::kDcb, socket.error());
    return std::unexpected(socket.error());
  }
  return DcbNetlink(*socket);
}

DcbNetlink::DcbNetlink(DcbNetlink&& other) noexcept
    : socket_(std::exchange(other.socket_, nullptr)), seq_(other.seq_) {}

DcbNetlink::~DcbNetlink() {
  if (socket_ != nullptr) mnl_socket_close(socket_);
}

std::expected<PfcConfig, int> DcbNetlink::QueryPfc(std::string_view ifname) {
  std::vector<char> request;
  const uint32_t seq = seq_++;
  const size_t len = BuildIeeeGetRequest(ifname, seq, request);
  if (len == 0) return std::unexpected(EINVAL);
  if (socket_ == nullptr) [[unlikely]] {
    const auto bytes =
        ReplayNetlink(*capture::Active(), NetlinkFamily::kDcb, request.data(), len, seq);
    if (!bytes) return std::unexpected(bytes.error());
    return ParseIeeeGetReply(bytes->data(), bytes->size());
  }
  NetlinkRecording recording(NetlinkFamily::kDcb, request.data(), len);
  if (mnl_socket_sendto(socket_, request.data(), len) < 0) {
    recording.Finish(errno);
    return std::unexpected(errno);
  }
  std::vector<char> reply(kReplyBufferBytes);
  for (;;) {
    const ssize_t n = mnl_socket_recvfrom(socket_, reply.data(), reply.size());
    if (n < 0) {
      const int error = errno;
      recording.Finish(error);
      return std::unexpected(error);
    }
    const auto* header = reinterpret_cast<const nlmsghdr*>(reply.data());
    // Skip stale replies to an earlier request that timed out.
    if (static_cast<size_t>(n) >= sizeof(nlmsghdr) && header->nlmsg_seq != seq) continue;
    recording.Received(reply.data(), static_cast<size_t>(n));
    recording.Finish(0);
    return ParseIeeeGetReply(reply.data(), static_cast<size_t>(n));
  }
}

}  // namespace rdmascope::sys
