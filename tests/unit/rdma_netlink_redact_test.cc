// sys/rdma_netlink_redact.h: an nldev reply's identifying attributes are redacted in place (the
// same bytes elsewhere, the same lengths), nested tables included, and a reply cut short is
// not kept.
#include "sys/rdma_netlink_redact.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <libmnl/libmnl.h>
#include <netinet/in.h>
#include <rdma/rdma_netlink.h>

#include <cstring>
#include <string>
#include <vector>

namespace rdmascope::sys {
namespace {

redact::Redactor Make() { return *redact::Redactor::WithKey("0123456789abcdef-fleet-key"); }

constexpr uint64_t kGuid = 0x0002c90300421234ULL;

// A table as nldev writes it (nla_nest_start_noflag): without NLA_F_NESTED.
nlattr* NestNoFlag(nlmsghdr* message, uint16_t type) {
  nlattr* nest = mnl_attr_nest_start(message, type);
  nest->nla_type &= static_cast<uint16_t>(~NLA_F_NESTED);
  return nest;
}

// One RES_CM_ID_GET reply (an entry with an IPv4 source and IPv6 destination, beside a QP's
// number) followed by a DEV_GET reply with the node GUID, a subnet prefix and NLMSG_DONE.
std::string Reply(uint64_t subnet_prefix = 0xfe80000000000000ULL) {
  std::vector<char> buffer(MNL_SOCKET_BUFFER_SIZE);
  std::string out;
  nlmsghdr* cm = mnl_nlmsg_put_header(buffer.data());
  cm->nlmsg_type = RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_RES_CM_ID_GET);
  mnl_attr_put_u32(cm, RDMA_NLDEV_ATTR_DEV_INDEX, 3);
  nlattr* table = NestNoFlag(cm, RDMA_NLDEV_ATTR_RES_CM_ID);
  nlattr* entry = NestNoFlag(cm, RDMA_NLDEV_ATTR_RES_CM_ID_ENTRY);
  mnl_attr_put_u32(cm, RDMA_NLDEV_ATTR_RES_LQPN, 0x1234);
  sockaddr_storage src{}, dst{};
  auto* v4 = reinterpret_cast<sockaddr_in*>(&src);
  v4->sin_family = AF_INET;
  v4->sin_port = htons(4791);
  inet_pton(AF_INET, "192.168.1.2", &v4->sin_addr);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&dst);
  v6->sin6_family = AF_INET6;
  inet_pton(AF_INET6, "fe80::ba59:9fff:fe12:3456", &v6->sin6_addr);
  mnl_attr_put(cm, RDMA_NLDEV_ATTR_RES_SRC_ADDR, sizeof src, &src);
  mnl_attr_put(cm, RDMA_NLDEV_ATTR_RES_DST_ADDR, sizeof dst, &dst);
  mnl_attr_nest_end(cm, entry);
  mnl_attr_nest_end(cm, table);
  out.append(static_cast<char*>(static_cast<void*>(cm)), NLMSG_ALIGN(cm->nlmsg_len));

  nlmsghdr* dev = mnl_nlmsg_put_header(buffer.data());
  dev->nlmsg_type = RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_GET);
  mnl_attr_put_strz(dev, RDMA_NLDEV_ATTR_DEV_NAME, "mlx5_0");
  mnl_attr_put_u64(dev, RDMA_NLDEV_ATTR_NODE_GUID, kGuid);
  mnl_attr_put_u64(dev, RDMA_NLDEV_ATTR_SUBNET_PREFIX, subnet_prefix);
  out.append(static_cast<char*>(static_cast<void*>(dev)), NLMSG_ALIGN(dev->nlmsg_len));

  nlmsghdr* done = mnl_nlmsg_put_header(buffer.data());
  done->nlmsg_type = NLMSG_DONE;
  out.append(static_cast<char*>(static_cast<void*>(done)), NLMSG_ALIGN(done->nlmsg_len));
  return out;
}

// Where `needle` is in `haystack` (npos: nowhere).
size_t Find(const std::string& haystack, const void* needle, size_t len) {
  return haystack.find(std::string(static_cast<const char*>(needle), len));
}

TEST(RdmaNetlinkRedact, IdentifiersAreRedactedInPlaceTheRestKept) {
  const redact::Redactor redactor = Make();
  const std::string reply = Reply(0xfec0000000000001ULL);
  const auto redacted = RedactRdmaNetlink(redactor, reply);
  ASSERT_TRUE(redacted.has_value());
  ASSERT_EQ(redacted->size(), reply.size());
  in_addr ip{};
  inet_pton(AF_INET, "192.168.1.2", &ip);
  EXPECT_EQ(Find(*redacted, &ip, 4), std::string::npos);
  inet_pton(AF_INET, redactor.Ipv4("192.168.1.2").c_str(), &ip);
  EXPECT_NE(Find(*redacted, &ip, 4), std::string::npos) << "as core/redact maps it";
  in6_addr gid{};
  inet_pton(AF_INET6, "fe80::ba59:9fff:fe12:3456", &gid);
  EXPECT_EQ(Find(*redacted, &gid, 16), std::string::npos);
  inet_pton(AF_INET6, redactor.Gid("fe80::ba59:9fff:fe12:3456").c_str(), &gid);
  EXPECT_NE(Find(*redacted, &gid, 16), std::string::npos);
  uint64_t guid = kGuid;
  EXPECT_EQ(Find(*redacted, &guid, 8), std::string::npos);
  guid = redactor.Guid(kGuid);
  EXPECT_NE(Find(*redacted, &guid, 8), std::string::npos);
  uint64_t prefix = 0xfec0000000000001ULL;
  EXPECT_EQ(Find(*redacted, &prefix, 8), std::string::npos) << "a site's own subnet prefix";
  // Kept: the device's name and index, the QP's number, the port of the address.
  EXPECT_NE(redacted->find("mlx5_0"), std::string::npos);
  const uint32_t qpn = 0x1234;
  EXPECT_NE(Find(*redacted, &qpn, 4), std::string::npos);
  // The default subnet prefix is nobody's: kept.
  const auto plain = RedactRdmaNetlink(redactor, Reply());
  ASSERT_TRUE(plain.has_value());
  prefix = 0xfe80000000000000ULL;
  EXPECT_NE(Find(*plain, &prefix, 8), std::string::npos);
}

TEST(RdmaNetlinkRedact, AReplyCutShortIsNotKept) {
  const redact::Redactor redactor = Make();
  const std::string reply = Reply();
  EXPECT_FALSE(RedactRdmaNetlink(redactor, reply.substr(0, reply.size() - 30)).has_value());
  // An attribute claiming more than its message holds.
  std::string bad = reply;
  nlattr attr;
  std::memcpy(&attr, bad.data() + NLMSG_HDRLEN, sizeof attr);
  attr.nla_len = 0xfff0;
  std::memcpy(bad.data() + NLMSG_HDRLEN, &attr, sizeof attr);
  EXPECT_FALSE(RedactRdmaNetlink(redactor, bad).has_value());
  EXPECT_TRUE(RedactRdmaNetlink(redactor, "").has_value());
}

}  // namespace
}  // namespace rdmascope::sys
