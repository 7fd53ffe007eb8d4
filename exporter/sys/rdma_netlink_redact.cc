#include "sys/rdma_netlink_redact.h"

#include <linux/netlink.h>
#include <netinet/in.h>
#include <rdma/rdma_netlink.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>

#include "sys/netlink_socket.h"

namespace rdmascope::sys {
namespace {

// AF_IB (include/linux/socket.h), absent from glibc's headers: its sockaddr_ib holds the GID
// 8 bytes in (include/rdma/ib.h: family, pkey, flowinfo, then sib_addr).
constexpr uint16_t kAfIb = 27;
constexpr uint64_t kDefaultSubnetPrefix = 0xfe80000000000000ULL;

// The nldev attributes that are tables of attributes (nla_nest_start_noflag in
// drivers/infiniband/core/nldev.c: the kernel does not set NLA_F_NESTED on them).
bool Nested(uint16_t type) {
  switch (type) {
    case RDMA_NLDEV_ATTR_RES_SUMMARY:
    case RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY:
    case RDMA_NLDEV_ATTR_RES_QP:
    case RDMA_NLDEV_ATTR_RES_QP_ENTRY:
    case RDMA_NLDEV_ATTR_RES_CM_ID:
    case RDMA_NLDEV_ATTR_RES_CM_ID_ENTRY:
    case RDMA_NLDEV_ATTR_RES_CQ:
    case RDMA_NLDEV_ATTR_RES_CQ_ENTRY:
    case RDMA_NLDEV_ATTR_RES_MR:
    case RDMA_NLDEV_ATTR_RES_MR_ENTRY:
    case RDMA_NLDEV_ATTR_RES_PD:
    case RDMA_NLDEV_ATTR_RES_PD_ENTRY:
    case RDMA_NLDEV_ATTR_DRIVER:
    case RDMA_NLDEV_ATTR_DRIVER_ENTRY:
    case RDMA_NLDEV_ATTR_STAT_COUNTER:
    case RDMA_NLDEV_ATTR_STAT_COUNTER_ENTRY:
    case RDMA_NLDEV_ATTR_STAT_HWCOUNTERS:
    case RDMA_NLDEV_ATTR_STAT_HWCOUNTER_ENTRY:
    case RDMA_NLDEV_ATTR_RES_CTX:
    case RDMA_NLDEV_ATTR_RES_CTX_ENTRY:
    case RDMA_NLDEV_ATTR_RES_SRQ:
    case RDMA_NLDEV_ATTR_RES_SRQ_ENTRY:
      return true;
    default:
      return false;
  }
}

// nla_put_u64_64bit writes the host-order number (nldev: be64_to_cpu of the GUID).
void RedactGuid(const redact::Redactor& redactor, uint8_t* payload, size_t len, bool prefix) {
  if (len != sizeof(uint64_t)) return;
  uint64_t value;
  std::memcpy(&value, payload, sizeof value);
  if (prefix && value == kDefaultSubnetPrefix) return;  // every subnet's default: nobody's
  value = redactor.Guid(value);
  std::memcpy(payload, &value, sizeof value);
}

void RedactSockaddr(const redact::Redactor& redactor, uint8_t* payload, size_t len) {
  uint16_t family;
  if (len < sizeof family) return;
  std::memcpy(&family, payload, sizeof family);
  if (family == AF_INET && len >= offsetof(sockaddr_in, sin_addr) + 4) {
    redactor.Ipv4Bytes(std::span<uint8_t, 4>(payload + offsetof(sockaddr_in, sin_addr), 4));
  } else if (family == AF_INET6 && len >= offsetof(sockaddr_in6, sin6_addr) + 16) {
    redactor.GidBytes(std::span<uint8_t, 16>(payload + offsetof(sockaddr_in6, sin6_addr), 16));
  } else if (family == kAfIb && len >= 8 + 16) {
    redactor.GidBytes(std::span<uint8_t, 16>(payload + 8, 16));
  }
}

// Redacts the attributes in [data, data + len); false when one runs past the end.
bool RedactAttributes(const redact::Redactor& redactor, uint8_t* data, size_t len, int depth) {
  if (depth > 8) return false;  // nldev nests four deep at most (stat counter -> qp -> entry)
  while (len >= sizeof(nlattr)) {
    nlattr header;
    std::memcpy(&header, data, sizeof header);
    if (header.nla_len < sizeof(nlattr) || header.nla_len > len) return false;
    uint8_t* payload = data + NLA_HDRLEN;
    const size_t payload_len = header.nla_len - NLA_HDRLEN;
    const uint16_t type = header.nla_type & NLA_TYPE_MASK;
    if (Nested(type) || (header.nla_type & NLA_F_NESTED) != 0) {
      if (!RedactAttributes(redactor, payload, payload_len, depth + 1)) return false;
    } else if (type == RDMA_NLDEV_ATTR_NODE_GUID || type == RDMA_NLDEV_ATTR_SYS_IMAGE_GUID) {
      RedactGuid(redactor, payload, payload_len, false);
    } else if (type == RDMA_NLDEV_ATTR_SUBNET_PREFIX) {
      RedactGuid(redactor, payload, payload_len, true);
    } else if (type == RDMA_NLDEV_ATTR_RES_SRC_ADDR || type == RDMA_NLDEV_ATTR_RES_DST_ADDR) {
      RedactSockaddr(redactor, payload, payload_len);
    }
    const size_t step = std::min<size_t>(NLA_ALIGN(header.nla_len), len);
    data += step;
    len -= step;
  }
  return true;
}

}  // namespace

std::optional<std::string> RedactRdmaNetlink(const redact::Redactor& redactor,
                                             std::string_view bytes) {
  if (!WholeNetlinkMessages(bytes.data(), bytes.size())) return std::nullopt;
  std::string out(bytes);
  auto* data = reinterpret_cast<uint8_t*>(out.data());
  size_t len = out.size();
  while (len > 0) {
    nlmsghdr header;
    std::memcpy(&header, data, sizeof header);
    // Errors and the end of a dump carry no attributes of nldev's.
    if (header.nlmsg_type != NLMSG_ERROR && header.nlmsg_type != NLMSG_DONE &&
        !RedactAttributes(redactor, data + NLMSG_HDRLEN, header.nlmsg_len - NLMSG_HDRLEN, 0)) {
      return std::nullopt;
    }
    const size_t step = std::min<size_t>(NLMSG_ALIGN(header.nlmsg_len), len);
    data += step;
    len -= step;
  }
  return out;
}

}  // namespace rdmascope::sys
