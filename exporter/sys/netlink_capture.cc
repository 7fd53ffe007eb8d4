#include "sys/netlink_capture.h"

#include <linux/dcbnl.h>
#include <linux/ethtool_netlink.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <rdma/rdma_netlink.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/capture.h"
#include "sys/rdma_netlink_redact.h"

namespace rdmascope::sys {
namespace {

// Nested attributes are decoded this deep at most: a hostile reply cannot recurse us away.
constexpr int kMaxJsonDepth = 8;

struct Attribute {
  uint16_t type;  // without NLA_F_NESTED / NLA_F_NET_BYTEORDER
  std::string_view payload;
};

// The attributes of `bytes`, as far as they are whole; nullopt if one is malformed.
std::optional<std::vector<Attribute>> Attributes(std::string_view bytes) {
  std::vector<Attribute> out;
  while (!bytes.empty()) {
    if (bytes.size() < sizeof(nlattr)) return std::nullopt;
    nlattr header;
    std::memcpy(&header, bytes.data(), sizeof header);
    if (header.nla_len < sizeof(nlattr) || header.nla_len > bytes.size()) return std::nullopt;
    out.push_back({static_cast<uint16_t>(header.nla_type & NLA_TYPE_MASK),
                   bytes.substr(sizeof(nlattr), header.nla_len - sizeof(nlattr))});
    bytes.remove_prefix(std::min<size_t>(NLA_ALIGN(header.nla_len), bytes.size()));
  }
  return out;
}

const char* RdmaCommandName(uint32_t op) {
  switch (op) {
    case RDMA_NLDEV_CMD_GET:
      return "get";
    case RDMA_NLDEV_CMD_PORT_GET:
      return "port_get";
    case RDMA_NLDEV_CMD_RES_GET:
      return "res_get";
    case RDMA_NLDEV_CMD_RES_QP_GET:
      return "res_qp_get";
    case RDMA_NLDEV_CMD_RES_CM_ID_GET:
      return "res_cm_id_get";
    case RDMA_NLDEV_CMD_RES_CQ_GET:
      return "res_cq_get";
    case RDMA_NLDEV_CMD_RES_MR_GET:
      return "res_mr_get";
    case RDMA_NLDEV_CMD_RES_PD_GET:
      return "res_pd_get";
    case RDMA_NLDEV_CMD_STAT_GET:
      return "stat_get";
    case RDMA_NLDEV_CMD_RES_CQ_GET_RAW:
      return "res_cq_get_raw";
    case RDMA_NLDEV_CMD_RES_CTX_GET:
      return "res_ctx_get";
    case RDMA_NLDEV_CMD_RES_SRQ_GET:
      return "res_srq_get";
    default:
      return nullptr;
  }
}

const char* RdmaAttributeName(uint16_t type) {
  switch (type) {
    case RDMA_NLDEV_ATTR_DEV_INDEX:
      return "dev";
    case RDMA_NLDEV_ATTR_PORT_INDEX:
      return "port";
    case RDMA_NLDEV_ATTR_RES_CQN:
      return "cqn";
    case RDMA_NLDEV_ATTR_RES_LQPN:
      return "lqpn";
    case RDMA_NLDEV_ATTR_RES_MRN:
      return "mrn";
    default:
      return nullptr;
  }
}

bool PathComponent(std::string_view name) {
  return !name.empty() && name.size() < IFNAMSIZ && name != "." && name != ".." &&
         name.find('/') == std::string_view::npos && name.find('\0') == std::string_view::npos;
}

nlohmann::ordered_json DecodeAttributes(std::string_view bytes, int depth) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  const auto attributes = Attributes(bytes);
  if (!attributes) return list;
  for (const Attribute& attribute : *attributes) {
    nlohmann::ordered_json entry;
    entry["type"] = attribute.type;
    entry["length"] = attribute.payload.size();
    const std::string_view p = attribute.payload;
    if (p.size() == 4) {
      uint32_t value;
      std::memcpy(&value, p.data(), 4);
      entry["u32"] = value;
    } else if (p.size() == 8) {
      uint64_t value;
      std::memcpy(&value, p.data(), 8);
      entry["u64"] = value;
    } else if (p.size() == 1) {
      entry["u8"] = static_cast<uint8_t>(p[0]);
    }
    // A NUL-terminated printable payload reads as a string (device and interface names).
    if (!p.empty() && p.back() == '\0' && p.size() > 1 &&
        std::all_of(p.begin(), p.end() - 1, [](char c) { return c >= 0x20 && c < 0x7f; })) {
      entry["string"] = std::string(p.substr(0, p.size() - 1));
    } else if (depth < kMaxJsonDepth && p.size() >= sizeof(nlattr) && Attributes(p)) {
      entry["nested"] = DecodeAttributes(p, depth + 1);
    }
    static constexpr char kHex[] = "0123456789abcdef";
    std::string hex;
    for (const char c : p.substr(0, 256)) {
      hex += kHex[static_cast<uint8_t>(c) >> 4];
      hex += kHex[static_cast<uint8_t>(c) & 15];
    }
    entry["hex"] = hex;
    list.push_back(std::move(entry));
  }
  return list;
}

std::string CapturePath(const std::string& key) { return "netlink/" + key + ".bin"; }

// The capture directory of a family's replies (netlink/<name>/...).
std::string FamilyName(NetlinkFamily family) {
  switch (family) {
    case NetlinkFamily::kRdma:
      return "rdma";
    case NetlinkFamily::kDcb:
      return "dcb";
    case NetlinkFamily::kEthtool:
      return "ethtool";
  }
  return "unknown";
}

// The family header after nlmsghdr: dcbmsg, genlmsghdr, none for RDMA's nldev.
size_t FamilyHeaderBytes(NetlinkFamily family) {
  switch (family) {
    case NetlinkFamily::kDcb:
      return sizeof(dcbmsg);
    case NetlinkFamily::kEthtool:
      return GENL_HDRLEN;
    case NetlinkFamily::kRdma:
      break;
  }
  return 0;
}

// ethtool netlink requests recorded (include/uapi/linux/ethtool_netlink.h); others "cmdN".
const char* EthtoolCommandName(uint8_t cmd) {
  switch (cmd) {
    case ETHTOOL_MSG_LINKSTATE_GET:
      return "linkstate_get";
    default:
      return nullptr;
  }
}

// "ethtool/linkstate_get-eth0": the command, and the interface its request header names (every
// ethtool message's attribute 1 is its ETHTOOL_A_*_HEADER nest).
std::expected<std::string, int> EthtoolRequestKey(std::string_view body) {
  if (body.size() < GENL_HDRLEN) return std::unexpected(EINVAL);
  genlmsghdr genl;
  std::memcpy(&genl, body.data(), sizeof genl);
  const char* name = EthtoolCommandName(genl.cmd);
  std::string key =
      "ethtool/" + (name != nullptr ? std::string(name) : "cmd" + std::to_string(genl.cmd));
  const auto attributes = Attributes(body.substr(GENL_HDRLEN));
  if (!attributes) return std::unexpected(EINVAL);
  for (const Attribute& attribute : *attributes) {
    if (attribute.type != 1) continue;
    const auto nested = Attributes(attribute.payload);
    if (!nested) return std::unexpected(EINVAL);
    for (const Attribute& field : *nested) {
      if (field.type != ETHTOOL_A_HEADER_DEV_NAME) continue;
      const std::string_view ifname(field.payload.data(),
                                    strnlen(field.payload.data(), field.payload.size()));
      if (!PathComponent(ifname)) return std::unexpected(EINVAL);
      key += "-" + std::string(ifname);
    }
  }
  return key;
}

}  // namespace

std::expected<std::string, int> NetlinkRequestKey(NetlinkFamily family, const void* request,
                                                  size_t len) {
  const std::string_view bytes(static_cast<const char*>(request), len);
  if (bytes.size() < NLMSG_HDRLEN) return std::unexpected(EINVAL);
  nlmsghdr header;
  std::memcpy(&header, bytes.data(), sizeof header);
  if (header.nlmsg_len < NLMSG_HDRLEN || header.nlmsg_len > bytes.size()) {
    return std::unexpected(EINVAL);
  }
  const std::string_view body = bytes.substr(NLMSG_HDRLEN, header.nlmsg_len - NLMSG_HDRLEN);
  if (family == NetlinkFamily::kEthtool) return EthtoolRequestKey(body);
  if (family == NetlinkFamily::kDcb) {
    if (header.nlmsg_type != RTM_GETDCB || body.size() < sizeof(dcbmsg)) {
      return std::unexpected(EINVAL);
    }
    dcbmsg dcb;
    std::memcpy(&dcb, body.data(), sizeof dcb);
    std::string key =
        dcb.cmd == DCB_CMD_IEEE_GET ? "dcb/ieee_get" : "dcb/cmd" + std::to_string(dcb.cmd);
    const auto attributes = Attributes(body.substr(NLMSG_ALIGN(sizeof(dcbmsg))));
    if (!attributes) return std::unexpected(EINVAL);
    for (const Attribute& attribute : *attributes) {
      if (attribute.type != DCB_ATTR_IFNAME) continue;
      const std::string_view name(attribute.payload.data(),
                                  strnlen(attribute.payload.data(), attribute.payload.size()));
      if (!PathComponent(name)) return std::unexpected(EINVAL);
      key += "-" + std::string(name);
    }
    return key;
  }
  if ((header.nlmsg_type >> 10) != RDMA_NL_NLDEV) return std::unexpected(EINVAL);
  const uint32_t op = header.nlmsg_type & ((1U << 10) - 1);
  const char* name = RdmaCommandName(op);
  std::string key = "rdma/" + (name != nullptr ? std::string(name) : "op" + std::to_string(op));
  const auto attributes = Attributes(body);
  if (!attributes) return std::unexpected(EINVAL);
  for (const Attribute& attribute : *attributes) {
    if (attribute.payload.size() != 4) continue;
    uint32_t value;
    std::memcpy(&value, attribute.payload.data(), 4);
    const char* attr = RdmaAttributeName(attribute.type);
    key += "-" + (attr != nullptr ? std::string(attr) : "attr" + std::to_string(attribute.type)) +
           std::to_string(value);
  }
  return key;
}

std::string DecodeNetlinkJson(std::string_view bytes, size_t extra_header) {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  while (bytes.size() >= sizeof(nlmsghdr)) {
    nlmsghdr header;
    std::memcpy(&header, bytes.data(), sizeof header);
    if (header.nlmsg_len < sizeof(nlmsghdr) || header.nlmsg_len > bytes.size()) {
      messages.push_back(
          {{"malformed", "header length " + std::to_string(header.nlmsg_len) + " past the " +
                             std::to_string(bytes.size()) + " bytes left"}});
      break;
    }
    nlohmann::ordered_json message;
    message["type"] = header.nlmsg_type;
    if (header.nlmsg_type >= (RDMA_NL_NLDEV << 10) && extra_header == 0) {
      const uint32_t op = header.nlmsg_type & ((1U << 10) - 1);
      if (const char* name = RdmaCommandName(op)) message["command"] = name;
    }
    message["flags"] = header.nlmsg_flags;
    message["seq"] = header.nlmsg_seq;
    message["pid"] = header.nlmsg_pid;
    const std::string_view body = bytes.substr(NLMSG_HDRLEN, header.nlmsg_len - NLMSG_HDRLEN);
    if (header.nlmsg_type == NLMSG_DONE) {
      message["done"] = true;
    } else if (header.nlmsg_type == NLMSG_ERROR && body.size() >= sizeof(int)) {
      int error;
      std::memcpy(&error, body.data(), sizeof error);
      message["error"] = error == 0 ? "0 (ack)" : capture::ErrnoName(-error);
    } else if (body.size() >= extra_header) {
      message["attributes"] = DecodeAttributes(body.substr(NLMSG_ALIGN(extra_header)), 0);
    }
    messages.push_back(std::move(message));
    bytes.remove_prefix(std::min<size_t>(NLMSG_ALIGN(header.nlmsg_len), bytes.size()));
  }
  return messages.dump(1) + "\n";
}

void RewriteNetlinkHeaders(std::string& bytes, uint32_t seq, uint32_t portid) {
  size_t offset = 0;
  while (bytes.size() - offset >= sizeof(nlmsghdr)) {
    nlmsghdr header;
    std::memcpy(&header, bytes.data() + offset, sizeof header);
    if (header.nlmsg_len < sizeof(nlmsghdr) || header.nlmsg_len > bytes.size() - offset) return;
    header.nlmsg_seq = seq;
    header.nlmsg_pid = portid;
    std::memcpy(bytes.data() + offset, &header, sizeof header);
    offset += std::min<size_t>(NLMSG_ALIGN(header.nlmsg_len), bytes.size() - offset);
  }
}

void RecordNetlinkOpen(NetlinkFamily family, int error) {
  capture::Session* session = capture::Active();
  if (session == nullptr || session->writer() == nullptr) return;
  const std::string name = FamilyName(family);
  session->writer()->Errno("netlink/" + name + "/socket", error);
  session->writer()->Missed("netlink " + name + " socket", capture::ErrnoName(error));
}

int ReplayNetlinkOpen(const capture::Session& session, NetlinkFamily family) {
  const std::string name = FamilyName(family);
  const auto stored = session.reader()->ReadFile(session.sample(), "netlink/" + name + "/socket",
                                                 /*max_bytes=*/0);
  // Nothing stored: the socket opened. A stored errno is the host's refusal.
  return !stored && stored.error() != ENOENT && stored.error() != EFBIG ? stored.error() : 0;
}

NetlinkRecording::NetlinkRecording(NetlinkFamily family, const void* request, size_t len)
    : family_(family) {
  const capture::Session* session = capture::Active();
  if (session == nullptr || session->writer() == nullptr) return;
  if (auto key = NetlinkRequestKey(family, request, len)) key_ = std::move(*key);
}

void NetlinkRecording::Finish(int error) {
  if (!active()) return;
  capture::Writer* writer = capture::Active()->writer();
  const std::string path = CapturePath(key_);
  if (bytes_.empty() && error != 0) {
    writer->Errno(path, error);
    writer->Missed("netlink " + key_, capture::ErrnoName(error));
  } else {
    if (writer->redactor() != nullptr && family_ == NetlinkFamily::kRdma) {
      // --redact: the identifying attributes rewritten in place; a reply that cannot be walked
      // is not kept rather than kept as it came.
      auto redacted = RedactRdmaNetlink(*writer->redactor(), bytes_);
      if (!redacted) {
        writer->Errno(path, EIO);
        writer->Missed("netlink " + key_, "not whole netlink messages: not kept under --redact");
        key_.clear();
        bytes_.clear();
        return;
      }
      bytes_ = std::move(*redacted);
    }
    writer->File(path, bytes_);
    writer->File("netlink/" + key_ + ".json",
                 DecodeNetlinkJson(bytes_, FamilyHeaderBytes(family_)));
  }
  key_.clear();
  bytes_.clear();
}

std::expected<std::string, int> ReplayNetlink(const capture::Session& session, NetlinkFamily family,
                                              const void* request, size_t len, uint32_t seq) {
  const auto key = NetlinkRequestKey(family, request, len);
  if (!key) return std::unexpected(key.error());
  auto bytes =
      session.reader()->ReadFile(session.sample(), CapturePath(*key), kMaxNetlinkReplyBytes);
  if (!bytes) return bytes;
  // The parsers pass port id 0 to libmnl (not checked); the sequence number is theirs.
  RewriteNetlinkHeaders(*bytes, seq, 0);
  return bytes;
}

}  // namespace rdmascope::sys
