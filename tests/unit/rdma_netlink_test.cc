// RDMA netlink dumps, built here as the kernel's nldev.c builds them, then parsed.
#include "sys/rdma_netlink.h"

#include <gtest/gtest.h>
#include <libmnl/libmnl.h>
#include <rdma/rdma_netlink.h>

#include <cerrno>
#include <functional>

namespace rdmascope::sys {
namespace {

constexpr uint32_t kSeq = 77;

// A receive buffer: messages appended one after the other, as one recv() returns them.
class Reply {
 public:
  nlmsghdr* Message(uint16_t command, uint32_t seq = kSeq) {
    auto* message = mnl_nlmsg_put_header(Tail());
    message->nlmsg_type = RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, command);
    message->nlmsg_flags = NLM_F_MULTI;
    message->nlmsg_seq = seq;
    open_ = message;
    return message;
  }
  void Done() {
    auto* message = mnl_nlmsg_put_header(Tail());
    message->nlmsg_type = NLMSG_DONE;
    message->nlmsg_flags = NLM_F_MULTI;
    message->nlmsg_seq = kSeq;
    mnl_nlmsg_put_extra_header(message, sizeof(int));
    Close(message);
  }
  void Error(int err) {
    auto* message = mnl_nlmsg_put_header(Tail());
    message->nlmsg_type = NLMSG_ERROR;
    message->nlmsg_seq = kSeq;
    auto* error = static_cast<nlmsgerr*>(mnl_nlmsg_put_extra_header(message, sizeof(nlmsgerr)));
    error->error = -err;
    Close(message);
  }
  void Close(nlmsghdr* message = nullptr) {
    used_ += (message ? message : open_)->nlmsg_len;
    open_ = nullptr;
  }
  const char* data() const { return buf_; }
  size_t size() const { return used_; }

 private:
  char* Tail() { return buf_ + used_; }
  alignas(8) char buf_[16384] = {};
  size_t used_ = 0;
  nlmsghdr* open_ = nullptr;
};

void PutDevice(nlmsghdr* message, uint32_t index, const char* name) {
  mnl_attr_put_u32(message, RDMA_NLDEV_ATTR_DEV_INDEX, index);
  mnl_attr_put_strz(message, RDMA_NLDEV_ATTR_DEV_NAME, name);
}

void PutSummary(nlmsghdr* message, std::initializer_list<std::pair<const char*, uint64_t>> rows) {
  nlattr* table = mnl_attr_nest_start(message, RDMA_NLDEV_ATTR_RES_SUMMARY);
  for (const auto& [name, count] : rows) {
    nlattr* entry = mnl_attr_nest_start(message, RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY);
    mnl_attr_put_strz(message, RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_NAME, name);
    mnl_attr_put_u64(message, RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_CURR, count);
    mnl_attr_nest_end(message, entry);
  }
  mnl_attr_nest_end(message, table);
}

// One resource entry nest; `fill` adds its attributes.
void PutEntry(nlmsghdr* message, uint16_t entry_type, const std::function<void()>& fill) {
  nlattr* entry = mnl_attr_nest_start(message, entry_type);
  fill();
  mnl_attr_nest_end(message, entry);
}

TEST(RdmaNetlink, SummaryOfTwoDevices) {
  Reply reply;
  nlmsghdr* m = reply.Message(RDMA_NLDEV_CMD_RES_GET);
  PutDevice(m, 0, "mlx5_0");
  PutSummary(m,
             {{"pd", 3}, {"cq", 4}, {"qp", 9}, {"cm_id", 0}, {"mr", 12}, {"ctx", 2}, {"srq", 1}});
  reply.Close();
  m = reply.Message(RDMA_NLDEV_CMD_RES_GET);
  PutDevice(m, 1, "rxe0");
  PutSummary(m, {{"pd", 1}});
  reply.Close();
  reply.Done();
  std::vector<RdmaDeviceResources> devices;
  EXPECT_EQ(ParseResourceSummaryReply(reply.data(), reply.size(), kSeq, devices), 0);
  ASSERT_EQ(devices.size(), 2U);
  EXPECT_EQ(devices[0].name, "mlx5_0");
  EXPECT_EQ(devices[0].index, 0U);
  EXPECT_EQ(devices[0].summary.at("qp"), 9U);
  EXPECT_EQ(devices[0].summary.at("srq"), 1U);
  EXPECT_EQ(devices[0].summary.size(), 7U);
  EXPECT_EQ(devices[1].name, "rxe0");
  EXPECT_EQ(devices[1].index, 1U);
}

TEST(RdmaNetlink, QpsOfAProcessAndOfTheKernel) {
  Reply reply;
  nlmsghdr* m = reply.Message(RDMA_NLDEV_CMD_RES_QP_GET);
  PutDevice(m, 0, "rxe0");
  nlattr* table = mnl_attr_nest_start(m, RDMA_NLDEV_ATTR_RES_QP);
  PutEntry(m, RDMA_NLDEV_ATTR_RES_QP_ENTRY, [&] {
    mnl_attr_put_u32(m, RDMA_NLDEV_ATTR_PORT_INDEX, 1);
    mnl_attr_put_u32(m, RDMA_NLDEV_ATTR_RES_LQPN, 17);
    mnl_attr_put_u32(m, RDMA_NLDEV_ATTR_RES_RQPN, 18);
    mnl_attr_put_u8(m, RDMA_NLDEV_ATTR_RES_TYPE, 2);   // RC
    mnl_attr_put_u8(m, RDMA_NLDEV_ATTR_RES_STATE, 3);  // RTS
    mnl_attr_put_u32(m, RDMA_NLDEV_ATTR_RES_PID, 4242);
  });
  PutEntry(m, RDMA_NLDEV_ATTR_RES_QP_ENTRY, [&] {
    mnl_attr_put_u32(m, RDMA_NLDEV_ATTR_RES_LQPN, 1);
    mnl_attr_put_u8(m, RDMA_NLDEV_ATTR_RES_TYPE, 1);  // GSI
    mnl_attr_put_u8(m, RDMA_NLDEV_ATTR_RES_STATE, 3);
    mnl_attr_put_strz(m, RDMA_NLDEV_ATTR_RES_KERN_NAME, "ib_core");
  });
  mnl_attr_nest_end(m, table);
  reply.Close();
  std::vector<RdmaResourceEntry> entries;
  EXPECT_EQ(ParseResourceReply(reply.data(), reply.size(), kSeq, RdmaResourceKind::kQp, entries), 1)
      << "no NLMSG_DONE yet: the dump goes on";
  ASSERT_EQ(entries.size(), 2U);
  EXPECT_EQ(entries[0].kind, RdmaResourceKind::kQp);
  EXPECT_EQ(entries[0].pid, 4242U);
  EXPECT_EQ(entries[0].id, 17U);
  EXPECT_EQ(QpTypeName(*entries[0].qp_type), "RC");
  EXPECT_EQ(QpStateName(*entries[0].qp_state), "RTS");
  EXPECT_FALSE(entries[1].pid);
  EXPECT_EQ(entries[1].kernel_name, "ib_core");
  EXPECT_EQ(QpTypeName(*entries[1].qp_type), "GSI");
}

TEST(RdmaNetlink, CqCapacityAndMrLength) {
  Reply reply;
  nlmsghdr* m = reply.Message(RDMA_NLDEV_CMD_RES_CQ_GET);
  PutDevice(m, 0, "mlx5_0");
  nlattr* table = mnl_attr_nest_start(m, RDMA_NLDEV_ATTR_RES_CQ);
  PutEntry(m, RDMA_NLDEV_ATTR_RES_CQ_ENTRY, [&] {
    mnl_attr_put_u32(m, RDMA_NLDEV_ATTR_RES_CQE, 511);
    mnl_attr_put_u64(m, RDMA_NLDEV_ATTR_RES_USECNT, 2);
    mnl_attr_put_u32(m, RDMA_NLDEV_ATTR_RES_CQN, 5);
    mnl_attr_put_u32(m, RDMA_NLDEV_ATTR_RES_PID, 10);
  });
  mnl_attr_nest_end(m, table);
  reply.Close();
  reply.Done();
  std::vector<RdmaResourceEntry> cqs;
  EXPECT_EQ(ParseResourceReply(reply.data(), reply.size(), kSeq, RdmaResourceKind::kCq, cqs), 0);
  ASSERT_EQ(cqs.size(), 1U);
  EXPECT_EQ(cqs[0].cq_entries, 511U);
  EXPECT_EQ(cqs[0].id, 5U);

  Reply mrs_reply;
  m = mrs_reply.Message(RDMA_NLDEV_CMD_RES_MR_GET);
  PutDevice(m, 0, "mlx5_0");
  table = mnl_attr_nest_start(m, RDMA_NLDEV_ATTR_RES_MR);
  PutEntry(m, RDMA_NLDEV_ATTR_RES_MR_ENTRY, [&] {
    mnl_attr_put_u64(m, RDMA_NLDEV_ATTR_RES_MRLEN, 8ULL << 30);
    mnl_attr_put_u32(m, RDMA_NLDEV_ATTR_RES_PID, 10);
  });
  mnl_attr_nest_end(m, table);
  mrs_reply.Close();
  std::vector<RdmaResourceEntry> mrs;
  EXPECT_EQ(
      ParseResourceReply(mrs_reply.data(), mrs_reply.size(), kSeq, RdmaResourceKind::kMr, mrs), 1);
  ASSERT_EQ(mrs.size(), 1U);
  EXPECT_EQ(mrs[0].mr_length, 8ULL << 30) << "lengths above 4 GiB are u64";
}

TEST(RdmaNetlink, KernelErrorsAndMalformedMessages) {
  {
    Reply reply;
    reply.Error(EOPNOTSUPP);
    std::vector<RdmaResourceEntry> entries;
    EXPECT_EQ(ParseResourceReply(reply.data(), reply.size(), kSeq, RdmaResourceKind::kSrq, entries),
              -EOPNOTSUPP)
        << "an older kernel without SRQ tracking";
  }
  {
    Reply reply;  // a CQ reply where a QP reply is expected
    reply.Message(RDMA_NLDEV_CMD_RES_CQ_GET);
    reply.Close();
    std::vector<RdmaResourceEntry> entries;
    EXPECT_EQ(ParseResourceReply(reply.data(), reply.size(), kSeq, RdmaResourceKind::kQp, entries),
              -EBADMSG);
  }
  {
    Reply reply;  // a device index of the wrong size
    nlmsghdr* m = reply.Message(RDMA_NLDEV_CMD_RES_GET);
    mnl_attr_put_u8(m, RDMA_NLDEV_ATTR_DEV_INDEX, 1);
    reply.Close();
    std::vector<RdmaDeviceResources> devices;
    EXPECT_EQ(ParseResourceSummaryReply(reply.data(), reply.size(), kSeq, devices), -EBADMSG);
  }
  {
    Reply reply;  // a summary row without its count
    nlmsghdr* m = reply.Message(RDMA_NLDEV_CMD_RES_GET);
    PutDevice(m, 0, "x");
    nlattr* table = mnl_attr_nest_start(m, RDMA_NLDEV_ATTR_RES_SUMMARY);
    nlattr* entry = mnl_attr_nest_start(m, RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY);
    mnl_attr_put_strz(m, RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_NAME, "qp");
    mnl_attr_nest_end(m, entry);
    mnl_attr_nest_end(m, table);
    reply.Close();
    std::vector<RdmaDeviceResources> devices;
    EXPECT_EQ(ParseResourceSummaryReply(reply.data(), reply.size(), kSeq, devices), -EBADMSG);
  }
  {
    Reply reply;  // a reply to another request
    reply.Message(RDMA_NLDEV_CMD_RES_GET, kSeq + 1);
    reply.Close();
    std::vector<RdmaDeviceResources> devices;
    EXPECT_EQ(ParseResourceSummaryReply(reply.data(), reply.size(), kSeq, devices), -EPROTO);
  }
  {
    Reply reply;  // truncated in the middle of a message
    nlmsghdr* m = reply.Message(RDMA_NLDEV_CMD_RES_GET);
    PutDevice(m, 0, "mlx5_0");
    reply.Close();
    std::vector<RdmaDeviceResources> devices;
    EXPECT_LT(ParseResourceSummaryReply(reply.data(), reply.size() - 3, kSeq, devices), 1)
        << "never reported as a dump that goes on";
  }
}

TEST(RdmaNetlink, EntriesWithoutAnOwnerAreKept) {
  Reply reply;
  nlmsghdr* m = reply.Message(RDMA_NLDEV_CMD_RES_PD_GET);
  nlattr* table = mnl_attr_nest_start(m, RDMA_NLDEV_ATTR_RES_PD);
  PutEntry(m, RDMA_NLDEV_ATTR_RES_PD_ENTRY,
           [&] { mnl_attr_put_u32(m, RDMA_NLDEV_ATTR_RES_PDN, 3); });
  mnl_attr_nest_end(m, table);
  reply.Close();
  std::vector<RdmaResourceEntry> entries;
  EXPECT_EQ(ParseResourceReply(reply.data(), reply.size(), kSeq, RdmaResourceKind::kPd, entries),
            1);
  ASSERT_EQ(entries.size(), 1U);
  EXPECT_FALSE(entries[0].pid);
  EXPECT_TRUE(entries[0].kernel_name.empty());
}

TEST(RdmaNetlink, Requests) {
  std::vector<char> buf;
  const size_t len = BuildResourceDump(RdmaResourceKind::kCq, 3, 9, buf);
  ASSERT_GT(len, sizeof(nlmsghdr));
  const auto* message = reinterpret_cast<const nlmsghdr*>(buf.data());
  EXPECT_EQ(message->nlmsg_type, RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_RES_CQ_GET));
  EXPECT_EQ(message->nlmsg_flags, NLM_F_REQUEST | NLM_F_DUMP);
  EXPECT_EQ(message->nlmsg_seq, 9U);
  const auto* attr = static_cast<const nlattr*>(mnl_nlmsg_get_payload(message));
  EXPECT_EQ(mnl_attr_get_type(attr), RDMA_NLDEV_ATTR_DEV_INDEX);
  EXPECT_EQ(mnl_attr_get_u32(attr), 3U);
  EXPECT_EQ(BuildResourceSummaryDump(1, buf), sizeof(nlmsghdr)) << "no attribute: all devices";
}

TEST(RdmaNetlink, RawCqQueryAndReply) {
  std::vector<char> buf;
  const size_t len = BuildRawCqQuery(2, 17, 5, buf);
  const auto* request = reinterpret_cast<const nlmsghdr*>(buf.data());
  EXPECT_EQ(len, request->nlmsg_len);
  EXPECT_EQ(request->nlmsg_type, RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_RES_CQ_GET_RAW));
  EXPECT_EQ(request->nlmsg_flags, NLM_F_REQUEST) << "one CQ, not a dump";

  Reply reply;
  nlmsghdr* m = reply.Message(RDMA_NLDEV_CMD_RES_CQ_GET_RAW);
  PutDevice(m, 2, "mlx5_2");
  const uint8_t blob[] = {0x00, 0x04, 0xff, 0xfc, 1, 2, 3, 4};
  mnl_attr_put(m, RDMA_NLDEV_ATTR_RES_RAW, sizeof blob, blob);
  reply.Close();
  std::vector<uint8_t> raw;
  EXPECT_EQ(ParseRawCqReply(reply.data(), reply.size(), kSeq, raw), 0);
  EXPECT_EQ(raw, std::vector<uint8_t>(std::begin(blob), std::end(blob)));

  Reply refused;  // rxe: no raw dump in the driver
  refused.Error(EINVAL);
  EXPECT_EQ(ParseRawCqReply(refused.data(), refused.size(), kSeq, raw), -EINVAL);
}

// nldev.c fill_port_info: DEV_INDEX, DEV_NAME, PORT_INDEX, ..., then NDEV_INDEX and NDEV_NAME
// only `if (netdev && net_eq(dev_net(netdev), net))`. Port 1's netdev is in our namespace;
// port 2's was moved into a pod's, so the kernel leaves both attributes out.
TEST(RdmaNetlink, PortNetdevOnlyInOurNamespace) {
  Reply reply;
  nlmsghdr* m = reply.Message(RDMA_NLDEV_CMD_PORT_GET);
  PutDevice(m, 4, "mlx5_0");
  mnl_attr_put_u32(m, RDMA_NLDEV_ATTR_PORT_INDEX, 1);
  mnl_attr_put_u8(m, RDMA_NLDEV_ATTR_PORT_STATE, 4);
  mnl_attr_put_u8(m, RDMA_NLDEV_ATTR_PORT_PHYS_STATE, 5);
  mnl_attr_put_u32(m, RDMA_NLDEV_ATTR_NDEV_INDEX, 7);
  mnl_attr_put_strz(m, RDMA_NLDEV_ATTR_NDEV_NAME, "ens1f0np0");
  reply.Close();
  m = reply.Message(RDMA_NLDEV_CMD_PORT_GET);
  PutDevice(m, 4, "mlx5_0");
  mnl_attr_put_u32(m, RDMA_NLDEV_ATTR_PORT_INDEX, 2);
  mnl_attr_put_u8(m, RDMA_NLDEV_ATTR_PORT_STATE, 4);
  reply.Close();
  reply.Done();
  std::vector<RdmaPortNetdev> ports;
  EXPECT_EQ(ParsePortReply(reply.data(), reply.size(), kSeq, ports), 0);
  ASSERT_EQ(ports.size(), 2U);
  EXPECT_EQ(ports[0].device, "mlx5_0");
  EXPECT_EQ(ports[0].device_index, 4U);
  EXPECT_EQ(ports[0].port, 1U);
  EXPECT_EQ(ports[0].netdev, "ens1f0np0");
  EXPECT_EQ(ports[1].port, 2U);
  EXPECT_EQ(ports[1].netdev, "");
}

TEST(RdmaNetlink, MalformedPortReplies) {
  {
    Reply reply;  // no port index
    nlmsghdr* m = reply.Message(RDMA_NLDEV_CMD_PORT_GET);
    PutDevice(m, 0, "rxe0");
    reply.Close();
    std::vector<RdmaPortNetdev> ports;
    EXPECT_EQ(ParsePortReply(reply.data(), reply.size(), kSeq, ports), -EBADMSG);
  }
  {
    Reply reply;  // a netdev name without its NUL terminator
    nlmsghdr* m = reply.Message(RDMA_NLDEV_CMD_PORT_GET);
    mnl_attr_put_u32(m, RDMA_NLDEV_ATTR_PORT_INDEX, 1);
    mnl_attr_put(m, RDMA_NLDEV_ATTR_NDEV_NAME, 3, "eth");
    reply.Close();
    std::vector<RdmaPortNetdev> ports;
    EXPECT_EQ(ParsePortReply(reply.data(), reply.size(), kSeq, ports), -EBADMSG);
  }
  {
    Reply reply;  // nldev_port_get_dumpit without a device index answers EINVAL
    reply.Error(EINVAL);
    std::vector<RdmaPortNetdev> ports;
    EXPECT_EQ(ParsePortReply(reply.data(), reply.size(), kSeq, ports), -EINVAL);
  }
}

TEST(RdmaNetlink, DeviceListAndPortRequests) {
  Reply reply;
  nlmsghdr* m = reply.Message(RDMA_NLDEV_CMD_GET);
  PutDevice(m, 0, "mlx5_0");
  reply.Close();
  m = reply.Message(RDMA_NLDEV_CMD_GET);
  PutDevice(m, 3, "rxe0");
  reply.Close();
  reply.Done();
  std::vector<RdmaDeviceResources> devices;
  EXPECT_EQ(ParseDeviceReply(reply.data(), reply.size(), kSeq, devices), 0);
  ASSERT_EQ(devices.size(), 2U);
  EXPECT_EQ(devices[1].index, 3U);
  EXPECT_EQ(devices[1].name, "rxe0");

  std::vector<char> buf;
  EXPECT_EQ(BuildDeviceDump(1, buf), sizeof(nlmsghdr));
  const auto* dump = reinterpret_cast<const nlmsghdr*>(buf.data());
  EXPECT_EQ(dump->nlmsg_type, RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_GET));
  ASSERT_GT(BuildPortDump(3, 2, buf), sizeof(nlmsghdr));
  const auto* message = reinterpret_cast<const nlmsghdr*>(buf.data());
  EXPECT_EQ(message->nlmsg_type, RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_PORT_GET));
  EXPECT_EQ(message->nlmsg_flags, NLM_F_REQUEST | NLM_F_DUMP);
  const auto* attr = static_cast<const nlattr*>(mnl_nlmsg_get_payload(message));
  EXPECT_EQ(mnl_attr_get_type(attr), RDMA_NLDEV_ATTR_DEV_INDEX) << "the kernel requires it";
  EXPECT_EQ(mnl_attr_get_u32(attr), 3U);
}

TEST(RdmaNetlink, Names) {
  EXPECT_EQ(QpTypeName(4), "UD");
  EXPECT_EQ(QpTypeName(10), "XRC_TGT");
  EXPECT_EQ(QpTypeName(0xff), "DRIVER");
  EXPECT_EQ(QpTypeName(7), "UNKNOWN_7");
  EXPECT_EQ(QpStateName(6), "ERR");
  EXPECT_EQ(QpStateName(9), "UNKNOWN_9");
  EXPECT_EQ(ResourceKindName(RdmaResourceKind::kCmId), "cm_id");
}

}  // namespace
}  // namespace rdmascope::sys
