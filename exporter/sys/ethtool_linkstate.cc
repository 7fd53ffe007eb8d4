#include "sys/ethtool_linkstate.h"

#include <libmnl/libmnl.h>
#include <linux/ethtool.h>
#include <linux/ethtool_netlink.h>
#include <linux/genetlink.h>
#include <net/if.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "core/capture.h"
#include "sys/ethtool_netlink.h"
#include "sys/netlink_capture.h"
#include "sys/netlink_socket.h"

namespace rdmascope::sys {
namespace {

// Linux 6.2 (include/uapi/linux/ethtool_netlink.h, "ethtool: add support to get link down
// events counter"): after ETHTOOL_A_LINKSTATE_EXT_SUBSTATE; bookworm's 6.1 headers stop there.
// A u32 (net/ethtool/linkstate.c linkstate_fill_reply: nla_put_u32).
constexpr uint16_t kLinkStateExtDownCount = ETHTOOL_A_LINKSTATE_EXT_SUBSTATE + 1;

// enum ethtool_link_ext_state, include/uapi/linux/ethtool.h. OTP_SPEED_VIOLATION and
// BMC_REQUEST_DOWN are the two bnxt_en's link_down_reason added after MODULE (netdev, "bnxt_en:
// Map link_down_reason to link_ext_state"); bookworm's 6.1 header ends at MODULE.
constexpr std::array<std::string_view, 13> kStates = {
    "autoneg_failure",        // AUTONEG: ethtool prints "Autoneg"; named for what it says
    "link_training_failure",  // LINK_TRAINING_FAILURE
    "link_logical_mismatch",  // LINK_LOGICAL_MISMATCH
    "bad_signal_integrity",   // BAD_SIGNAL_INTEGRITY
    "no_cable",               // NO_CABLE
    "cable_issue",            // CABLE_ISSUE
    "eeprom_issue",           // EEPROM_ISSUE
    "calibration_failure",    // CALIBRATION_FAILURE
    "power_budget_exceeded",  // POWER_BUDGET_EXCEEDED
    "overheat",               // OVERHEAT
    "module",                 // MODULE (Linux 5.16)
    "otp_speed_violation",    // OTP_SPEED_VIOLATION (bnxt_en)
    "bmc_request_down",       // BMC_REQUEST_DOWN (bnxt_en)
};

// The substate enums, by state; index 0 is substate 1 (0 is never sent: the kernel puts the
// attribute only when __link_ext_substate is non-zero).
constexpr std::array<std::string_view, 6> kAutoneg = {
    "no_partner_detected",          "ack_not_received",
    "next_page_exchange_failed",    "no_partner_detected_force_mode",
    "fec_mismatch_during_override", "no_hcd"};
constexpr std::array<std::string_view, 4> kLinkTraining = {
    "kr_frame_lock_not_acquired", "kr_link_inhibit_timeout",
    "kr_link_partner_did_not_set_receiver_ready", "remote_fault"};
constexpr std::array<std::string_view, 5> kLogicalMismatch = {
    "pcs_did_not_acquire_block_lock", "pcs_did_not_acquire_am_lock", "pcs_did_not_get_align_status",
    "fc_fec_is_not_locked", "rs_fec_is_not_locked"};
constexpr std::array<std::string_view, 4> kSignalIntegrity = {
    "large_number_of_physical_errors", "unsupported_rate", "serdes_reference_clock_lost",
    "serdes_alos"};
constexpr std::array<std::string_view, 2> kCableIssue = {"unsupported_cable", "cable_test_failure"};
constexpr std::array<std::string_view, 1> kModule = {"cmis_not_ready"};

template <size_t N>
std::string_view Lookup(const std::array<std::string_view, N>& names, uint8_t substate) {
  return substate >= 1 && substate <= N ? names[substate - 1] : std::string_view("unknown");
}

struct ReplyState {
  LinkStateReading reading;
  bool malformed = false;
};

int OnAttribute(const nlattr* attr, void* data) {
  auto* state = static_cast<ReplyState*>(data);
  const uint16_t type = mnl_attr_get_type(attr);
  // Each attribute's size as the kernel puts it; a wrong one is no reading.
  const auto u8 = [&](std::optional<uint8_t>& out) {
    if (mnl_attr_validate(attr, MNL_TYPE_U8) < 0) return false;
    out = mnl_attr_get_u8(attr);
    return true;
  };
  bool ok = true;
  switch (type) {
    case ETHTOOL_A_LINKSTATE_LINK: {
      std::optional<uint8_t> link;
      ok = u8(link);
      if (ok) state->reading.link = *link != 0;
      break;
    }
    case ETHTOOL_A_LINKSTATE_EXT_STATE:
      ok = u8(state->reading.ext_state);
      break;
    case ETHTOOL_A_LINKSTATE_EXT_SUBSTATE:
      ok = u8(state->reading.ext_substate);
      // The kernel sends a substate only when the driver gave one (linkstate_fill_reply: `if
      // (__link_ext_substate)`): a 0 is no substate, not a named one (link_events_fuzzer).
      if (ok && state->reading.ext_substate == 0) state->reading.ext_substate.reset();
      break;
    case kLinkStateExtDownCount:
      ok = mnl_attr_validate(attr, MNL_TYPE_U32) >= 0;
      if (ok) state->reading.down_count = mnl_attr_get_u32(attr);
      break;
    default:
      break;  // the header, SQI, and what later kernels add
  }
  if (!ok) {
    state->malformed = true;
    return MNL_CB_ERROR;
  }
  return MNL_CB_OK;
}

int OnMessage(const nlmsghdr* message, void* data) {
  if (mnl_attr_parse(message, sizeof(genlmsghdr), OnAttribute, data) < 0) {
    static_cast<ReplyState*>(data)->malformed = true;
    return MNL_CB_ERROR;
  }
  return MNL_CB_OK;
}

}  // namespace

size_t BuildLinkStateRequest(uint16_t family, std::string_view ifname, bool stats, uint32_t seq,
                             std::vector<char>& buf) {
  if (ifname.empty() || ifname.size() >= IFNAMSIZ || ifname.find('\0') != std::string_view::npos) {
    return 0;
  }
  buf.assign(MNL_SOCKET_BUFFER_SIZE, '\0');
  nlmsghdr* message = mnl_nlmsg_put_header(buf.data());
  message->nlmsg_type = family;
  message->nlmsg_flags = NLM_F_REQUEST;
  message->nlmsg_seq = seq;
  auto* genl = static_cast<genlmsghdr*>(mnl_nlmsg_put_extra_header(message, sizeof(genlmsghdr)));
  genl->cmd = ETHTOOL_MSG_LINKSTATE_GET;
  genl->version = ETHTOOL_GENL_VERSION;
  nlattr* header = mnl_attr_nest_start(message, ETHTOOL_A_LINKSTATE_HEADER);
  const std::string name(ifname);
  mnl_attr_put_strz(message, ETHTOOL_A_HEADER_DEV_NAME, name.c_str());
  if (stats) mnl_attr_put_u32(message, ETHTOOL_A_HEADER_FLAGS, ETHTOOL_FLAG_STATS);
  mnl_attr_nest_end(message, header);
  return message->nlmsg_len;
}

std::expected<LinkStateReading, int> ParseLinkStateReply(const void* data, size_t len) {
  if (len == 0 || !WholeNetlinkMessages(data, len)) return std::unexpected(EBADMSG);
  ReplyState state;
  errno = 0;
  if (mnl_cb_run(data, len, 0, 0, OnMessage, &state) < 0) {
    if (state.malformed) return std::unexpected(EBADMSG);
    // An NLMSG_ERROR reply: libmnl sets errno to the kernel's error.
    return std::unexpected(ReplyErrno(errno));
  }
  if (state.malformed) return std::unexpected(EBADMSG);
  return state.reading;
}

std::string_view LinkExtStateName(uint8_t state) {
  return state < kStates.size() ? kStates[state] : std::string_view("unknown");
}

std::string_view LinkExtSubstateName(uint8_t state, uint8_t substate) {
  switch (state) {
    case ETHTOOL_LINK_EXT_STATE_AUTONEG:
      return Lookup(kAutoneg, substate);
    case ETHTOOL_LINK_EXT_STATE_LINK_TRAINING_FAILURE:
      return Lookup(kLinkTraining, substate);
    case ETHTOOL_LINK_EXT_STATE_LINK_LOGICAL_MISMATCH:
      return Lookup(kLogicalMismatch, substate);
    case ETHTOOL_LINK_EXT_STATE_BAD_SIGNAL_INTEGRITY:
      return Lookup(kSignalIntegrity, substate);
    case ETHTOOL_LINK_EXT_STATE_CABLE_ISSUE:
      return Lookup(kCableIssue, substate);
    case ETHTOOL_LINK_EXT_STATE_MODULE:
      return Lookup(kModule, substate);
    default:
      return "unknown";
  }
}

// EthtoolNetlink's LINKSTATE_GET (declared in sys/ethtool_netlink.h): recorded and replayed as
// raw bytes under ethtool/linkstate_get-IF (sys/netlink_capture.h).
std::expected<LinkStateReading, int> EthtoolNetlink::ReadLinkState(std::string_view ifname) {
  const capture::Session* session = capture::Active();
  if (session != nullptr && session->replaying()) {
    std::vector<char> request;
    const uint32_t seq = seq_++;
    const size_t len = BuildLinkStateRequest(family_, ifname, true, seq, request);
    if (len == 0) return std::unexpected(EINVAL);
    const auto bytes = ReplayNetlink(*session, NetlinkFamily::kEthtool, request.data(), len, seq);
    if (!bytes) return std::unexpected(bytes.error());
    return ParseLinkStateReply(bytes->data(), bytes->size());
  }
  for (;;) {
    std::vector<char> request;
    const uint32_t seq = seq_++;
    const bool stats = !linkstate_stats_refused_;
    const size_t len = BuildLinkStateRequest(family_, ifname, stats, seq, request);
    if (len == 0) return std::unexpected(EINVAL);
    const auto reply = Exchange(request, len, seq);
    auto parsed = reply ? ParseLinkStateReply(reply->data(), reply->size())
                        : std::expected<LinkStateReading, int>(std::unexpected(reply.error()));
    // A kernel before 6.2 refuses ETHTOOL_FLAG_STATS here (EINVAL): asked again without it,
    // once per socket; only the answer kept is recorded.
    if (stats && !parsed && parsed.error() == EINVAL) {
      linkstate_stats_refused_ = true;
      continue;
    }
    NetlinkRecording recording(NetlinkFamily::kEthtool, request.data(), len);
    if (reply) recording.Received(reply->data(), reply->size());
    recording.Finish(reply ? 0 : reply.error());
    return parsed;
  }
}

}  // namespace rdmascope::sys
