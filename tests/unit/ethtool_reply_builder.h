// ethtool netlink dump replies built in the tests as the kernel builds them
// (net/ethtool/netlink.c ethnl_default_dump_one: one NLM_F_MULTI message per interface, the
// genlmsghdr with the reply command, the header nest with DEV_INDEX and DEV_NAME; then
// NLMSG_DONE), for tests/unit/ethtool_fec_test.cc and link_fec_test.cc.
#pragma once

#include <libmnl/libmnl.h>
#include <linux/ethtool_netlink.h>
#include <linux/genetlink.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace rdmascope::testing {

// A family id as the generic netlink controller assigns them (dynamic; any is fine).
inline constexpr uint16_t kEthtoolFamilyId = 0x15;

class EthtoolDump {
 public:
  // Starts one interface's reply; attributes go to message() until End().
  nlmsghdr* Begin(uint8_t reply_command, uint16_t header_attr, uint32_t ifindex,
                  const std::string& ifname) {
    buffer_.assign(16384, '\0');
    nlmsghdr* message = mnl_nlmsg_put_header(buffer_.data());
    message->nlmsg_type = kEthtoolFamilyId;
    message->nlmsg_flags = NLM_F_MULTI;
    message->nlmsg_seq = 7;
    auto* genl = static_cast<genlmsghdr*>(mnl_nlmsg_put_extra_header(message, GENL_HDRLEN));
    genl->cmd = reply_command;
    genl->version = ETHTOOL_GENL_VERSION;
    nlattr* header = mnl_attr_nest_start(message, header_attr);
    mnl_attr_put_u32(message, ETHTOOL_A_HEADER_DEV_INDEX, ifindex);
    mnl_attr_put_strz(message, ETHTOOL_A_HEADER_DEV_NAME, ifname.c_str());
    mnl_attr_nest_end(message, header);
    return message;
  }
  nlmsghdr* message() { return reinterpret_cast<nlmsghdr*>(buffer_.data()); }
  void End() { bytes_.append(buffer_.data(), MNL_ALIGN(message()->nlmsg_len)); }

  // A u64 array (nla_put_64bit of 8 x n bytes).
  static void PutArray(nlmsghdr* message, uint16_t type, const std::vector<uint64_t>& values) {
    mnl_attr_put(message, type, values.size() * sizeof(uint64_t), values.data());
  }

  // NLMSG_DONE (the kernel's carries an int, 0).
  std::string Done() {
    Control(NLMSG_DONE, 0);
    return bytes_;
  }
  // NLMSG_ERROR with -error (a dump the kernel refused).
  std::string Error(int error) {
    Control(NLMSG_ERROR, -error);
    return bytes_;
  }
  const std::string& bytes() const { return bytes_; }

 private:
  void Control(uint16_t type, int value) {
    std::vector<char> buf(NLMSG_HDRLEN + sizeof(nlmsgerr), '\0');
    nlmsghdr* message = mnl_nlmsg_put_header(buf.data());
    message->nlmsg_type = type;
    message->nlmsg_flags = NLM_F_MULTI;
    message->nlmsg_seq = 7;
    if (type == NLMSG_ERROR) {
      nlmsgerr err{};
      err.error = value;
      std::memcpy(mnl_nlmsg_put_extra_header(message, sizeof err), &err, sizeof err);
    } else {
      std::memcpy(mnl_nlmsg_put_extra_header(message, sizeof value), &value, sizeof value);
    }
    bytes_.append(buf.data(), message->nlmsg_len);
  }
  std::vector<char> buffer_;
  std::string bytes_;
};

}  // namespace rdmascope::testing
