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

// Builds a reply the way the kernel's dcbnl_ieee_fill does: dcbmsg, IFNAME, nested IEEE.
std::vector<char> Reply(bool with_pfc, size_t pfc_len = sizeof(ieee_pfc)) {
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
