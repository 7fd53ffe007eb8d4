// Link-down events (issue 40, item 4): LINKSTATE_GET replies and rtnetlink link messages built
// as the kernel builds them (net/ethtool/linkstate.c linkstate_fill_reply; net/core/rtnetlink.c
// rtnl_fill_ifinfo), parsed, named and hostile; the event log's edges (first sight, rename,
// delete, not followed, storm, lost notifications); the series and /debug/links; capture ->
// replay of LINKSTATE through sys/netlink_capture, and a replayed no_cable down edge.
#include "collectors/link_events.h"

#include <gtest/gtest.h>
#include <libmnl/libmnl.h>
#include <linux/ethtool.h>
#include <linux/ethtool_netlink.h>
#include <linux/genetlink.h>
#include <linux/if.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "collectors/debug_links.h"
#include "collectors/link.h"
#include "core/capture.h"
#include "sys/ethtool_linkstate.h"
#include "sys/netlink_capture.h"
#include "sys/rtnetlink_links.h"
#include "unit/fixture_tree.h"
#include "unit/installed_session.h"

namespace rdmascope {
namespace {

using namespace std::chrono_literals;

// ---- replies as the kernel builds them

constexpr uint16_t kFamily = 21;  // the ethtool family id a kernel gave (any number)
constexpr uint16_t kExtDownCount = ETHTOOL_A_LINKSTATE_EXT_SUBSTATE + 1;  // Linux 6.2

struct LinkStateReply {
  std::optional<uint8_t> link;
  std::optional<uint8_t> ext_state;
  std::optional<uint8_t> ext_substate;
  std::optional<uint32_t> down_count;
};

// ETHTOOL_MSG_LINKSTATE_GET_REPLY: genlmsghdr, the reply header nest (ifindex, name), then the
// attributes in linkstate_fill_reply's order.
std::string BuildLinkStateReply(const std::string& ifname, const LinkStateReply& r,
                                uint32_t seq = 1) {
  std::vector<char> buf(MNL_SOCKET_BUFFER_SIZE, '\0');
  nlmsghdr* message = mnl_nlmsg_put_header(buf.data());
  message->nlmsg_type = kFamily;
  message->nlmsg_seq = seq;
  auto* genl = static_cast<genlmsghdr*>(mnl_nlmsg_put_extra_header(message, sizeof(genlmsghdr)));
  genl->cmd = ETHTOOL_MSG_LINKSTATE_GET_REPLY;
  genl->version = ETHTOOL_GENL_VERSION;
  nlattr* header = mnl_attr_nest_start(message, ETHTOOL_A_LINKSTATE_HEADER);
  mnl_attr_put_u32(message, ETHTOOL_A_HEADER_DEV_INDEX, 7);
  mnl_attr_put_strz(message, ETHTOOL_A_HEADER_DEV_NAME, ifname.c_str());
  mnl_attr_nest_end(message, header);
  if (r.link) mnl_attr_put_u8(message, ETHTOOL_A_LINKSTATE_LINK, *r.link);
  if (r.ext_state) mnl_attr_put_u8(message, ETHTOOL_A_LINKSTATE_EXT_STATE, *r.ext_state);
  if (r.ext_substate) mnl_attr_put_u8(message, ETHTOOL_A_LINKSTATE_EXT_SUBSTATE, *r.ext_substate);
  if (r.down_count) mnl_attr_put_u32(message, kExtDownCount, *r.down_count);
  return std::string(buf.data(), message->nlmsg_len);
}

std::string BuildError(int error, uint32_t seq = 1) {
  std::vector<char> buf(MNL_SOCKET_BUFFER_SIZE, '\0');
  nlmsghdr* message = mnl_nlmsg_put_header(buf.data());
  message->nlmsg_type = NLMSG_ERROR;
  message->nlmsg_seq = seq;
  auto* err = static_cast<nlmsgerr*>(mnl_nlmsg_put_extra_header(message, sizeof(nlmsgerr)));
  err->error = -error;
  return std::string(buf.data(), message->nlmsg_len);
}

struct NewLink {
  uint16_t type = RTM_NEWLINK;
  int ifindex = 5;
  std::string name = "eth2";
  uint32_t flags = IFF_UP | IFF_RUNNING | IFF_LOWER_UP;
  std::optional<uint8_t> carrier = 1;
  std::optional<uint8_t> operstate = IF_OPER_UP;
  std::optional<uint32_t> carrier_changes;
};

// RTM_NEWLINK / RTM_DELLINK as rtnl_fill_ifinfo puts them (the attributes read here).
std::string BuildLinkMessage(const NewLink& link) {
  std::vector<char> buf(MNL_SOCKET_BUFFER_SIZE, '\0');
  nlmsghdr* message = mnl_nlmsg_put_header(buf.data());
  message->nlmsg_type = link.type;
  auto* info = static_cast<ifinfomsg*>(mnl_nlmsg_put_extra_header(message, sizeof(ifinfomsg)));
  info->ifi_family = AF_UNSPEC;
  info->ifi_index = link.ifindex;
  info->ifi_flags = link.flags;
  mnl_attr_put_strz(message, IFLA_IFNAME, link.name.c_str());
  mnl_attr_put_u32(message, IFLA_MTU, 1500);
  if (link.operstate) mnl_attr_put_u8(message, IFLA_OPERSTATE, *link.operstate);
  if (link.carrier) mnl_attr_put_u8(message, IFLA_CARRIER, *link.carrier);
  if (link.carrier_changes) mnl_attr_put_u32(message, IFLA_CARRIER_CHANGES, *link.carrier_changes);
  return std::string(buf.data(), message->nlmsg_len);
}

std::string BuildDone() {
  std::vector<char> buf(MNL_SOCKET_BUFFER_SIZE, '\0');
  nlmsghdr* message = mnl_nlmsg_put_header(buf.data());
  message->nlmsg_type = NLMSG_DONE;
  message->nlmsg_flags = NLM_F_MULTI;
  mnl_nlmsg_put_extra_header(message, sizeof(int));
  return std::string(buf.data(), message->nlmsg_len);
}

std::vector<sys::LinkNotice> Notices(const std::string& bytes) {
  std::vector<sys::LinkNotice> out;
  EXPECT_EQ(sys::ParseLinkMessages(bytes.data(), bytes.size(), out), 0);
  return out;
}

// ---- LINKSTATE_GET

TEST(LinkState, DownWithNoCable) {
  const std::string reply =
      BuildLinkStateReply("eth2", {.link = 0, .ext_state = ETHTOOL_LINK_EXT_STATE_NO_CABLE});
  const auto reading = sys::ParseLinkStateReply(reply.data(), reply.size());
  ASSERT_TRUE(reading.has_value());
  EXPECT_EQ(reading->link, false);
  EXPECT_EQ(reading->ext_state, ETHTOOL_LINK_EXT_STATE_NO_CABLE);
  EXPECT_FALSE(reading->ext_substate.has_value());
  EXPECT_FALSE(reading->down_count.has_value());
  EXPECT_EQ(DownReason(true, reading), std::make_pair(std::string("no_cable"), std::string()));
}

TEST(LinkState, LinkTrainingFailureWithSubstateAndDownCount) {
  const std::string reply = BuildLinkStateReply(
      "eth2", {.link = 0,
               .ext_state = ETHTOOL_LINK_EXT_STATE_LINK_TRAINING_FAILURE,
               .ext_substate = ETHTOOL_LINK_EXT_SUBSTATE_LT_KR_FRAME_LOCK_NOT_ACQUIRED,
               .down_count = 42});
  const auto reading = sys::ParseLinkStateReply(reply.data(), reply.size());
  ASSERT_TRUE(reading.has_value());
  EXPECT_EQ(reading->down_count, 42u);
  EXPECT_EQ(DownReason(true, reading), std::make_pair(std::string("link_training_failure"),
                                                      std::string("kr_frame_lock_not_acquired")));
}

TEST(LinkState, NamesFollowTheUapiEnums) {
  EXPECT_EQ(sys::LinkExtStateName(ETHTOOL_LINK_EXT_STATE_AUTONEG), "autoneg_failure");
  EXPECT_EQ(sys::LinkExtStateName(ETHTOOL_LINK_EXT_STATE_BAD_SIGNAL_INTEGRITY),
            "bad_signal_integrity");
  EXPECT_EQ(sys::LinkExtStateName(ETHTOOL_LINK_EXT_STATE_OVERHEAT), "overheat");
  EXPECT_EQ(sys::LinkExtStateName(ETHTOOL_LINK_EXT_STATE_MODULE), "module");
  EXPECT_EQ(sys::LinkExtSubstateName(ETHTOOL_LINK_EXT_STATE_BAD_SIGNAL_INTEGRITY,
                                     ETHTOOL_LINK_EXT_SUBSTATE_BSI_SERDES_ALOS),
            "serdes_alos");
  EXPECT_EQ(
      sys::LinkExtSubstateName(ETHTOOL_LINK_EXT_STATE_AUTONEG, ETHTOOL_LINK_EXT_SUBSTATE_AN_NO_HCD),
      "no_hcd");
  EXPECT_EQ(sys::LinkExtSubstateName(ETHTOOL_LINK_EXT_STATE_MODULE,
                                     ETHTOOL_LINK_EXT_SUBSTATE_MODULE_CMIS_NOT_READY),
            "cmis_not_ready");
  EXPECT_EQ(sys::LinkExtSubstateName(ETHTOOL_LINK_EXT_STATE_CABLE_ISSUE,
                                     ETHTOOL_LINK_EXT_SUBSTATE_CI_CABLE_TEST_FAILURE),
            "cable_test_failure");
}

TEST(LinkState, ASubstateOfZeroIsNoSubstate) {
  // linkstate_fill_reply puts EXT_SUBSTATE only when it is not 0; a reply with a 0 (a replay's
  // or a hostile one) has no substate, so the down edge is labelled by its state alone.
  const std::string reply = BuildLinkStateReply(
      "eth2", {.link = 0, .ext_state = ETHTOOL_LINK_EXT_STATE_NO_CABLE, .ext_substate = 0});
  const auto reading = sys::ParseLinkStateReply(reply.data(), reply.size());
  ASSERT_TRUE(reading);
  EXPECT_FALSE(reading->ext_substate);
  EXPECT_EQ(DownReason(true, reading), (std::pair<std::string, std::string>{"no_cable", ""}));
}

TEST(LinkState, UnknownNumbersAreUnknown) {
  const std::string reply =
      BuildLinkStateReply("eth2", {.link = 0, .ext_state = 200, .ext_substate = 9});
  const auto reading = sys::ParseLinkStateReply(reply.data(), reply.size());
  ASSERT_TRUE(reading.has_value());
  EXPECT_EQ(DownReason(true, reading),
            std::make_pair(std::string("unknown"), std::string("unknown")));
  // A known state with a substate its enum does not hold; a state without substates.
  EXPECT_EQ(sys::LinkExtSubstateName(ETHTOOL_LINK_EXT_STATE_AUTONEG, 7), "unknown");
  EXPECT_EQ(sys::LinkExtSubstateName(ETHTOOL_LINK_EXT_STATE_NO_CABLE, 1), "unknown");
  EXPECT_EQ(sys::LinkExtStateName(13), "unknown");
}

TEST(LinkState, VethAnswersWithoutTheExtendedState) {
  // veth has no get_link_ext_state: the kernel sends LINK alone.
  const std::string reply = BuildLinkStateReply("veth0", {.link = 0});
  const auto reading = sys::ParseLinkStateReply(reply.data(), reply.size());
  ASSERT_TRUE(reading.has_value());
  EXPECT_EQ(DownReason(true, reading), std::make_pair(std::string("none"), std::string()));
  // Set down itself: the driver is never asked.
  EXPECT_EQ(DownReason(false, reading).first, "admin_down");
}

TEST(LinkState, MalformedRepliesAreErrorsNotReadings) {
  // EXT_STATE of 4 bytes: not the kernel's u8.
  std::string reply = BuildLinkStateReply("eth2", {.link = 0});
  {
    std::vector<char> buf(MNL_SOCKET_BUFFER_SIZE, '\0');
    std::memcpy(buf.data(), reply.data(), reply.size());
    auto* message = reinterpret_cast<nlmsghdr*>(buf.data());
    mnl_attr_put_u32(message, ETHTOOL_A_LINKSTATE_EXT_STATE, 4);
    const std::string bad(buf.data(), message->nlmsg_len);
    EXPECT_EQ(sys::ParseLinkStateReply(bad.data(), bad.size()).error(), EBADMSG);
  }
  // Truncated, a header claiming more than there is, nothing at all.
  EXPECT_EQ(sys::ParseLinkStateReply(reply.data(), reply.size() - 3).error(), EBADMSG);
  std::string huge = reply;
  const uint32_t len = 0x7fffffff;
  std::memcpy(huge.data(), &len, sizeof len);
  EXPECT_EQ(sys::ParseLinkStateReply(huge.data(), huge.size()).error(), EBADMSG);
  EXPECT_EQ(sys::ParseLinkStateReply(reply.data(), 0).error(), EBADMSG);
  // The interface went away between the notice and the question.
  const std::string gone = BuildError(ENODEV);
  EXPECT_EQ(sys::ParseLinkStateReply(gone.data(), gone.size()).error(), ENODEV);
  EXPECT_EQ(DownReason(true, sys::ParseLinkStateReply(gone.data(), gone.size())).first, "none");
  // An error field no kernel sends (the reply is the driver's or a replay's bytes): INT_MIN
  // cannot be negated (undefined: fuzz/link_events_fuzzer), a positive one or 4096 is no
  // -errno. Malformed, never a negative or zero errno.
  for (const int field : {INT_MIN, -4096, 5}) {
    std::string odd = BuildError(0);
    std::memcpy(odd.data() + NLMSG_HDRLEN, &field, sizeof field);
    const auto parsed = sys::ParseLinkStateReply(odd.data(), odd.size());
    ASSERT_FALSE(parsed) << field;
    EXPECT_EQ(parsed.error(), field == 5 ? 5 : EBADMSG) << field;
  }
}

TEST(LinkState, RequestAsksStatisticsAndRefusesNonNames) {
  std::vector<char> buf;
  const size_t len = sys::BuildLinkStateRequest(kFamily, "eth2", true, 3, buf);
  ASSERT_GT(len, 0u);
  // The capture key names the command and interface, not the family id of this kernel.
  EXPECT_EQ(sys::NetlinkRequestKey(sys::NetlinkFamily::kEthtool, buf.data(), len).value(),
            "ethtool/linkstate_get-eth2");
  // The flags attribute is inside the header nest.
  const std::string bytes(buf.data(), len);
  const uint32_t stats = ETHTOOL_FLAG_STATS;
  EXPECT_NE(bytes.find(std::string(reinterpret_cast<const char*>(&stats), 4)), std::string::npos);
  std::vector<char> plain;
  const size_t plain_len = sys::BuildLinkStateRequest(kFamily, "eth2", false, 3, plain);
  EXPECT_EQ(plain_len + 8, len);
  EXPECT_EQ(sys::BuildLinkStateRequest(kFamily, "", true, 3, buf), 0u);
  EXPECT_EQ(sys::BuildLinkStateRequest(kFamily, "sixteen-chars-xx", true, 3, buf), 0u);
  // A name that is no path component is no capture key.
  const size_t dots = sys::BuildLinkStateRequest(kFamily, "..", true, 3, buf);
  EXPECT_EQ(sys::NetlinkRequestKey(sys::NetlinkFamily::kEthtool, buf.data(), dots).error(), EINVAL);
}

// ---- rtnetlink

TEST(RtnetlinkLinks, NewLinkDelLinkAndDone) {
  const std::string bytes = BuildLinkMessage({.carrier_changes = 6}) +
                            BuildLinkMessage({.ifindex = 6,
                                              .name = "eth3",
                                              .flags = IFF_UP,
                                              .carrier = 0,
                                              .operstate = IF_OPER_DOWN}) +
                            BuildLinkMessage({.type = RTM_DELLINK, .ifindex = 7, .name = "veth9"}) +
                            BuildDone();
  const auto notices = Notices(bytes);
  ASSERT_EQ(notices.size(), 4u);
  EXPECT_EQ(notices[0].name, "eth2");
  EXPECT_TRUE(notices[0].up());
  EXPECT_EQ(notices[0].carrier_changes, 6u);
  EXPECT_EQ(notices[1].name, "eth3");
  EXPECT_FALSE(notices[1].up());
  EXPECT_EQ(notices[1].operstate, IF_OPER_DOWN);
  EXPECT_TRUE(notices[2].deleted);
  EXPECT_TRUE(notices[3].dump_done);
}

TEST(RtnetlinkLinks, MalformedMessagesAreRefused) {
  std::vector<sys::LinkNotice> out;
  // IFLA_CARRIER of 4 bytes.
  std::vector<char> buf(MNL_SOCKET_BUFFER_SIZE, '\0');
  nlmsghdr* message = mnl_nlmsg_put_header(buf.data());
  message->nlmsg_type = RTM_NEWLINK;
  mnl_nlmsg_put_extra_header(message, sizeof(ifinfomsg));
  mnl_attr_put_u32(message, IFLA_CARRIER, 1);
  EXPECT_EQ(sys::ParseLinkMessages(buf.data(), message->nlmsg_len, out), EBADMSG);
  // A message shorter than its ifinfomsg.
  message->nlmsg_len = NLMSG_HDRLEN + 4;
  EXPECT_EQ(sys::ParseLinkMessages(buf.data(), message->nlmsg_len, out), EBADMSG);
  // Cut by one byte: not whole messages.
  const std::string good = BuildLinkMessage({});
  EXPECT_EQ(sys::ParseLinkMessages(good.data(), good.size() - 1, out), EBADMSG);
  EXPECT_TRUE(out.empty());
  const std::string error = BuildError(ENOBUFS);
  EXPECT_EQ(sys::ParseLinkMessages(error.data(), error.size(), out), ENOBUFS);
  // An error field outside the errno range (INT_MIN: negating it is undefined).
  std::string odd = BuildError(0);
  const int field = INT_MIN;
  std::memcpy(odd.data() + NLMSG_HDRLEN, &field, sizeof field);
  EXPECT_EQ(sys::ParseLinkMessages(odd.data(), odd.size(), out), EBADMSG);
}

// ---- the event log

struct FakeReads {
  std::map<std::string, std::string> replies;  // LINKSTATE reply bytes by interface
  int asked = 0;
  LinkEventReads Reads() {
    LinkEventReads reads;
    reads.link_state =
        [this](const std::string& netdev) -> std::expected<sys::LinkStateReading, int> {
      ++asked;
      const auto it = replies.find(netdev);
      if (it == replies.end()) return std::unexpected(ENODEV);
      return sys::ParseLinkStateReply(it->second.data(), it->second.size());
    };
    reads.module = [](const std::string&) {
      return ModuleAtEvent{.state = "ready", .rx_power_watts = {0.0, 0.0, 1e-4, std::nullopt}};
    };
    return reads;
  }
};

void Feed(LinkEventLog& log, const LinkEventReads& reads, const std::string& bytes) {
  LinkWatcher::Handle(log, reads, Notices(bytes), std::chrono::steady_clock::now());
}

TEST(LinkEventLog, DownEdgeAsksWhyAndCountsTheReason) {
  LinkEventLog log;
  log.Follow({"eth2"});
  FakeReads fake;
  fake.replies["eth2"] = BuildLinkStateReply(
      "eth2", {.link = 0, .ext_state = ETHTOOL_LINK_EXT_STATE_NO_CABLE, .down_count = 3});
  const auto reads = fake.Reads();
  Feed(log, reads, BuildLinkMessage({}));  // first sight: no edge, nothing asked
  EXPECT_EQ(fake.asked, 0);
  Feed(log, reads,
       BuildLinkMessage(
           {.flags = IFF_UP, .carrier = 0, .operstate = IF_OPER_DOWN, .carrier_changes = 1}));
  EXPECT_EQ(fake.asked, 1);
  auto snapshot = log.Snapshot();
  ASSERT_EQ(snapshot.count("eth2"), 1u);
  const PortEvents& port = snapshot.at("eth2");
  ASSERT_EQ(port.recent.size(), 1u);
  const LinkEvent& event = port.recent.back();
  EXPECT_TRUE(event.down);
  EXPECT_EQ(event.reason, "no_cable");
  EXPECT_EQ(event.operstate, "down");
  EXPECT_EQ(event.phy_down_count, 3u);
  ASSERT_TRUE(event.module.has_value());
  EXPECT_EQ(event.module->state, "ready");
  ASSERT_TRUE(event.query_seconds.has_value());
  EXPECT_LT(*event.query_seconds, 0.1);
  EXPECT_EQ(port.down_by_reason.at({"no_cable", ""}), 1u);
  EXPECT_EQ(port.phy_down_count, 3u);
  EXPECT_EQ(port.carrier_changes, 1u);
  EXPECT_EQ(port.ext_state_available, true);
  EXPECT_EQ(port.carrier_up, false);
  // Up again: an up edge, nothing asked, nothing counted.
  Feed(log, reads, BuildLinkMessage({}));
  EXPECT_EQ(fake.asked, 1);
  snapshot = log.Snapshot();
  EXPECT_EQ(snapshot.at("eth2").recent.size(), 2u);
  EXPECT_FALSE(snapshot.at("eth2").recent.back().down);
  EXPECT_EQ(snapshot.at("eth2").down_by_reason.size(), 1u);
}

TEST(LinkEventLog, InterfacesNotFollowedAreIgnoredEvenInAStorm) {
  LinkEventLog log;
  log.Follow({"eth2"});
  FakeReads fake;
  const auto reads = fake.Reads();
  // Ten thousand veths created, flapped and deleted: nothing kept, nothing asked.
  for (int i = 0; i < 10000; ++i) {
    const std::string name = "veth" + std::to_string(i);
    Feed(log, reads,
         BuildLinkMessage({.ifindex = 100 + i, .name = name}) +
             BuildLinkMessage({.ifindex = 100 + i, .name = name, .flags = IFF_UP, .carrier = 0}) +
             BuildLinkMessage({.type = RTM_DELLINK, .ifindex = 100 + i, .name = name}));
  }
  EXPECT_EQ(fake.asked, 0);
  EXPECT_TRUE(log.Snapshot().empty());
}

TEST(LinkEventLog, RenamedOrDeletedMidEventMakesNoFalseEdge) {
  LinkEventLog log;
  log.Follow({"eth2"});
  FakeReads fake;  // no reply for eth2: ENODEV, as for an interface deleted meanwhile
  const auto reads = fake.Reads();
  Feed(log, reads, BuildLinkMessage({}));
  // Renamed away (same index, another name): eth2's carrier is forgotten...
  Feed(log, reads, BuildLinkMessage({.name = "old2", .flags = IFF_UP, .carrier = 0}));
  // ...so another interface taking the name, down, is a first sight, no edge.
  Feed(log, reads, BuildLinkMessage({.ifindex = 9, .flags = IFF_UP, .carrier = 0}));
  EXPECT_EQ(fake.asked, 0);
  EXPECT_TRUE(log.Snapshot().at("eth2").recent.empty());
  // Down edge whose question finds the interface gone: counted as none, the error kept.
  Feed(log, reads, BuildLinkMessage({.ifindex = 9}));
  Feed(log, reads, BuildLinkMessage({.ifindex = 9, .flags = IFF_UP, .carrier = 0}));
  const auto snapshot = log.Snapshot();
  const LinkEvent& event = snapshot.at("eth2").recent.back();
  EXPECT_EQ(event.reason, "none");
  EXPECT_EQ(event.linkstate_error, "ENODEV");
  EXPECT_EQ(snapshot.at("eth2").ext_state_available, false);
  // Deleted: forgotten; recreated up: first sight.
  Feed(log, reads, BuildLinkMessage({.type = RTM_DELLINK, .ifindex = 9}));
  Feed(log, reads, BuildLinkMessage({.ifindex = 10}));
  EXPECT_EQ(log.Snapshot().at("eth2").recent.size(), 2u);
}

TEST(LinkEventLog, AdminDownIsItsOwnReason) {
  LinkEventLog log;
  log.Follow({"eth2"});
  FakeReads fake;
  fake.replies["eth2"] = BuildLinkStateReply("eth2", {.link = 0});
  const auto reads = fake.Reads();
  Feed(log, reads, BuildLinkMessage({}));
  Feed(log, reads, BuildLinkMessage({.flags = 0, .carrier = 0, .operstate = IF_OPER_DOWN}));
  const auto snapshot = log.Snapshot();
  EXPECT_EQ(snapshot.at("eth2").recent.back().reason, "admin_down");
  // The driver was not asked for a reason: availability unknown.
  EXPECT_FALSE(snapshot.at("eth2").ext_state_available.has_value());
}

TEST(LinkEventLog, TheRingKeepsTheLastSixteen) {
  LinkEventLog log;
  log.Follow({"eth2"});
  FakeReads fake;
  fake.replies["eth2"] =
      BuildLinkStateReply("eth2", {.link = 0, .ext_state = ETHTOOL_LINK_EXT_STATE_OVERHEAT});
  const auto reads = fake.Reads();
  Feed(log, reads, BuildLinkMessage({}));
  for (int i = 0; i < 40; ++i) {
    Feed(log, reads, BuildLinkMessage({.flags = IFF_UP, .carrier = 0}));
    Feed(log, reads, BuildLinkMessage({}));
  }
  const auto snapshot = log.Snapshot();
  EXPECT_EQ(snapshot.at("eth2").recent.size(), kEventsPerPort);
  EXPECT_EQ(snapshot.at("eth2").down_by_reason.at({"overheat", ""}), 40u);
}

TEST(LinkEventLog, ADumpAfterLostNotificationsForgetsTheGone) {
  LinkEventLog log;
  log.Follow({"eth2", "eth3"});
  FakeReads fake;
  const auto reads = fake.Reads();
  Feed(log, reads, BuildLinkMessage({}) + BuildLinkMessage({.ifindex = 6, .name = "eth3"}));
  EXPECT_EQ(log.Snapshot().at("eth3").carrier_up, true);
  // ENOBUFS: a dump that lists eth2 only (eth3 was deleted meanwhile).
  log.CountResync();
  log.BeginDump();
  Feed(log, reads, BuildLinkMessage({}) + BuildDone());
  const auto snapshot = log.Snapshot();
  EXPECT_FALSE(snapshot.contains("eth3") && snapshot.at("eth3").carrier_up.has_value());
  EXPECT_EQ(snapshot.at("eth2").carrier_up, true);
  EXPECT_EQ(log.resyncs(), 1u);
}

TEST(LinkEventLog, FollowingIsBounded) {
  LinkEventLog log;
  std::vector<std::string> many;
  for (size_t i = 0; i < 3 * kMaxEventPorts; ++i) many.push_back("eth" + std::to_string(i));
  log.Follow(many);
  EXPECT_EQ(log.Followed().size(), kMaxEventPorts);
  EXPECT_TRUE(log.TakeDumpWanted());
  EXPECT_FALSE(log.TakeDumpWanted());
}

// ---- series and /debug/links

LinkSnapshot SnapshotWith(const std::string& netdev, const LinkEventLog& log) {
  LinkSnapshot snapshot;
  snapshot.ports.push_back(LinkPort{.device = "mlx5_0", .port = "1", .netdev = netdev});
  snapshot.events = log.Snapshot();
  return snapshot;
}

TEST(LinkEventSeries, CounterLastReasonPhyCountAndAvailability) {
  LinkEventLog log;
  log.Follow({"eth2"});
  FakeReads fake;
  fake.replies["eth2"] =
      BuildLinkStateReply("eth2", {.link = 0,
                                   .ext_state = ETHTOOL_LINK_EXT_STATE_BAD_SIGNAL_INTEGRITY,
                                   .ext_substate = ETHTOOL_LINK_EXT_SUBSTATE_BSI_SERDES_ALOS,
                                   .down_count = 9});
  const auto reads = fake.Reads();
  Feed(log, reads, BuildLinkMessage({.carrier_changes = 4}));
  Feed(log, reads, BuildLinkMessage({.flags = IFF_UP, .carrier = 0, .carrier_changes = 5}));
  MetricSet set;
  MapLinkEvents(SnapshotWith("eth2", log), set);
  const std::string text = testing::Serialise(set.Take());
  const std::string key = R"(device="mlx5_0",port="1",netdev="eth2")";
  EXPECT_NE(text.find("rdma_link_down_events_total{" + key +
                      R"(,reason="bad_signal_integrity",substate="serdes_alos"} 1)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("rdma_link_last_down_info{" + key +
                      R"(,reason="bad_signal_integrity",substate="serdes_alos"} 1)"),
            std::string::npos);
  EXPECT_NE(text.find("rdma_link_phy_down_events_total{" + key + "} 9"), std::string::npos);
  EXPECT_NE(text.find("rdma_link_carrier_changes_total{" + key + "} 5"), std::string::npos);
  EXPECT_NE(text.find("rdma_link_source_available{" + key + R"(,source="link_ext_state"} 1)"),
            std::string::npos);
}

// The golden file (tests/fixtures/golden/link_events.prom): eth2 (mlx5_0 port 1) lost its
// cable once and came back, eth3 (mlx5_0 port 2, an rxe-like driver without a reason) went down,
// eth4 was set down; the PHY's count, the carrier changes, availability per port.
TEST(LinkEventSeries, MatchesTheGoldenFile) {
  LinkEventLog log;
  log.Follow({"eth2", "eth3", "eth4"});
  FakeReads fake;
  fake.replies["eth2"] = BuildLinkStateReply(
      "eth2", {.link = 0, .ext_state = ETHTOOL_LINK_EXT_STATE_NO_CABLE, .down_count = 7});
  fake.replies["eth3"] = BuildLinkStateReply("eth3", {.link = 0});
  fake.replies["eth4"] = BuildLinkStateReply("eth4", {.link = 0});
  const auto reads = fake.Reads();
  for (const auto& [index, name] : {std::pair{5, "eth2"}, {6, "eth3"}, {7, "eth4"}}) {
    Feed(log, reads, BuildLinkMessage({.ifindex = index, .name = name, .carrier_changes = 1}));
  }
  Feed(log, reads, BuildLinkMessage({.flags = IFF_UP, .carrier = 0, .carrier_changes = 2}));
  Feed(log, reads, BuildLinkMessage({.carrier_changes = 3}));
  Feed(log, reads,
       BuildLinkMessage(
           {.ifindex = 6, .name = "eth3", .flags = IFF_UP, .carrier = 0, .carrier_changes = 2}));
  Feed(log, reads, BuildLinkMessage({.ifindex = 7, .name = "eth4", .flags = 0, .carrier = 0}));
  LinkSnapshot snapshot;
  snapshot.ports = {LinkPort{.device = "mlx5_0", .port = "1", .netdev = "eth2"},
                    LinkPort{.device = "mlx5_0", .port = "2", .netdev = "eth3"},
                    LinkPort{.netdev = "eth4"}};
  snapshot.events = log.Snapshot();
  snapshot.resyncs = 0;
  MetricSet set;
  MapLinkEvents(snapshot, set);
  EXPECT_TRUE(testing::MatchesGolden(testing::Serialise(set.Take()), "link_events.prom"));
}

TEST(LinkEventSeries, NoEventsNoSeries) {
  LinkEventLog log;
  log.Follow({"eth2"});
  MetricSet set;
  MapLinkEvents(SnapshotWith("eth2", log), set);
  EXPECT_EQ(testing::Serialise(set.Take()), "");
}

TEST(DebugLinks, JsonAndEscapedHtml) {
  const std::string hostile = "<b>&\"x";
  LinkEventLog log;
  log.Follow({hostile});
  FakeReads fake;
  fake.replies[hostile] =
      BuildLinkStateReply("x", {.link = 0, .ext_state = ETHTOOL_LINK_EXT_STATE_NO_CABLE});
  const auto reads = fake.Reads();
  Feed(log, reads, BuildLinkMessage({.name = hostile}));
  Feed(log, reads, BuildLinkMessage({.name = hostile, .flags = IFF_UP, .carrier = 0}));
  const LinkSnapshot snapshot = SnapshotWith(hostile, log);
  const std::string json = LinkEventsJson(snapshot);
  EXPECT_NE(json.find(R"("reason": "no_cable")"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("direction": "down")"), std::string::npos);
  EXPECT_NE(json.find(R"("netdev": "<b>&\"x")"), std::string::npos);
  EXPECT_NE(json.find(R"("rx_power_watts": [)"), std::string::npos);
  const std::string html = LinkEventsHtml(snapshot);
  EXPECT_EQ(html.find("<b>&"), std::string::npos);
  EXPECT_NE(html.find("&lt;b&gt;&amp;&quot;x"), std::string::npos) << html;
  EXPECT_NE(html.find("<td>no_cable</td>"), std::string::npos);
}

// ---- capture and replay

using Installed = testing::InstalledSession;

class FakePorts : public LinkPortSource {
 public:
  std::vector<LinkPort> Read() const override {
    return {LinkPort{.device = "mlx5_0", .port = "1", .netdev = "eth2"}};
  }
};

ModuleReads::Read NoModule() {
  return [](std::string_view, const sys::ModulePageKey&, uint8_t,
            uint8_t) -> std::expected<std::string, int> { return std::unexpected(EOPNOTSUPP); };
}

LinkOptions Synchronous() {
  return {.refresh_interval = 0s, .static_refresh_interval = 0s, .max_netdevs = 64};
}

std::string Scrape(const Collector& collector) {
  MetricSet set;
  collector.Collect(set);
  return testing::Serialise(set.Take());
}

// The recording side of EthtoolNetlink::ReadLinkState with the kernel's bytes in place of a
// socket: the request's key, the reply recorded as received.
LinkEventReads RecordingReads(const std::vector<std::string>& replies, size_t& sample) {
  LinkEventReads reads;
  reads.link_state =
      [&replies, &sample](const std::string& netdev) -> std::expected<sys::LinkStateReading, int> {
    std::vector<char> request;
    const size_t len = sys::BuildLinkStateRequest(kFamily, netdev, true, 1, request);
    sys::NetlinkRecording recording(sys::NetlinkFamily::kEthtool, request.data(), len);
    const std::string& reply = replies.at(sample);
    recording.Received(reply.data(), reply.size());
    recording.Finish(0);
    return sys::ParseLinkStateReply(reply.data(), reply.size());
  };
  return reads;
}

TEST(LinkEventCapture, RecordedLinkStateReplaysTheSameSeriesAndPage) {
  testing::TempDir dir;
  const std::vector<std::string> replies = {
      BuildLinkStateReply("eth2", {.link = 1, .down_count = 2}),
      BuildLinkStateReply(
          "eth2", {.link = 0, .ext_state = ETHTOOL_LINK_EXT_STATE_NO_CABLE, .down_count = 3}),
      BuildLinkStateReply("eth2", {.link = 1, .down_count = 3})};
  std::vector<std::string> recorded;
  {
    auto writer = capture::Writer::Create(dir.path() / "cap", false).value();
    Installed session(capture::Session::Recording(capture::Layout("/sys", "/proc"), writer.get()));
    size_t sample = 0;
    LinkCollector collector(Synchronous(), std::make_unique<FakePorts>(), NoModule(),
                            std::chrono::steady_clock::now, nullptr,
                            RecordingReads(replies, sample));
    for (sample = 0; sample < replies.size(); ++sample) {
      ASSERT_TRUE(writer->BeginSample(sample + 1).has_value());
      recorded.push_back(Scrape(collector));
      ASSERT_TRUE(writer->CommitSample().has_value());
    }
    ASSERT_TRUE(writer->WriteIndex("test", {"link"}).has_value());
  }
  // The samples' times as a capture taken long ago would have them, so that an event stamped
  // with the replay's clock could not match them by chance.
  const std::vector<std::string> times = {"2026-12-06T12:00:00.000Z", "2026-12-06T12:00:10.250Z",
                                          "2026-12-06T12:00:20.500Z"};
  {
    const auto index_path = dir.path() / "cap" / "index.json";
    std::ifstream in(index_path);
    nlohmann::json index = nlohmann::json::parse(in);
    for (size_t n = 0; n < times.size(); ++n) index["samples"][n]["time"] = times[n];
    std::ofstream(index_path) << index.dump();
  }
  EXPECT_NE(recorded[1].find(R"(rdma_link_down_events_total{device="mlx5_0",port="1",)"
                             R"(netdev="eth2",reason="no_cable",substate=""} 1)"),
            std::string::npos)
      << recorded[1];
  // Replayed with the host's reads: the socket is never opened, the bytes answer.
  auto session = capture::Session::Replaying(capture::Layout("/sys", "/proc"),
                                             capture::Reader::Open(dir.path() / "cap").value());
  capture::Session* replaying = session.get();
  Installed installed(std::move(session));
  LinkCollector collector(Synchronous(), std::make_unique<FakePorts>(), NoModule(),
                          std::chrono::steady_clock::now, nullptr, SystemLinkEventReads("/sys"));
  std::vector<std::string> replayed;
  for (size_t n = 0; n < replies.size(); ++n) {
    replaying->NextSample();
    replayed.push_back(Scrape(collector));
  }
  EXPECT_EQ(replayed, recorded);
  DebugRoutes routes;
  collector.AddDebugRoutes(routes);
  const std::string json = routes.at("/debug/links")("");
  EXPECT_NE(json.find(R"("reason": "no_cable")"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("direction": "up")"), std::string::npos);
  // Each event at the time of the sample that showed it (index.json), not the replay's clock:
  // the down edge between samples 1 and 2 at sample 2's time, the up edge at sample 3's.
  const nlohmann::json page = nlohmann::json::parse(json);
  std::vector<std::pair<std::string, std::string>> events;
  for (const auto& port : page.at("ports")) {
    for (const auto& event : port.at("events")) {
      events.emplace_back(event.at("direction").get<std::string>(),
                          event.at("time").get<std::string>());
    }
  }
  EXPECT_EQ(events, (std::vector<std::pair<std::string, std::string>>{{"down", times[1]},
                                                                      {"up", times[2]}}))
      << json;
}

// Live and under capture an event's time is the clock's.
TEST(LinkEventCapture, EventTimeIsTheClockWithoutAReplay) {
  const auto before = std::chrono::system_clock::now();
  const auto time = LinkEventTime();
  EXPECT_GE(time, before);
  EXPECT_LE(time, std::chrono::system_clock::now());
}

TEST(LinkEventCapture, HostileReplayedBytesAreNoReading) {
  testing::TempDir dir;
  {
    auto writer = capture::Writer::Create(dir.path() / "cap", false).value();
    ASSERT_TRUE(writer->BeginSample(1).has_value());
    writer->File("netlink/ethtool/linkstate_get-eth2.bin", std::string(64, '\xff'));
    ASSERT_TRUE(writer->CommitSample().has_value());
    ASSERT_TRUE(writer->WriteIndex("test", {"link"}).has_value());
  }
  auto session = capture::Session::Replaying(capture::Layout("/sys", "/proc"),
                                             capture::Reader::Open(dir.path() / "cap").value());
  capture::Session* replaying = session.get();
  Installed installed(std::move(session));
  LinkCollector collector(Synchronous(), std::make_unique<FakePorts>(), NoModule(),
                          std::chrono::steady_clock::now, nullptr, SystemLinkEventReads("/sys"));
  replaying->NextSample();
  const std::string text = Scrape(collector);
  EXPECT_EQ(text.find("rdma_link_down_events_total"), std::string::npos);
  EXPECT_EQ(text.find("rdma_link_phy_down_events_total"), std::string::npos);
}

}  // namespace
}  // namespace rdmascope
