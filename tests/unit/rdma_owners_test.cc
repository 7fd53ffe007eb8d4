// Owners of RDMA objects (sys/rdma_owners.*): restrack dumps the creating thread's id, or no
// pid once that thread has exited; objects are attributed to their process, through their
// PD or context when their thread is gone. The entries are parsed from netlink messages built
// as nldev.c fill_res_{ctx,pd,cq,mr}_entry builds them.
#include "sys/rdma_owners.h"

#include <gtest/gtest.h>
#include <libmnl/libmnl.h>
#include <rdma/rdma_netlink.h>

#include <optional>
#include <vector>

namespace rdmascope::sys {
namespace {

constexpr uint32_t kSeq = 3;

struct Object {
  std::optional<uint32_t> id;
  std::optional<uint32_t> pid;
  std::optional<uint32_t> pdn;   // MR
  std::optional<uint32_t> ctxn;  // PD, CQ
  const char* kernel_name = nullptr;
};

// One RES_*_GET message for `kind` with these entries, parsed by the exporter's parser.
std::vector<RdmaResourceEntry> Parse(RdmaResourceKind kind, const std::vector<Object>& objects) {
  struct Nests {
    uint16_t command, table, entry, id;
  };
  const Nests nests = kind == RdmaResourceKind::kCtx
                          ? Nests{RDMA_NLDEV_CMD_RES_CTX_GET, RDMA_NLDEV_ATTR_RES_CTX,
                                  RDMA_NLDEV_ATTR_RES_CTX_ENTRY, RDMA_NLDEV_ATTR_RES_CTXN}
                      : kind == RdmaResourceKind::kPd
                          ? Nests{RDMA_NLDEV_CMD_RES_PD_GET, RDMA_NLDEV_ATTR_RES_PD,
                                  RDMA_NLDEV_ATTR_RES_PD_ENTRY, RDMA_NLDEV_ATTR_RES_PDN}
                      : kind == RdmaResourceKind::kCq
                          ? Nests{RDMA_NLDEV_CMD_RES_CQ_GET, RDMA_NLDEV_ATTR_RES_CQ,
                                  RDMA_NLDEV_ATTR_RES_CQ_ENTRY, RDMA_NLDEV_ATTR_RES_CQN}
                          : Nests{RDMA_NLDEV_CMD_RES_MR_GET, RDMA_NLDEV_ATTR_RES_MR,
                                  RDMA_NLDEV_ATTR_RES_MR_ENTRY, RDMA_NLDEV_ATTR_RES_MRN};
  alignas(8) static char buf[8192];
  nlmsghdr* m = mnl_nlmsg_put_header(buf);
  m->nlmsg_type = RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, nests.command);
  m->nlmsg_flags = NLM_F_MULTI;
  m->nlmsg_seq = kSeq;
  mnl_attr_put_u32(m, RDMA_NLDEV_ATTR_DEV_INDEX, 1);
  mnl_attr_put_strz(m, RDMA_NLDEV_ATTR_DEV_NAME, "mlx5_0");
  nlattr* table = mnl_attr_nest_start(m, nests.table);
  for (const Object& object : objects) {
    nlattr* entry = mnl_attr_nest_start(m, nests.entry);
    if (kind == RdmaResourceKind::kMr) mnl_attr_put_u64(m, RDMA_NLDEV_ATTR_RES_MRLEN, 4096);
    if (kind == RdmaResourceKind::kCq) mnl_attr_put_u32(m, RDMA_NLDEV_ATTR_RES_CQE, 255);
    if (object.id) mnl_attr_put_u32(m, nests.id, *object.id);
    if (object.pdn) mnl_attr_put_u32(m, RDMA_NLDEV_ATTR_RES_PDN, *object.pdn);
    if (object.ctxn) mnl_attr_put_u32(m, RDMA_NLDEV_ATTR_RES_CTXN, *object.ctxn);
    if (object.kernel_name) {
      mnl_attr_put_strz(m, RDMA_NLDEV_ATTR_RES_KERN_NAME, object.kernel_name);
    } else if (object.pid) {
      mnl_attr_put_u32(m, RDMA_NLDEV_ATTR_RES_PID, *object.pid);
    }
    mnl_attr_nest_end(m, entry);
  }
  mnl_attr_nest_end(m, table);
  std::vector<RdmaResourceEntry> entries;
  EXPECT_EQ(ParseResourceReply(buf, m->nlmsg_len, kSeq, kind, entries), 1);
  return entries;
}

// A trainer (process 100): its context opened by the main thread 100, PD 1 by a thread that
// is gone (101), PD 2 by thread 102 (alive); MRs from threads 100, 103 (alive), 104 and 105
// (gone); a CQ of thread 106 (gone); a kernel MR.
RdmaDeviceResources Trainer() {
  RdmaDeviceResources device{.index = 1, .name = "mlx5_0"};
  const auto add = [&](RdmaResourceKind kind, const std::vector<Object>& objects) {
    for (RdmaResourceEntry& entry : Parse(kind, objects)) device.entries.push_back(entry);
  };
  add(RdmaResourceKind::kCtx, {{.id = 0, .pid = 100}});
  add(RdmaResourceKind::kPd, {{.id = 1, .ctxn = 0}, {.id = 2, .pid = 102, .ctxn = 0}});
  add(RdmaResourceKind::kMr, {{.id = 10, .pid = 100, .pdn = 1},
                              {.id = 11, .pid = 103, .pdn = 2},
                              {.id = 12, .pdn = 2},
                              {.id = 13, .pdn = 1},
                              {.id = 14, .kernel_name = "ib_core"}});
  add(RdmaResourceKind::kCq, {{.id = 20, .ctxn = 0}});
  return device;
}

std::optional<uint32_t> Threads(uint32_t tid) {
  if (tid >= 100 && tid <= 103) return 100;
  return std::nullopt;  // gone
}

const RdmaResourceEntry& Find(const RdmaDeviceResources& device, RdmaResourceKind kind,
                              uint32_t id) {
  for (const RdmaResourceEntry& entry : device.entries) {
    if (entry.kind == kind && entry.id == id) return entry;
  }
  throw std::runtime_error("no such entry");
}

TEST(RdmaOwners, TheParserKeepsTheParentsOfEachObject) {
  const RdmaDeviceResources device = Trainer();
  EXPECT_EQ(Find(device, RdmaResourceKind::kMr, 13).pdn, 1U);
  EXPECT_EQ(Find(device, RdmaResourceKind::kMr, 13).pid, std::nullopt);
  EXPECT_EQ(Find(device, RdmaResourceKind::kPd, 2).ctxn, 0U);
  EXPECT_EQ(Find(device, RdmaResourceKind::kPd, 2).pdn, std::nullopt) << "its own pdn is its id";
  EXPECT_EQ(Find(device, RdmaResourceKind::kCq, 20).ctxn, 0U);
}

TEST(RdmaOwners, ObjectsOfExitedThreadsBelongToTheirProcessThroughTheirParents) {
  std::vector<RdmaDeviceResources> devices{Trainer()};
  ResolveOwners(devices, Threads);
  const RdmaDeviceResources& device = devices[0];
  for (const auto& [kind, id] :
       std::vector<std::pair<RdmaResourceKind, uint32_t>>{{RdmaResourceKind::kCtx, 0},
                                                          {RdmaResourceKind::kPd, 1},
                                                          {RdmaResourceKind::kPd, 2},
                                                          {RdmaResourceKind::kMr, 10},
                                                          {RdmaResourceKind::kMr, 11},
                                                          {RdmaResourceKind::kMr, 12},
                                                          {RdmaResourceKind::kMr, 13},
                                                          {RdmaResourceKind::kCq, 20}}) {
    EXPECT_EQ(Find(device, kind, id).pid, 100U) << ResourceKindName(kind) << " " << id;
  }
  EXPECT_FALSE(Find(device, RdmaResourceKind::kMr, 11).pid_from_parent) << "thread 103 lives";
  EXPECT_TRUE(Find(device, RdmaResourceKind::kMr, 12).pid_from_parent);
  EXPECT_TRUE(Find(device, RdmaResourceKind::kMr, 13).pid_from_parent) << "via PD 1, via ctx 0";
  EXPECT_TRUE(Find(device, RdmaResourceKind::kPd, 1).pid_from_parent);
  const RdmaResourceEntry& kernel = Find(device, RdmaResourceKind::kMr, 14);
  EXPECT_EQ(kernel.pid, std::nullopt);
  EXPECT_EQ(kernel.kernel_name, "ib_core");
}

TEST(RdmaOwners, AThreadGoneSinceTheDumpCountsAsGone) {
  std::vector<RdmaDeviceResources> devices{Trainer()};
  // Thread 103 exited between the dump and the lookup: MR 11 goes to PD 2's process.
  ResolveOwners(devices, [](uint32_t tid) { return tid == 103 ? std::nullopt : Threads(tid); });
  EXPECT_EQ(Find(devices[0], RdmaResourceKind::kMr, 11).pid, 100U);
  EXPECT_TRUE(Find(devices[0], RdmaResourceKind::kMr, 11).pid_from_parent);
}

TEST(RdmaOwners, AThreadThatCannotBeLookedUpWithNoParentKeepsItsDumpedPid) {
  std::vector<RdmaDeviceResources> devices{Trainer()};
  for (RdmaResourceEntry& entry : devices[0].entries) {
    if (entry.kind != RdmaResourceKind::kMr) entry.pid.reset();  // no parent names anyone
  }
  ResolveOwners(devices, [](uint32_t) { return std::nullopt; });  // /proc hides every thread
  EXPECT_EQ(Find(devices[0], RdmaResourceKind::kMr, 11).pid, 103U);
  EXPECT_FALSE(Find(devices[0], RdmaResourceKind::kMr, 11).pid_from_parent);
  EXPECT_EQ(Find(devices[0], RdmaResourceKind::kMr, 13).pid, std::nullopt);
}

TEST(RdmaOwners, AnExitingProcessKeepsNoOwnerAndParentsArePerDevice) {
  // On mlx5_1 every thread of the process is gone (it is exiting): nothing to inherit from,
  // and mlx5_0's context 0 is not mlx5_1's context 0.
  std::vector<RdmaDeviceResources> devices{Trainer(), Trainer()};
  devices[1].index = 2;
  devices[1].name = "mlx5_1";
  for (RdmaResourceEntry& entry : devices[1].entries) entry.pid.reset();
  int lookups = 0;
  ResolveOwners(devices, [&](uint32_t tid) {
    ++lookups;
    return Threads(tid);
  });
  EXPECT_EQ(lookups, 3) << "threads 100, 102 and 103, each looked up once";
  for (const RdmaResourceEntry& entry : devices[1].entries) {
    EXPECT_EQ(entry.pid, std::nullopt) << ResourceKindName(entry.kind) << " " << *entry.id;
  }
  EXPECT_EQ(Find(devices[0], RdmaResourceKind::kMr, 13).pid, 100U);
}

TEST(RdmaOwners, WithoutALookupPidsStayAsDumpedAndGapsAreStillFilled) {
  std::vector<RdmaDeviceResources> devices{Trainer()};
  ResolveOwners(devices, {});
  EXPECT_EQ(Find(devices[0], RdmaResourceKind::kMr, 11).pid, 103U);
  EXPECT_EQ(Find(devices[0], RdmaResourceKind::kMr, 12).pid, 102U) << "PD 2's creator";
  EXPECT_EQ(Find(devices[0], RdmaResourceKind::kMr, 13).pid, 100U) << "context's creator";
}

}  // namespace
}  // namespace rdmascope::sys
