#include "sys/dcb_netlink.h"

#include <gtest/gtest.h>
#include <libmnl/libmnl.h>
#include <linux/dcbnl.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace rdmascope::sys {
namespace {

// One APP table entry as the kernel's dcbnl_ieee_fill copies it (struct dcb_app), with the
// attribute length it would have; a shorter `len` makes a truncated entry.
struct AppEntry {
  dcb_app app;
  size_t len = sizeof(dcb_app);
};

// mlx5 in DSCP trust state: all 64 DSCPs, each on its firmware default priority DSCP / 8
// (mlx5e_dcbnl_dscp_app(priv, INIT) in drivers/net/ethernet/mellanox/mlx5/core/en_dcbnl.c),
// after an EtherType entry of another selector (RoCE v1's 0x8915 on priority 3, lldpad-style).
std::vector<AppEntry> Mlx5DscpTrust() {
  std::vector<AppEntry> entries{
      {.app = {.selector = IEEE_8021QAZ_APP_SEL_ETHERTYPE, .priority = 3, .protocol = 0x8915}}};
  for (uint16_t dscp = 0; dscp < 64; ++dscp) {
    entries.push_back({.app = {.selector = IEEE_8021QAZ_APP_SEL_DSCP,
                               .priority = static_cast<uint8_t>(dscp >> 3),
                               .protocol = dscp}});
  }
  return entries;
}

// Builds a reply the way the kernel's dcbnl_ieee_fill does: dcbmsg, IFNAME, nested IEEE with
// ETS, PFC and the APP table (absent when `apps` is null). `cut_table` bytes are taken off the
// APP table's own length, as a reply cut short inside the table would be.
std::vector<char> Reply(bool with_pfc, size_t pfc_len = sizeof(ieee_pfc),
                        const std::vector<AppEntry>* apps = nullptr, uint16_t cut_table = 0) {
  std::vector<char> buf(MNL_SOCKET_BUFFER_SIZE);
  nlmsghdr* message = mnl_nlmsg_put_header(buf.data());
  message->nlmsg_type = RTM_GETDCB;
  auto* dcb = static_cast<dcbmsg*>(mnl_nlmsg_put_extra_header(message, sizeof(dcbmsg)));
  dcb->cmd = DCB_CMD_IEEE_GET;
  mnl_attr_put_strz(message, DCB_ATTR_IFNAME, "ens1f0np0");
  nlattr* ieee = mnl_attr_nest_start(message, DCB_ATTR_IEEE);
  ieee_ets ets{};
  mnl_attr_put(message, DCB_ATTR_IEEE_ETS, sizeof ets, &ets);
  if (with_pfc) {
    ieee_pfc pfc{};
    pfc.pfc_cap = 8;
    pfc.pfc_en = 0x08;
    pfc.requests[3] = 17;
    pfc.indications[3] = 9001;
    mnl_attr_put(message, DCB_ATTR_IEEE_PFC, pfc_len, &pfc);
  }
  if (apps != nullptr) {
    nlattr* table = mnl_attr_nest_start(message, DCB_ATTR_IEEE_APP_TABLE);
    for (const AppEntry& entry : *apps) {
      mnl_attr_put(message, DCB_ATTR_IEEE_APP, entry.len, &entry.app);
    }
    mnl_attr_nest_end(message, table);
    table->nla_len -= cut_table;
  }
  mnl_attr_nest_end(message, ieee);
  buf.resize(message->nlmsg_len);
  return buf;
}

TEST(DcbNetlink, BuildsRequest) {
  std::vector<char> buf;
  const size_t len = BuildIeeeGetRequest("eth0", 7, buf);
  ASSERT_GT(len, sizeof(nlmsghdr) + sizeof(dcbmsg));
  const auto* message = reinterpret_cast<const nlmsghdr*>(buf.data());
  EXPECT_EQ(message->nlmsg_type, RTM_GETDCB);
  EXPECT_EQ(message->nlmsg_seq, 7U);
  const auto* dcb = static_cast<const dcbmsg*>(mnl_nlmsg_get_payload(message));
  EXPECT_EQ(dcb->cmd, DCB_CMD_IEEE_GET);
  EXPECT_EQ(BuildIeeeGetRequest("a-name-longer-than-ifnamsiz", 1, buf), 0U);
  EXPECT_EQ(BuildIeeeGetRequest("", 1, buf), 0U);
}

TEST(DcbNetlink, ParsesPfc) {
  const auto reply = Reply(true);
  const auto pfc = ParseIeeeGetReply(reply.data(), reply.size());
  ASSERT_TRUE(pfc) << std::strerror(pfc.error());
  EXPECT_EQ(pfc->capability, 8);
  EXPECT_EQ(pfc->enabled_mask, 0x08);
  EXPECT_EQ(pfc->requests[3], 17U);
  EXPECT_EQ(pfc->indications[3], 9001U);
}

TEST(DcbNetlink, MissingOrShortPfcAttribute) {
  const auto without = Reply(false);
  EXPECT_EQ(ParseIeeeGetReply(without.data(), without.size()).error(), ENODATA);
  const auto short_pfc = Reply(true, 4);
  EXPECT_EQ(ParseIeeeGetReply(short_pfc.data(), short_pfc.size()).error(), EBADMSG);
}

TEST(DcbNetlink, NoAppTableLeavesTheDscpMapUnknown) {
  const auto reply = Reply(true);
  const auto pfc = ParseIeeeGetReply(reply.data(), reply.size());
  ASSERT_TRUE(pfc);
  EXPECT_FALSE(pfc->dscp);
  EXPECT_EQ(pfc->dscp_error, "");
}

TEST(DcbNetlink, ParsesTheDscpEntriesOfTheAppTable) {
  const auto apps = Mlx5DscpTrust();
  const auto reply = Reply(true, sizeof(ieee_pfc), &apps);
  const auto pfc = ParseIeeeGetReply(reply.data(), reply.size());
  ASSERT_TRUE(pfc) << std::strerror(pfc.error());
  EXPECT_EQ(pfc->enabled_mask, 0x08);  // PFC still read beside the table
  ASSERT_TRUE(pfc->dscp) << pfc->dscp_error;
  EXPECT_EQ(pfc->dscp->entries, 64);  // the EtherType entry is not a DSCP one
  EXPECT_EQ(pfc->dscp->priorities[26], 1U << 3);
  EXPECT_EQ(pfc->dscp->priorities[0], 1U << 0);
  EXPECT_EQ(pfc->dscp->priorities[63], 1U << 7);
}

TEST(DcbNetlink, EmptyAppTableIsPcpTrust) {
  // mlx5 in PCP trust state keeps no DSCP entry; an EtherType entry does not change that.
  const std::vector<AppEntry> apps{
      {.app = {.selector = IEEE_8021QAZ_APP_SEL_ETHERTYPE, .priority = 3, .protocol = 0x8915}}};
  const auto reply = Reply(true, sizeof(ieee_pfc), &apps);
  const auto pfc = ParseIeeeGetReply(reply.data(), reply.size());
  ASSERT_TRUE(pfc);
  ASSERT_TRUE(pfc->dscp);
  EXPECT_EQ(pfc->dscp->entries, 0);
}

TEST(DcbNetlink, SeveralPrioritiesForOneDscp) {
  // IEEE mode keeps one entry per (selector, protocol, priority): dcb_ieee_setapp.
  const std::vector<AppEntry> apps{
      {.app = {.selector = IEEE_8021QAZ_APP_SEL_DSCP, .priority = 3, .protocol = 26}},
      {.app = {.selector = IEEE_8021QAZ_APP_SEL_DSCP, .priority = 5, .protocol = 26}}};
  const auto reply = Reply(true, sizeof(ieee_pfc), &apps);
  const auto pfc = ParseIeeeGetReply(reply.data(), reply.size());
  ASSERT_TRUE(pfc && pfc->dscp);
  EXPECT_EQ(pfc->dscp->priorities[26], (1U << 3) | (1U << 5));
  EXPECT_EQ(pfc->dscp->entries, 2);
}

TEST(DcbNetlink, MalformedAppTableGivesNoMapButKeepsPfc) {
  auto short_entry = Mlx5DscpTrust();
  short_entry[10].len = 2;  // shorter than struct dcb_app
  auto bad_dscp = Mlx5DscpTrust();
  bad_dscp[5].app.protocol = 64;  // DSCP is 6 bits
  auto bad_priority = Mlx5DscpTrust();
  bad_priority[7].app.priority = 8;
  const auto whole = Mlx5DscpTrust();
  struct Case {
    const char* name;
    std::vector<char> reply;
    const char* error;
  };
  const Case cases[] = {
      {"short entry", Reply(true, sizeof(ieee_pfc), &short_entry), "shorter than struct dcb_app"},
      {"DSCP 64", Reply(true, sizeof(ieee_pfc), &bad_dscp), "out of range"},
      {"priority 8", Reply(true, sizeof(ieee_pfc), &bad_priority), "out of range"},
      {"table cut", Reply(true, sizeof(ieee_pfc), &whole, 4), "truncated APP table"},
  };
  for (const Case& c : cases) {
    const auto pfc = ParseIeeeGetReply(c.reply.data(), c.reply.size());
    ASSERT_TRUE(pfc) << c.name;
    EXPECT_EQ(pfc->enabled_mask, 0x08) << c.name;
    EXPECT_FALSE(pfc->dscp) << c.name;
    EXPECT_NE(pfc->dscp_error.find(c.error), std::string::npos)
        << c.name << ": " << pfc->dscp_error;
  }
}

TEST(DcbNetlink, KernelErrorAndGarbage) {
  std::vector<char> buf(MNL_SOCKET_BUFFER_SIZE);
  nlmsghdr* message = mnl_nlmsg_put_header(buf.data());
  message->nlmsg_type = NLMSG_ERROR;
  auto* err = static_cast<nlmsgerr*>(mnl_nlmsg_put_extra_header(message, sizeof(nlmsgerr)));
  err->error = -EOPNOTSUPP;
  EXPECT_EQ(ParseIeeeGetReply(buf.data(), message->nlmsg_len).error(), EOPNOTSUPP);
  const char garbage[] = "not a netlink message at all";
  EXPECT_FALSE(ParseIeeeGetReply(garbage, sizeof garbage));
}

}  // namespace
}  // namespace rdmascope::sys
