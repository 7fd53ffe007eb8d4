#include "sys/ethtool_netlink.h"

#include <libmnl/libmnl.h>
#include <linux/ethtool_netlink.h>
#include <linux/genetlink.h>
#include <net/if.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "core/capture.h"
#include "sys/ethtool_dump.h"
#include "sys/netlink_capture.h"
#include "sys/netlink_socket.h"

namespace rdmascope::sys {
namespace {

// A module read is at most 128 bytes; a family reply a few hundred: one page of buffer.
constexpr size_t kReplyBufferBytes = 16 * 1024;
// A dump's receive buffer: the kernel fills dump skbs of up to 32 KiB (netlink_dump).
constexpr size_t kDumpBufferBytes = 32 * 1024;

nlmsghdr* PutGenlHeader(std::vector<char>& buf, uint16_t family, uint8_t command, uint32_t seq) {
  buf.assign(MNL_SOCKET_BUFFER_SIZE, '\0');
  nlmsghdr* message = mnl_nlmsg_put_header(buf.data());
  message->nlmsg_type = family;
  message->nlmsg_flags = NLM_F_REQUEST;
  message->nlmsg_seq = seq;
  auto* genl = static_cast<genlmsghdr*>(mnl_nlmsg_put_extra_header(message, sizeof(genlmsghdr)));
  genl->cmd = command;
  genl->version = command == CTRL_CMD_GETFAMILY ? 1 : ETHTOOL_GENL_VERSION;
  return message;
}

// What one reply's callbacks found.
struct ReplyState {
  uint16_t family = 0;
  const nlattr* data = nullptr;
  bool malformed = false;
};

int OnFamilyAttribute(const nlattr* attr, void* data) {
  auto* state = static_cast<ReplyState*>(data);
  if (mnl_attr_get_type(attr) != CTRL_ATTR_FAMILY_ID) return MNL_CB_OK;
  if (mnl_attr_validate(attr, MNL_TYPE_U16) < 0) {
    state->malformed = true;
    return MNL_CB_ERROR;
  }
  state->family = mnl_attr_get_u16(attr);
  return MNL_CB_OK;
}

int OnFamilyMessage(const nlmsghdr* message, void* data) {
  if (mnl_attr_parse(message, sizeof(genlmsghdr), OnFamilyAttribute, data) < 0) {
    static_cast<ReplyState*>(data)->malformed = true;
    return MNL_CB_ERROR;
  }
  return MNL_CB_OK;
}

int OnEepromAttribute(const nlattr* attr, void* data) {
  if (mnl_attr_get_type(attr) == ETHTOOL_A_MODULE_EEPROM_DATA) {
    static_cast<ReplyState*>(data)->data = attr;
  }
  return MNL_CB_OK;
}

int OnEepromMessage(const nlmsghdr* message, void* data) {
  if (mnl_attr_parse(message, sizeof(genlmsghdr), OnEepromAttribute, data) < 0) {
    static_cast<ReplyState*>(data)->malformed = true;
    return MNL_CB_ERROR;
  }
  return MNL_CB_OK;
}

// Runs the callbacks over a reply: 0, or the kernel's errno (NLMSG_ERROR), or EBADMSG.
int RunReply(const void* data, size_t len, mnl_cb_t callback, ReplyState& state) {
  if (!WholeNetlinkMessages(data, len) || len == 0) return EBADMSG;
  errno = 0;
  if (mnl_cb_run(data, len, 0, 0, callback, &state) < 0) {
    if (state.malformed) return EBADMSG;
    // An NLMSG_ERROR reply: libmnl sets errno to the kernel's error.
    return ReplyErrno(errno);
  }
  return state.malformed ? EBADMSG : 0;
}

}  // namespace

size_t BuildEthtoolFamilyRequest(uint32_t seq, std::vector<char>& buf) {
  nlmsghdr* message = PutGenlHeader(buf, GENL_ID_CTRL, CTRL_CMD_GETFAMILY, seq);
  mnl_attr_put_strz(message, CTRL_ATTR_FAMILY_NAME, ETHTOOL_GENL_NAME);
  return message->nlmsg_len;
}

std::expected<uint16_t, int> ParseFamilyReply(const void* data, size_t len) {
  ReplyState state;
  if (const int error = RunReply(data, len, OnFamilyMessage, state); error != 0) {
    return std::unexpected(error);
  }
  if (state.family == 0) return std::unexpected(ENOENT);
  return state.family;
}

size_t BuildModuleEepromRequest(uint16_t family, std::string_view ifname, const ModulePageKey& key,
                                uint8_t offset, uint8_t length, uint32_t seq,
                                std::vector<char>& buf) {
  if (ifname.empty() || ifname.size() >= IFNAMSIZ || ifname.find('\0') != std::string_view::npos ||
      length == 0 || offset + length > 256 || (offset < 128 && offset + length > 128) ||
      (key.page != 0 && offset < 128) || key.i2c_address > 0x7f) {
    return 0;
  }
  nlmsghdr* message = PutGenlHeader(buf, family, ETHTOOL_MSG_MODULE_EEPROM_GET, seq);
  nlattr* header = mnl_attr_nest_start(message, ETHTOOL_A_MODULE_EEPROM_HEADER);
  const std::string name(ifname);
  mnl_attr_put_strz(message, ETHTOOL_A_HEADER_DEV_NAME, name.c_str());
  mnl_attr_nest_end(message, header);
  mnl_attr_put_u32(message, ETHTOOL_A_MODULE_EEPROM_OFFSET, offset);
  mnl_attr_put_u32(message, ETHTOOL_A_MODULE_EEPROM_LENGTH, length);
  mnl_attr_put_u8(message, ETHTOOL_A_MODULE_EEPROM_PAGE, key.page);
  mnl_attr_put_u8(message, ETHTOOL_A_MODULE_EEPROM_BANK, key.bank);
  mnl_attr_put_u8(message, ETHTOOL_A_MODULE_EEPROM_I2C_ADDRESS, key.i2c_address);
  return message->nlmsg_len;
}

std::expected<std::string, int> ParseModuleEepromReply(const void* data, size_t len,
                                                       size_t length) {
  ReplyState state;
  if (const int error = RunReply(data, len, OnEepromMessage, state); error != 0) {
    return std::unexpected(error);
  }
  // Success without the bytes asked for is no page: a driver that returned 0 bytes must not
  // become a module whose readings are all 0.
  if (state.data == nullptr || mnl_attr_get_payload_len(state.data) != length) {
    return std::unexpected(EIO);
  }
  return std::string(static_cast<const char*>(mnl_attr_get_payload(state.data)), length);
}

std::expected<EthtoolNetlink, int> EthtoolNetlink::Open() {
  // Replaying a capture: no socket; the module pages come from it (sys/module_eeprom_source.h).
  if (const capture::Session* session = capture::Active(); session && session->replaying()) {
    return EthtoolNetlink(nullptr, 0);
  }
  const auto socket = OpenNetlinkSocket(NETLINK_GENERIC);
  if (!socket) return std::unexpected(socket.error());
  EthtoolNetlink netlink(*socket, GENL_ID_CTRL);
  std::vector<char> request;
  const uint32_t seq = netlink.seq_++;
  const size_t len = BuildEthtoolFamilyRequest(seq, request);
  const auto reply = netlink.Exchange(request, len, seq);
  if (!reply) return std::unexpected(reply.error());
  const auto family = ParseFamilyReply(reply->data(), reply->size());
  if (!family) return std::unexpected(family.error());
  netlink.family_ = *family;
  return netlink;
}

EthtoolNetlink::EthtoolNetlink(EthtoolNetlink&& other) noexcept
    : socket_(std::exchange(other.socket_, nullptr)),
      family_(other.family_),
      seq_(other.seq_),
      linkstate_stats_refused_(other.linkstate_stats_refused_) {}

EthtoolNetlink::~EthtoolNetlink() {
  if (socket_ != nullptr) mnl_socket_close(socket_);
}

std::expected<std::vector<char>, int> EthtoolNetlink::Exchange(const std::vector<char>& request,
                                                               size_t len, uint32_t seq) {
  if (socket_ == nullptr) return std::unexpected(ENOTCONN);
  if (mnl_socket_sendto(socket_, request.data(), len) < 0) return std::unexpected(errno);
  std::vector<char> reply(kReplyBufferBytes);
  for (;;) {
    const ssize_t n = mnl_socket_recvfrom(socket_, reply.data(), reply.size());
    if (n < 0) return std::unexpected(errno);  // EAGAIN: the receive timeout
    nlmsghdr header;
    if (static_cast<size_t>(n) < sizeof header) return std::unexpected(EBADMSG);
    std::memcpy(&header, reply.data(), sizeof header);
    // Skip stale replies to an earlier request that timed out.
    if (header.nlmsg_seq != seq) continue;
    reply.resize(static_cast<size_t>(n));
    return reply;
  }
}

std::expected<std::string, int> EthtoolNetlink::ReadModule(std::string_view ifname,
                                                           const ModulePageKey& key, uint8_t offset,
                                                           uint8_t length) {
  std::vector<char> request;
  const uint32_t seq = seq_++;
  const size_t len = BuildModuleEepromRequest(family_, ifname, key, offset, length, seq, request);
  if (len == 0) return std::unexpected(EINVAL);
  const auto reply = Exchange(request, len, seq);
  if (!reply) return std::unexpected(reply.error());
  return ParseModuleEepromReply(reply->data(), reply->size(), length);
}

std::expected<std::string, int> EthtoolNetlink::Dump(DumpBuilder build) {
  std::vector<char> request;
  const uint32_t seq = seq_++;
  const size_t len = build(family_, seq, request);
  if (socket_ == nullptr) {
    const capture::Session* session = capture::Active();
    if (session == nullptr || !session->replaying()) return std::unexpected(ENOTCONN);
    return ReplayNetlink(*session, NetlinkFamily::kEthtool, request.data(), len, seq);
  }
  NetlinkRecording recording(NetlinkFamily::kEthtool, request.data(), len);
  if (mnl_socket_sendto(socket_, request.data(), len) < 0) {
    const int error = errno;
    recording.Finish(error);
    return std::unexpected(error);
  }
  // A dump fills receive buffers of up to 32 KiB (the kernel's dump skb); one FEC reply with
  // a 6.18 histogram is under 2 KiB.
  std::vector<char> buffer(kDumpBufferBytes);
  std::string bytes;
  for (;;) {
    const ssize_t n = mnl_socket_recvfrom(socket_, buffer.data(), buffer.size());
    if (n < 0) {
      const int error = errno;  // EAGAIN: the receive timeout
      recording.Finish(error);
      return std::unexpected(error);
    }
    nlmsghdr header;
    if (static_cast<size_t>(n) < sizeof header) {
      recording.Finish(EBADMSG);
      return std::unexpected(EBADMSG);
    }
    std::memcpy(&header, buffer.data(), sizeof header);
    if (header.nlmsg_seq != seq) continue;  // a reply to an earlier request that timed out
    recording.Received(buffer.data(), static_cast<size_t>(n));
    bytes.append(buffer.data(), static_cast<size_t>(n));
    if (bytes.size() > kMaxNetlinkReplyBytes) {
      recording.Finish(EMSGSIZE);
      return std::unexpected(EMSGSIZE);
    }
    if (EndsEthtoolDump(buffer.data(), static_cast<size_t>(n))) break;
  }
  recording.Finish(0);
  return bytes;
}

}  // namespace rdmascope::sys
