#include "sys/rdma_netlink.h"

#include <libmnl/libmnl.h>
#include <rdma/rdma_netlink.h>
#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <utility>

#include "core/capture.h"
#include "sys/netlink_capture.h"
#include "sys/netlink_socket.h"

namespace rdmascope::sys {
namespace {

struct KindAttributes {
  RdmaResourceKind kind;
  uint16_t command;
  uint16_t table;
  uint16_t entry;
  uint16_t id;
};

// Which dump command lists a kind, and the nests it comes in (include/uapi/rdma/rdma_netlink.h).
constexpr std::array<KindAttributes, 7> kKinds{{
    {RdmaResourceKind::kPd, RDMA_NLDEV_CMD_RES_PD_GET, RDMA_NLDEV_ATTR_RES_PD,
     RDMA_NLDEV_ATTR_RES_PD_ENTRY, RDMA_NLDEV_ATTR_RES_PDN},
    {RdmaResourceKind::kCq, RDMA_NLDEV_CMD_RES_CQ_GET, RDMA_NLDEV_ATTR_RES_CQ,
     RDMA_NLDEV_ATTR_RES_CQ_ENTRY, RDMA_NLDEV_ATTR_RES_CQN},
    {RdmaResourceKind::kQp, RDMA_NLDEV_CMD_RES_QP_GET, RDMA_NLDEV_ATTR_RES_QP,
     RDMA_NLDEV_ATTR_RES_QP_ENTRY, RDMA_NLDEV_ATTR_RES_LQPN},
    {RdmaResourceKind::kMr, RDMA_NLDEV_CMD_RES_MR_GET, RDMA_NLDEV_ATTR_RES_MR,
     RDMA_NLDEV_ATTR_RES_MR_ENTRY, RDMA_NLDEV_ATTR_RES_MRN},
    {RdmaResourceKind::kSrq, RDMA_NLDEV_CMD_RES_SRQ_GET, RDMA_NLDEV_ATTR_RES_SRQ,
     RDMA_NLDEV_ATTR_RES_SRQ_ENTRY, RDMA_NLDEV_ATTR_RES_SRQN},
    {RdmaResourceKind::kCtx, RDMA_NLDEV_CMD_RES_CTX_GET, RDMA_NLDEV_ATTR_RES_CTX,
     RDMA_NLDEV_ATTR_RES_CTX_ENTRY, RDMA_NLDEV_ATTR_RES_CTXN},
    {RdmaResourceKind::kCmId, RDMA_NLDEV_CMD_RES_CM_ID_GET, RDMA_NLDEV_ATTR_RES_CM_ID,
     RDMA_NLDEV_ATTR_RES_CM_ID_ENTRY, RDMA_NLDEV_ATTR_RES_CM_IDN},
}};

const KindAttributes& AttributesOf(RdmaResourceKind kind) {
  for (const KindAttributes& attributes : kKinds) {
    if (attributes.kind == kind) return attributes;
  }
  return kKinds[0];
}

constexpr uint16_t MessageType(uint16_t command) {
  return RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, command);
}

// A dump may span many buffers; the kernel fills each up to 32 KiB (netlink_dump), and a
// smaller buffer would truncate (libmnl reports ENOSPC).
constexpr size_t kReceiveBufferBytes = 64 * 1024;

// Typed attribute reads that reject a payload of the wrong size instead of reading past it.
std::optional<uint32_t> U32(const nlattr* attr) {
  if (mnl_attr_validate(attr, MNL_TYPE_U32) < 0) return std::nullopt;
  return mnl_attr_get_u32(attr);
}
std::optional<uint64_t> U64(const nlattr* attr) {
  if (mnl_attr_validate(attr, MNL_TYPE_U64) < 0) return std::nullopt;
  return mnl_attr_get_u64(attr);
}
std::optional<uint8_t> U8(const nlattr* attr) {
  if (mnl_attr_validate(attr, MNL_TYPE_U8) < 0) return std::nullopt;
  return mnl_attr_get_u8(attr);
}
std::optional<std::string> String(const nlattr* attr) {
  if (mnl_attr_validate(attr, MNL_TYPE_NUL_STRING) < 0) return std::nullopt;
  return std::string(mnl_attr_get_str(attr));
}

struct ParseState {
  uint32_t seq;
  uint16_t expected_type;
  bool malformed = false;
  // Raw queries
  std::vector<uint8_t>* raw = nullptr;
  // Summary dumps
  std::vector<RdmaDeviceResources>* devices = nullptr;
  // Resource dumps
  const KindAttributes* kind = nullptr;
  std::vector<RdmaResourceEntry>* entries = nullptr;
  // Port dumps
  std::vector<RdmaPortNetdev>* ports = nullptr;
};

int OnSummaryEntry(const nlattr* attr, void* data) {
  auto* pair = static_cast<std::pair<std::optional<std::string>, std::optional<uint64_t>>*>(data);
  if (mnl_attr_get_type(attr) == RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_NAME) pair->first = String(attr);
  if (mnl_attr_get_type(attr) == RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_CURR) pair->second = U64(attr);
  return MNL_CB_OK;
}

int OnSummaryTable(const nlattr* attr, void* data) {
  auto* state = static_cast<ParseState*>(data);
  if (mnl_attr_get_type(attr) != RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY) return MNL_CB_OK;
  std::pair<std::optional<std::string>, std::optional<uint64_t>> pair;
  if (mnl_attr_validate(attr, MNL_TYPE_NESTED) < 0 ||
      mnl_attr_parse_nested(attr, OnSummaryEntry, &pair) < 0 || !pair.first || !pair.second) {
    state->malformed = true;
    return MNL_CB_OK;
  }
  state->devices->back().summary[*pair.first] = *pair.second;
  return MNL_CB_OK;
}

int OnSummaryAttribute(const nlattr* attr, void* data) {
  auto* state = static_cast<ParseState*>(data);
  RdmaDeviceResources& device = state->devices->back();
  switch (mnl_attr_get_type(attr)) {
    case RDMA_NLDEV_ATTR_DEV_INDEX:
      if (const auto index = U32(attr))
        device.index = *index;
      else
        state->malformed = true;
      break;
    case RDMA_NLDEV_ATTR_DEV_NAME:
      if (auto name = String(attr))
        device.name = std::move(*name);
      else
        state->malformed = true;
      break;
    case RDMA_NLDEV_ATTR_RES_SUMMARY:
      if (mnl_attr_validate(attr, MNL_TYPE_NESTED) < 0 ||
          mnl_attr_parse_nested(attr, OnSummaryTable, state) < 0) {
        state->malformed = true;
      }
      break;
  }
  return MNL_CB_OK;
}

int OnEntryAttribute(const nlattr* attr, void* data) {
  auto* entry = static_cast<std::pair<RdmaResourceEntry, const KindAttributes*>*>(data);
  RdmaResourceEntry& out = entry->first;
  const uint16_t type = mnl_attr_get_type(attr);
  if (type == entry->second->id) {
    out.id = U32(attr);
    return MNL_CB_OK;
  }
  switch (type) {
    case RDMA_NLDEV_ATTR_RES_PID:
      out.pid = U32(attr);
      break;
    case RDMA_NLDEV_ATTR_RES_PDN:  // a PD's own pdn is its id, taken above
      out.pdn = U32(attr);
      break;
    case RDMA_NLDEV_ATTR_RES_CTXN:
      out.ctxn = U32(attr);
      break;
    case RDMA_NLDEV_ATTR_RES_KERN_NAME:
      if (auto name = String(attr)) out.kernel_name = std::move(*name);
      break;
    case RDMA_NLDEV_ATTR_RES_CQE:
      out.cq_entries = U32(attr);
      break;
    case RDMA_NLDEV_ATTR_RES_MRLEN:
      out.mr_length = U64(attr);
      break;
    case RDMA_NLDEV_ATTR_RES_LKEY:
      out.mr_lkey = U32(attr);
      break;
    case RDMA_NLDEV_ATTR_RES_TYPE:
      out.qp_type = U8(attr);
      break;
    case RDMA_NLDEV_ATTR_RES_STATE:
      out.qp_state = U8(attr);
      break;
  }
  return MNL_CB_OK;
}

int OnResourceTable(const nlattr* attr, void* data) {
  auto* state = static_cast<ParseState*>(data);
  if (mnl_attr_get_type(attr) != state->kind->entry) return MNL_CB_OK;
  std::pair<RdmaResourceEntry, const KindAttributes*> entry{{.kind = state->kind->kind},
                                                            state->kind};
  if (mnl_attr_validate(attr, MNL_TYPE_NESTED) < 0 ||
      mnl_attr_parse_nested(attr, OnEntryAttribute, &entry) < 0) {
    state->malformed = true;
    return MNL_CB_OK;
  }
  state->entries->push_back(std::move(entry.first));
  return MNL_CB_OK;
}

int OnResourceAttribute(const nlattr* attr, void* data) {
  auto* state = static_cast<ParseState*>(data);
  if (mnl_attr_get_type(attr) != state->kind->table) return MNL_CB_OK;
  if (mnl_attr_validate(attr, MNL_TYPE_NESTED) < 0 ||
      mnl_attr_parse_nested(attr, OnResourceTable, state) < 0) {
    state->malformed = true;
  }
  return MNL_CB_OK;
}

int OnRawAttribute(const nlattr* attr, void* data) {
  auto* state = static_cast<ParseState*>(data);
  if (mnl_attr_get_type(attr) != RDMA_NLDEV_ATTR_RES_RAW) return MNL_CB_OK;
  const auto* payload = static_cast<const uint8_t*>(mnl_attr_get_payload(attr));
  state->raw->assign(payload, payload + mnl_attr_get_payload_len(attr));
  return MNL_CB_OK;
}

struct PortAttributes {
  RdmaPortNetdev port;
  bool has_port = false;
  bool malformed = false;
};

int OnPortAttribute(const nlattr* attr, void* data) {
  auto* out = static_cast<PortAttributes*>(data);
  switch (mnl_attr_get_type(attr)) {
    case RDMA_NLDEV_ATTR_DEV_INDEX:
      if (const auto index = U32(attr))
        out->port.device_index = *index;
      else
        out->malformed = true;
      break;
    case RDMA_NLDEV_ATTR_DEV_NAME:
      if (auto name = String(attr))
        out->port.device = std::move(*name);
      else
        out->malformed = true;
      break;
    case RDMA_NLDEV_ATTR_PORT_INDEX:
      if (const auto port = U32(attr)) {
        out->port.port = *port;
        out->has_port = true;
      } else {
        out->malformed = true;
      }
      break;
    case RDMA_NLDEV_ATTR_NDEV_NAME:
      if (auto name = String(attr))
        out->port.netdev = std::move(*name);
      else
        out->malformed = true;
      break;
  }
  return MNL_CB_OK;
}

int OnMessage(const nlmsghdr* message, void* data) {
  auto* state = static_cast<ParseState*>(data);
  if (message->nlmsg_type != state->expected_type) {
    state->malformed = true;
    return MNL_CB_ERROR;
  }
  if (state->raw != nullptr) {
    if (mnl_attr_parse(message, 0, OnRawAttribute, state) < 0) state->malformed = true;
  } else if (state->ports != nullptr) {
    PortAttributes port;
    if (mnl_attr_parse(message, 0, OnPortAttribute, &port) < 0 || port.malformed ||
        !port.has_port) {
      state->malformed = true;
    } else {
      state->ports->push_back(std::move(port.port));
    }
  } else if (state->devices != nullptr) {
    state->devices->emplace_back();
    if (mnl_attr_parse(message, 0, OnSummaryAttribute, state) < 0) state->malformed = true;
  } else if (mnl_attr_parse(message, 0, OnResourceAttribute, state) < 0) {
    state->malformed = true;
  }
  return state->malformed ? MNL_CB_ERROR : MNL_CB_OK;
}

int Run(const void* data, size_t len, ParseState& state) {
  // Whole messages only: libmnl stops quietly at a truncated one, which would read as the end
  // of the dump, and trusts a huge length (WholeNetlinkMessages).
  if (len == 0 || !WholeNetlinkMessages(data, len)) return -EBADMSG;
  errno = 0;
  const int ret = mnl_cb_run(data, len, state.seq, 0, OnMessage, &state);
  if (ret >= MNL_CB_STOP) return ret;  // 1 (MNL_CB_OK): more to come, 0: NLMSG_DONE
  if (state.malformed) return -EBADMSG;
  // NLMSG_ERROR from the kernel (libmnl sets errno), or a reply to another request (EPROTO).
  // The error code is the reply's own: one outside the errno range (INT_MIN, found by fuzzing,
  // cannot even be negated) is a malformed reply.
  return -ReplyErrno(errno);
}

size_t BuildDump(uint16_t command, std::optional<uint32_t> device_index, uint32_t seq,
                 std::vector<char>& buf) {
  buf.assign(MNL_SOCKET_BUFFER_SIZE, '\0');
  nlmsghdr* message = mnl_nlmsg_put_header(buf.data());
  message->nlmsg_type = MessageType(command);
  message->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  message->nlmsg_seq = seq;
  if (device_index) mnl_attr_put_u32(message, RDMA_NLDEV_ATTR_DEV_INDEX, *device_index);
  return message->nlmsg_len;
}

}  // namespace

std::string_view ResourceKindName(RdmaResourceKind kind) {
  switch (kind) {
    case RdmaResourceKind::kPd:
      return "pd";
    case RdmaResourceKind::kCq:
      return "cq";
    case RdmaResourceKind::kQp:
      return "qp";
    case RdmaResourceKind::kMr:
      return "mr";
    case RdmaResourceKind::kSrq:
      return "srq";
    case RdmaResourceKind::kCtx:
      return "ctx";
    case RdmaResourceKind::kCmId:
      return "cm_id";
  }
  return "unknown";
}

std::string QpTypeName(uint8_t type) {
  // enum ib_qp_type (include/rdma/ib_verbs.h); 7 is reserved.
  static constexpr std::array<std::string_view, 11> kNames = {
      "SMI",           "GSI", "RC",         "UC",      "UD",     "RAW_IPV6",
      "RAW_ETHERTYPE", "",    "RAW_PACKET", "XRC_INI", "XRC_TGT"};
  if (type < kNames.size() && !kNames[type].empty()) return std::string(kNames[type]);
  if (type == 0xff) return "DRIVER";
  return "UNKNOWN_" + std::to_string(type);
}

std::string QpStateName(uint8_t state) {
  // enum ib_qp_state
  static constexpr std::array<std::string_view, 7> kNames = {"RESET", "INIT", "RTR", "RTS",
                                                             "SQD",   "SQE",  "ERR"};
  if (state < kNames.size()) return std::string(kNames[state]);
  return "UNKNOWN_" + std::to_string(state);
}

size_t BuildResourceSummaryDump(uint32_t seq, std::vector<char>& buf) {
  return BuildDump(RDMA_NLDEV_CMD_RES_GET, std::nullopt, seq, buf);
}

size_t BuildResourceDump(RdmaResourceKind kind, uint32_t device_index, uint32_t seq,
                         std::vector<char>& buf) {
  return BuildDump(AttributesOf(kind).command, device_index, seq, buf);
}

size_t BuildDeviceDump(uint32_t seq, std::vector<char>& buf) {
  return BuildDump(RDMA_NLDEV_CMD_GET, std::nullopt, seq, buf);
}

size_t BuildPortDump(uint32_t device_index, uint32_t seq, std::vector<char>& buf) {
  return BuildDump(RDMA_NLDEV_CMD_PORT_GET, device_index, seq, buf);
}

size_t BuildRawCqQuery(uint32_t device_index, uint32_t cqn, uint32_t seq, std::vector<char>& buf) {
  buf.assign(MNL_SOCKET_BUFFER_SIZE, '\0');
  nlmsghdr* message = mnl_nlmsg_put_header(buf.data());
  message->nlmsg_type = MessageType(RDMA_NLDEV_CMD_RES_CQ_GET_RAW);
  message->nlmsg_flags = NLM_F_REQUEST;
  message->nlmsg_seq = seq;
  mnl_attr_put_u32(message, RDMA_NLDEV_ATTR_DEV_INDEX, device_index);
  mnl_attr_put_u32(message, RDMA_NLDEV_ATTR_RES_CQN, cqn);
  return message->nlmsg_len;
}

int ParseRawCqReply(const void* data, size_t len, uint32_t seq, std::vector<uint8_t>& raw) {
  ParseState state{.seq = seq, .expected_type = MessageType(RDMA_NLDEV_CMD_RES_CQ_GET_RAW)};
  state.raw = &raw;
  const int ret = Run(data, len, state);
  // A single reply, no NLMSG_DONE: one message parsed is the end.
  return ret > 0 ? 0 : ret;
}

int ParseResourceSummaryReply(const void* data, size_t len, uint32_t seq,
                              std::vector<RdmaDeviceResources>& devices) {
  ParseState state{.seq = seq, .expected_type = MessageType(RDMA_NLDEV_CMD_RES_GET)};
  state.devices = &devices;
  return Run(data, len, state);
}

int ParseResourceReply(const void* data, size_t len, uint32_t seq, RdmaResourceKind kind,
                       std::vector<RdmaResourceEntry>& entries) {
  const KindAttributes& attributes = AttributesOf(kind);
  ParseState state{.seq = seq, .expected_type = MessageType(attributes.command)};
  state.kind = &attributes;
  state.entries = &entries;
  return Run(data, len, state);
}

int ParseDeviceReply(const void* data, size_t len, uint32_t seq,
                     std::vector<RdmaDeviceResources>& devices) {
  ParseState state{.seq = seq, .expected_type = MessageType(RDMA_NLDEV_CMD_GET)};
  state.devices = &devices;
  return Run(data, len, state);
}

int ParsePortReply(const void* data, size_t len, uint32_t seq, std::vector<RdmaPortNetdev>& ports) {
  ParseState state{.seq = seq, .expected_type = MessageType(RDMA_NLDEV_CMD_PORT_GET)};
  state.ports = &ports;
  return Run(data, len, state);
}

std::expected<RdmaNetlink, int> RdmaNetlink::Open() {
  // Replaying a capture: no socket, the replies come from it (sys/netlink_capture.h).
  if (const capture::Session* session = capture::Active(); session && session->replaying()) {
    if (const int error = ReplayNetlinkOpen(*session, NetlinkFamily::kRdma); error != 0) {
      return std::unexpected(error);
    }
    return RdmaNetlink(nullptr);
  }
  const auto socket = OpenNetlinkSocket(NETLINK_RDMA);
  if (!socket) {
    RecordNetlinkOpen(NetlinkFamily::kRdma, socket.error());
    return std::unexpected(socket.error());
  }
  return RdmaNetlink(*socket);
}

RdmaNetlink::RdmaNetlink(RdmaNetlink&& other) noexcept
    : socket_(std::exchange(other.socket_, nullptr)), seq_(other.seq_) {}

RdmaNetlink::~RdmaNetlink() {
  if (socket_ != nullptr) mnl_socket_close(socket_);
}

template <typename Parse>
int RdmaNetlink::RunDump(const std::vector<char>& request, size_t len, Parse&& parse) {
  if (socket_ == nullptr) [[unlikely]] {
    nlmsghdr header;
    std::memcpy(&header, request.data(), sizeof header);
    const auto bytes = ReplayNetlink(*capture::Active(), NetlinkFamily::kRdma, request.data(), len,
                                     header.nlmsg_seq);
    if (!bytes) return -bytes.error();
    const int ret = parse(bytes->data(), bytes->size());
    // The recording ended before the dump's NLMSG_DONE: what a receive timeout gives.
    return ret > 0 ? -EAGAIN : ret;
  }
  NetlinkRecording recording(NetlinkFamily::kRdma, request.data(), len);
  if (mnl_socket_sendto(socket_, request.data(), len) < 0) {
    const int error = errno;
    recording.Finish(error);
    return -error;
  }
  std::vector<char> reply(kReceiveBufferBytes);
  for (;;) {
    const ssize_t n = mnl_socket_recvfrom(socket_, reply.data(), reply.size());
    if (n < 0) {
      const int error = errno;
      recording.Finish(error);
      return -error;
    }
    recording.Received(reply.data(), static_cast<size_t>(n));
    const int ret = parse(reply.data(), static_cast<size_t>(n));
    if (ret <= 0) {
      recording.Finish(0);
      return ret;
    }
  }
}

std::expected<std::vector<RdmaDeviceResources>, int> RdmaNetlink::DumpAll(
    size_t max_raw_cqs, std::span<const RdmaResourceKind> kinds) {
  std::vector<char> request;
  std::vector<RdmaDeviceResources> devices;
  uint32_t seq = seq_++;
  const int summary =
      RunDump(request, BuildResourceSummaryDump(seq, request), [&](const void* data, size_t len) {
        return ParseResourceSummaryReply(data, len, seq, devices);
      });
  if (summary < 0) return std::unexpected(-summary);
  for (RdmaDeviceResources& device : devices) {
    for (const RdmaResourceKind kind : kinds) {
      seq = seq_++;
      std::vector<RdmaResourceEntry> entries;
      const int ret = RunDump(request, BuildResourceDump(kind, device.index, seq, request),
                              [&](const void* data, size_t len) {
                                return ParseResourceReply(data, len, seq, kind, entries);
                              });
      if (ret < 0) {
        // Older kernels do not track every kind (SRQ and ctx came in 5.x): keep the others.
        // After a timeout or a malformed dump the socket may hold stale replies; the sequence
        // check skips none of them, so stop here rather than misread the next dump.
        device.errors.push_back(std::string(ResourceKindName(kind)) + ": " + std::strerror(-ret));
        device.unlisted.push_back(kind);
        if (ret == -EAGAIN || ret == -EBADMSG || ret == -EPROTO) return std::unexpected(-ret);
        continue;
      }
      device.entries.insert(device.entries.end(), std::make_move_iterator(entries.begin()),
                            std::make_move_iterator(entries.end()));
    }
    for (RdmaResourceEntry& entry : device.entries) {
      if (max_raw_cqs == 0) break;
      if (entry.kind != RdmaResourceKind::kCq || !entry.pid || !entry.id) continue;
      --max_raw_cqs;
      seq = seq_++;
      const int ret = RunDump(
          request, BuildRawCqQuery(device.index, *entry.id, seq, request),
          [&](const void* data, size_t len) { return ParseRawCqReply(data, len, seq, entry.raw); });
      if (ret < 0) {
        // EINVAL/EOPNOTSUPP: the driver has no raw CQ dump (rxe, irdma...); EPERM: no
        // CAP_NET_ADMIN. Either way the rest of this device's CQs would answer the same.
        if (ret != -EINVAL && ret != -EOPNOTSUPP) {
          device.errors.push_back(std::string("raw cq: ") + std::strerror(-ret));
        }
        if (ret == -EAGAIN || ret == -EBADMSG || ret == -EPROTO) return std::unexpected(-ret);
        break;
      }
    }
  }
  return devices;
}

std::expected<std::vector<RdmaPortNetdev>, int> RdmaNetlink::DumpPorts() {
  std::vector<char> request;
  std::vector<RdmaDeviceResources> devices;
  uint32_t seq = seq_++;
  const int listed = RunDump(
      request, BuildDeviceDump(seq, request),
      [&](const void* data, size_t len) { return ParseDeviceReply(data, len, seq, devices); });
  if (listed < 0) return std::unexpected(-listed);
  std::vector<RdmaPortNetdev> ports;
  for (const RdmaDeviceResources& device : devices) {
    seq = seq_++;
    const int ret = RunDump(
        request, BuildPortDump(device.index, seq, request),
        [&](const void* data, size_t len) { return ParsePortReply(data, len, seq, ports); });
    // A device unregistered between the two dumps answers ENODEV: skip it. Anything else
    // leaves the socket in an unknown state (see DumpAll).
    if (ret == -ENODEV) continue;
    if (ret < 0) return std::unexpected(-ret);
  }
  return ports;
}

}  // namespace rdmascope::sys
