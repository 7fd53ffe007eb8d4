#include "sys/ethtool_dump.h"

#include <linux/ethtool_netlink.h>
#include <linux/genetlink.h>
#include <net/if.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "sys/netlink_socket.h"

namespace rdmascope::sys {
namespace {

struct HeaderState {
  const nlattr* header = nullptr;
  uint16_t header_attr = 0;
};

int OnMessageAttribute(const nlattr* attr, void* data) {
  auto* state = static_cast<HeaderState*>(data);
  if (mnl_attr_get_type(attr) == state->header_attr) state->header = attr;
  return MNL_CB_OK;
}

struct NameState {
  const nlattr* index = nullptr;
  const nlattr* name = nullptr;
};

int OnHeaderAttribute(const nlattr* attr, void* data) {
  auto* state = static_cast<NameState*>(data);
  switch (mnl_attr_get_type(attr)) {
    case ETHTOOL_A_HEADER_DEV_INDEX:
      state->index = attr;
      break;
    case ETHTOOL_A_HEADER_DEV_NAME:
      state->name = attr;
      break;
    default:
      break;
  }
  return MNL_CB_OK;
}

// The interface a reply is about, from its header nest (net/ethtool/netlink.c,
// ethnl_fill_reply_header: ETHTOOL_A_HEADER_DEV_INDEX and ETHTOOL_A_HEADER_DEV_NAME, always).
bool ReadHeader(const nlmsghdr* message, uint16_t header_attr, EthtoolDumpEntry& entry) {
  HeaderState state{.header_attr = header_attr};
  if (mnl_attr_parse(message, GENL_HDRLEN, OnMessageAttribute, &state) < 0) return false;
  if (state.header == nullptr) return false;
  NameState names;
  if (mnl_attr_parse_nested(state.header, OnHeaderAttribute, &names) < 0) return false;
  if (names.index == nullptr || names.name == nullptr ||
      mnl_attr_validate(names.index, MNL_TYPE_U32) < 0) {
    return false;
  }
  const auto* name = static_cast<const char*>(mnl_attr_get_payload(names.name));
  const size_t size = mnl_attr_get_payload_len(names.name);
  // NUL-terminated, at most IFNAMSIZ - 1 characters, no NUL inside.
  const size_t length = strnlen(name, size);
  if (length == 0 || length + 1 != size || length >= IFNAMSIZ) return false;
  entry.ifindex = mnl_attr_get_u32(names.index);
  entry.ifname.assign(name, length);
  return true;
}

}  // namespace

size_t BuildEthtoolDumpRequest(uint16_t family, uint8_t command, uint16_t header_attr,
                               uint32_t flags, uint32_t seq, std::vector<char>& buf) {
  buf.assign(MNL_SOCKET_BUFFER_SIZE, '\0');
  nlmsghdr* message = mnl_nlmsg_put_header(buf.data());
  message->nlmsg_type = family;
  message->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  message->nlmsg_seq = seq;
  auto* genl = static_cast<genlmsghdr*>(mnl_nlmsg_put_extra_header(message, sizeof(genlmsghdr)));
  genl->cmd = command;
  genl->version = ETHTOOL_GENL_VERSION;
  nlattr* header = mnl_attr_nest_start(message, header_attr);
  if (flags != 0) mnl_attr_put_u32(message, ETHTOOL_A_HEADER_FLAGS, flags);
  mnl_attr_nest_end(message, header);
  return message->nlmsg_len;
}

int RunEthtoolDump(const void* data, size_t len, uint8_t reply_command, uint16_t header_attr,
                   const std::function<bool(const EthtoolDumpEntry&)>& on_entry) {
  // Whole messages only: a cut one would read as the dump's end, and libmnl trusts a huge
  // length (sys/netlink_socket.h).
  if (len == 0 || !WholeNetlinkMessages(data, len)) return -EBADMSG;
  const auto* bytes = static_cast<const char*>(data);
  while (len >= sizeof(nlmsghdr)) {
    nlmsghdr header;
    std::memcpy(&header, bytes, sizeof header);
    const auto* message = reinterpret_cast<const nlmsghdr*>(bytes);
    if (header.nlmsg_type == NLMSG_DONE) return 0;
    if (header.nlmsg_type == NLMSG_ERROR) {
      int error = 0;
      if (header.nlmsg_len < NLMSG_HDRLEN + sizeof error) return -EBADMSG;
      std::memcpy(&error, bytes + NLMSG_HDRLEN, sizeof error);
      if (error == 0) return 0;  // an acknowledgement ends it as NLMSG_DONE does
      // The kernel's -errno; anything outside the errno range is no reply of the kernel's.
      if (error > 0 || error < -4095) return -EBADMSG;
      return error;
    }
    if (header.nlmsg_type >= NLMSG_MIN_TYPE) {
      if (header.nlmsg_len < NLMSG_HDRLEN + GENL_HDRLEN) return -EBADMSG;
      genlmsghdr genl;
      std::memcpy(&genl, bytes + NLMSG_HDRLEN, sizeof genl);
      if (genl.cmd != reply_command) return -EBADMSG;
      EthtoolDumpEntry entry{.message = message};
      if (!ReadHeader(message, header_attr, entry) || !on_entry(entry)) return -EBADMSG;
    }
    const size_t step = std::min<size_t>(NLMSG_ALIGN(header.nlmsg_len), len);
    bytes += step;
    len -= step;
  }
  return 1;
}

bool EndsEthtoolDump(const void* data, size_t len) {
  const auto* bytes = static_cast<const char*>(data);
  while (len >= sizeof(nlmsghdr)) {
    nlmsghdr header;
    std::memcpy(&header, bytes, sizeof header);
    if (header.nlmsg_type == NLMSG_DONE || header.nlmsg_type == NLMSG_ERROR) return true;
    if (header.nlmsg_len < sizeof(nlmsghdr) || header.nlmsg_len > len) return true;  // cut
    const size_t step = std::min<size_t>(NLMSG_ALIGN(header.nlmsg_len), len);
    bytes += step;
    len -= step;
  }
  return false;
}

}  // namespace rdmascope::sys
