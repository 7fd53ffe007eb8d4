// core/redact.h: every redacted value keeps its shape (a parser reads it as it read the host's),
// keeps what a support case needs (the OUI, the kind of a GID, loopback), is the same for the
// same value and key and differs under another key, and the file rules apply by path.
#include "core/redact.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace rdmascope::redact {
namespace {

Redactor Make(const std::string& key = "0123456789abcdef-fleet-key") {
  auto redactor = Redactor::WithKey(key);
  EXPECT_TRUE(redactor.has_value());
  return *redactor;
}

// The 16 bytes of an IPv6 text.
std::string Raw6(const std::string& text) {
  in6_addr addr{};
  EXPECT_EQ(inet_pton(AF_INET6, text.c_str(), &addr), 1) << text;
  return std::string(reinterpret_cast<const char*>(&addr), 16);
}

TEST(Redact, AShortKeyIsRefusedARandomOneWorks) {
  EXPECT_FALSE(Redactor::WithKey("short").has_value());
  const auto random = Redactor::WithRandomKey();
  ASSERT_TRUE(random.has_value());
  EXPECT_NE(random->Name("host", "node17"), Make().Name("host", "node17"));
}

TEST(Redact, TheSameValueAndKeyGiveTheSameTokenAnotherKeyAnother) {
  const Redactor a = Make(), b = Make(), other = Make("another-key-of-16-bytes");
  EXPECT_EQ(a.Name("host", "node17"), b.Name("host", "node17"));
  EXPECT_NE(a.Name("host", "node17"), other.Name("host", "node17"));
  EXPECT_NE(a.Name("host", "node17"), a.Name("pod", "node17")) << "kinds are apart";
  const std::string name = a.Name("host", "node17.example.com");
  EXPECT_EQ(name.size(), 15U);
  EXPECT_EQ(name.rfind("host-", 0), 0U);
  EXPECT_EQ(name.find_first_not_of("host-0123456789abcdef"), std::string::npos) << name;
}

TEST(Redact, AGuidKeepsItsOuiAndForm) {
  const Redactor r = Make();
  const std::string out = r.GuidText("0002:c903:0042:1234");
  ASSERT_EQ(out.size(), 19U);
  EXPECT_EQ(out.substr(0, 7), "0002:c9") << "Mellanox's OUI 00:02:c9 stays";
  EXPECT_NE(out, "0002:c903:0042:1234");
  EXPECT_EQ(out[4], ':');
  EXPECT_EQ(out[14], ':');
  EXPECT_EQ(r.Guid(0x0002c90300421234ULL) >> 40, 0x0002c9ULL);
  EXPECT_EQ(r.GuidText("not a guid").rfind("guid-", 0), 0U);
}

TEST(Redact, AMacKeepsItsOuiAndCaseAnIpoibAddressItsQpnAndGidKind) {
  const Redactor r = Make();
  const std::string mac = r.HardwareAddress("b8:59:9f:12:34:56");
  EXPECT_EQ(mac.substr(0, 9), "b8:59:9f:");
  EXPECT_NE(mac, "b8:59:9f:12:34:56");
  const std::string upper = r.HardwareAddress("B8:59:9F:12:34:56");
  EXPECT_EQ(upper.find_first_of("abcdef"), std::string::npos) << upper;
  // IPoIB: flags+QPN 00:00:10:87, GID fe80::2:c903:42:1235 (a port GUID).
  const std::string ipoib =
      r.HardwareAddress("00:00:10:87:fe:80:00:00:00:00:00:00:00:02:c9:03:00:42:12:35");
  ASSERT_EQ(ipoib.size(), 59U);
  EXPECT_EQ(ipoib.substr(0, 36), "00:00:10:87:fe:80:00:00:00:00:00:00:") << ipoib;
  EXPECT_EQ(ipoib.substr(36, 8), "00:02:c9") << "the port GUID's OUI";
}

TEST(Redact, AGidKeepsItsKind) {
  const Redactor r = Make();
  EXPECT_EQ(r.Gid("0000:0000:0000:0000:0000:0000:0000:0000"),
            "0000:0000:0000:0000:0000:0000:0000:0000");
  // IPv4-mapped (RoCE v2 over IPv4): its IPv4 as Ipv4 redacts it, in 10.0.0.0/8.
  const std::string mapped = r.Gid("0000:0000:0000:0000:0000:ffff:c0a8:0102");
  ASSERT_EQ(mapped.size(), 39U);
  EXPECT_EQ(mapped.substr(0, 27), "0000:0000:0000:0000:0000:ff");
  in_addr ip{};
  ASSERT_EQ(inet_pton(AF_INET, r.Ipv4("192.168.1.2").c_str(), &ip), 1);
  EXPECT_EQ(Raw6(mapped).substr(12), std::string(reinterpret_cast<const char*>(&ip), 4));
  EXPECT_EQ(r.Ipv4("192.168.1.2").rfind("10.", 0), 0U);
  // Link-local from a MAC (RoCE v1/v2 over IPv6 link-local): the same MAC as the netdev's
  // address file redacts to.
  const std::string eui = r.Gid("fe80:0000:0000:0000:ba59:9fff:fe12:3456");
  EXPECT_EQ(eui.substr(0, 20), "fe80:0000:0000:0000:");
  EXPECT_EQ(eui.substr(27, 5), "ff:fe") << eui;
  const std::string mac = r.HardwareAddress("b8:59:9f:12:34:56");
  std::string raw = Raw6(eui);
  EXPECT_EQ(static_cast<uint8_t>(raw[8]) ^ 2, 0xb8);
  char derived[18];
  std::snprintf(derived, sizeof derived, "%02x:%02x:%02x:%02x:%02x:%02x",
                static_cast<uint8_t>(raw[8]) ^ 2, static_cast<uint8_t>(raw[9]),
                static_cast<uint8_t>(raw[10]), static_cast<uint8_t>(raw[13]),
                static_cast<uint8_t>(raw[14]), static_cast<uint8_t>(raw[15]));
  EXPECT_EQ(std::string(derived), mac);
  // Link-local from a port GUID (InfiniBand): the GUID as Guid redacts it.
  raw = Raw6(r.Gid("fe80::2:c903:42:1235"));
  uint64_t iid = 0;
  for (int i = 8; i < 16; ++i) iid = iid << 8 | static_cast<uint8_t>(raw[i]);
  EXPECT_EQ(iid, r.Guid(0x0002c90300421235ULL));
  // Global: a unique local address, written short as it came.
  const std::string global = r.Gid("2001:db8::1");
  EXPECT_EQ(global.rfind("fd", 0), 0U) << global;
  EXPECT_EQ(r.Gid("zz").rfind("gid-", 0), 0U);
  EXPECT_EQ(r.Ipv4("127.0.0.1"), "127.0.0.1");
  EXPECT_EQ(r.Ipv4("0.0.0.0"), "0.0.0.0");
}

TEST(Redact, ASerialKeepsItsLengthAndClasses) {
  const std::string out = Make().Serial("MT2231X12345-ab");
  ASSERT_EQ(out.size(), 15U);
  EXPECT_NE(out, "MT2231X12345-ab");
  for (size_t i = 0; i < out.size(); ++i) {
    const char in = std::string("MT2231X12345-ab")[i];
    EXPECT_EQ(std::isdigit(in) != 0, std::isdigit(out[i]) != 0) << i;
    EXPECT_EQ(std::isupper(in) != 0, std::isupper(out[i]) != 0) << i;
    EXPECT_EQ(std::islower(in) != 0, std::islower(out[i]) != 0) << i;
  }
  EXPECT_EQ(out[12], '-');
}

TEST(Redact, FilesByPath) {
  const Redactor r = Make();
  EXPECT_EQ(RedactFile(r, "sys/class/infiniband/mlx5_0/node_guid", "0002:c903:0042:1234\n"),
            r.GuidText("0002:c903:0042:1234") + "\n");
  EXPECT_EQ(RedactFile(r, "sys/class/infiniband/mlx5_0/ports/1/gids/1",
                       "0000:0000:0000:0000:0000:ffff:c0a8:0102\n"),
            r.Gid("0000:0000:0000:0000:0000:ffff:c0a8:0102") + "\n");
  EXPECT_EQ(RedactFile(r, "sys/class/net/eth2/address", "b8:59:9f:12:34:56\n"),
            r.HardwareAddress("b8:59:9f:12:34:56") + "\n");
  // The host name, in its file and as rdma-ndd writes it into node_desc, hashes alike.
  EXPECT_EQ(RedactFile(r, "proc/sys/kernel/hostname", "node17\n"), r.Name("host", "node17") + "\n");
  EXPECT_EQ(RedactFile(r, "sys/class/infiniband/mlx5_0/node_desc", "node17 mlx5_0\n"),
            r.Name("host", "node17") + " mlx5_0\n");
  EXPECT_EQ(RedactFile(r, "sys/class/infiniband/mlx5_0/node_desc", "MT4125\n"), "MT4125\n");
  // Container ids and pod UIDs (both cgroup drivers' spellings) in a cgroup file.
  const std::string id(64, 'a');
  const std::string cgroup =
      "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1b2c3d4e_5f60_7182_"
      "93a4_b5c6d7e8f901.slice/cri-containerd-" +
      id + ".scope\n";
  const std::string redacted = RedactFile(r, "proc/4242/cgroup", cgroup);
  EXPECT_EQ(redacted.size(), cgroup.size());
  EXPECT_EQ(redacted.find(id), std::string::npos) << redacted;
  EXPECT_EQ(redacted.find("1b2c3d4e"), std::string::npos) << redacted;
  EXPECT_NE(redacted.find("kubepods-burstable-pod"), std::string::npos) << redacted;
  EXPECT_NE(redacted.find(r.Token("container", id, 64)), std::string::npos);
  EXPECT_EQ(
      RedactFile(r, "proc/4242/cgroup", "0::/user.slice/-pod1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901\n")
          .find("1b2c3d4e"),
      std::string::npos);
  // No rule: as it came.
  EXPECT_EQ(RedactFile(r, "sys/class/infiniband/mlx5_0/fw_ver", "22.36.1010\n"), "22.36.1010\n");
  EXPECT_EQ(RedactFile(r, "", ""), "");
}

}  // namespace
}  // namespace rdmascope::redact
