#include <gtest/gtest.h>

#include <cerrno>
#include <map>

#include "collectors/resources.h"
#include "unit/fixture_tree.h"
#include "unit/mlx5_dump_builder.h"

namespace rdmascope {
namespace {

using sys::RdmaDeviceResources;
using sys::RdmaResourceEntry;
using sys::RdmaResourceKind;

RdmaResourceEntry Object(RdmaResourceKind kind, uint32_t pid) { return {.kind = kind, .pid = pid}; }
RdmaResourceEntry KernelObject(RdmaResourceKind kind, std::string name) {
  return {.kind = kind, .kernel_name = std::move(name)};
}

// Two devices: a trainer with an RC connection and a CQ, a storage client, the kernel's GSI
// QPs, and an object whose owner is exiting.
std::vector<RdmaDeviceResources> Host() {
  RdmaDeviceResources mlx{.index = 0, .name = "mlx5_0"};
  mlx.summary = {{"pd", 2}, {"cq", 3}, {"qp", 3}, {"mr", 2}, {"ctx", 1}, {"srq", 0}, {"cm_id", 0}};
  mlx.entries.push_back(Object(RdmaResourceKind::kCtx, 100));
  mlx.entries.push_back(Object(RdmaResourceKind::kPd, 100));
  auto cq = Object(RdmaResourceKind::kCq, 100);
  cq.cq_entries = 4095;
  cq.id = 1;  // with its raw mlx5 state: 700 completions waiting
  cq.raw = testing::Build({.log_size = 12, .producer = 5700, .consumer = 5000});
  mlx.entries.push_back(cq);
  cq.cq_entries = 255;
  cq.id = 2;
  cq.raw.clear();
  mlx.entries.push_back(cq);
  auto qp = Object(RdmaResourceKind::kQp, 100);
  qp.qp_type = 2;   // RC
  qp.qp_state = 3;  // RTS
  mlx.entries.push_back(qp);
  qp.qp_state = 6;  // ERR
  mlx.entries.push_back(qp);
  auto mr = Object(RdmaResourceKind::kMr, 100);
  mr.mr_length = 1 << 30;
  mlx.entries.push_back(mr);
  mr.mr_length = 4096;
  mlx.entries.push_back(mr);
  auto gsi = KernelObject(RdmaResourceKind::kQp, "ib_core");
  gsi.qp_type = 1;
  gsi.qp_state = 3;
  mlx.entries.push_back(gsi);
  mlx.entries.push_back(KernelObject(RdmaResourceKind::kPd, "ib_core"));
  mlx.entries.push_back(RdmaResourceEntry{.kind = RdmaResourceKind::kPd});  // owner exiting

  RdmaDeviceResources rxe{.index = 1, .name = "rxe0"};
  rxe.summary = {{"pd", 1}};
  rxe.entries.push_back(Object(RdmaResourceKind::kPd, 200));
  return {mlx, rxe};
}

std::string Comm(uint32_t pid) {
  static const std::map<uint32_t, std::string> comms = {{100, "trainer"}, {200, "fio"}};
  const auto it = comms.find(pid);
  return it == comms.end() ? "" : it->second;
}

TEST(ResourcesCollector, GoldenExposition) {
  MetricSet out;
  const ResourcesMapping mapping = MapResources(Host(), NameFilter(), 50, Comm, out);
  EXPECT_EQ(mapping.processes, 2U);
  EXPECT_EQ(mapping.folded_processes, 0U);
  EXPECT_EQ(out.dropped_duplicates(), 0U);
  EXPECT_TRUE(testing::MatchesGolden(testing::Serialise(out.Take()), "resources.prom"));
}

// Samples of one family as "labels -> value", labels rendered k=v,... in order.
std::map<std::string, double> Samples(MetricSet& out, const std::string& family_name) {
  std::map<std::string, double> samples;
  for (const auto& family : out.Take()) {
    if (family.name != family_name) continue;
    for (const auto& metric : family.metric) {
      std::string key;
      for (const auto& label : metric.label) key += label.name + "=" + label.value + ",";
      samples[key] = metric.gauge.value;
    }
  }
  return samples;
}

TEST(ResourcesCollector, ProcessesBeyondTheLimitAreSummedAsOther) {
  std::vector<RdmaDeviceResources> devices(1);
  devices[0].name = "mlx5_0";
  // pid 1 holds 1 object, pid 2 holds 2... pid 5 holds 5.
  for (uint32_t pid = 1; pid <= 5; ++pid) {
    for (uint32_t i = 0; i < pid; ++i)
      devices[0].entries.push_back(Object(RdmaResourceKind::kPd, pid));
  }
  MetricSet out;
  const ResourcesMapping mapping = MapResources(
      devices, NameFilter(), 2, [](uint32_t pid) { return "p" + std::to_string(pid); }, out);
  EXPECT_EQ(mapping.processes, 5U);
  EXPECT_EQ(mapping.folded_processes, 3U);
  const auto samples = Samples(out, "rdma_process_resources");
  EXPECT_EQ(samples.size(), 3U);
  EXPECT_EQ(samples.at("device=mlx5_0,pid=5,comm=p5,resource=pd,"), 5);
  EXPECT_EQ(samples.at("device=mlx5_0,pid=4,comm=p4,resource=pd,"), 4);
  EXPECT_EQ(samples.at("device=mlx5_0,pid=other,comm=other,resource=pd,"), 1 + 2 + 3)
      << "nothing lost: the sum over series equals the host's objects";
}

TEST(ResourcesCollector, HardwareOccupancyFromRawCqState) {
  std::vector<RdmaDeviceResources> devices(1);
  devices[0].name = "mlx5_0";
  auto cq = Object(RdmaResourceKind::kCq, 100);
  cq.id = 7;
  cq.cq_entries = 255;
  cq.raw = testing::Build({.log_size = 8, .producer = 1300, .consumer = 1000});
  devices[0].entries.push_back(cq);
  auto other_layout = cq;  // a 1023-entry CQ whose dump says 256: not trusted, not exported
  other_layout.id = 8;
  other_layout.cq_entries = 1023;
  devices[0].entries.push_back(other_layout);
  MetricSet out;
  const ResourcesMapping mapping = MapResources(devices, NameFilter(), 50, Comm, out);
  EXPECT_EQ(mapping.raw_cqs_decoded, 1U);
  EXPECT_EQ(mapping.raw_cqs_undecoded, 1U);
  const auto samples = Samples(out, "rdma_cq_hardware_occupancy_entries");
  ASSERT_EQ(samples.size(), 1U);
  EXPECT_EQ(samples.at("device=mlx5_0,pid=100,comm=trainer,cqn=7,"), 300);
}

TEST(ResourcesCollector, DeviceFilter) {
  MetricSet out;
  MapResources(Host(), NameFilter("", "rxe.*"), 50, Comm, out);
  for (const auto& [labels, value] : Samples(out, "rdma_resources")) {
    EXPECT_EQ(labels.find("rxe0"), std::string::npos) << labels;
  }
}

class FakeSource : public ResourceSource {
 public:
  explicit FakeSource(std::expected<std::vector<RdmaDeviceResources>, int> result)
      : result_(std::move(result)) {}
  std::expected<std::vector<RdmaDeviceResources>, int> Read() const override { return result_; }

 private:
  std::expected<std::vector<RdmaDeviceResources>, int> result_;
};

TEST(ResourcesCollector, AbsentSourcesAndFailures) {
  const auto collect = [](std::expected<std::vector<RdmaDeviceResources>, int> result) {
    ResourcesCollector collector({}, "/nonexistent", std::make_unique<FakeSource>(result));
    MetricSet out;
    return collector.Collect(out);
  };
  const CollectResult no_netlink = collect(std::unexpected(EPROTONOSUPPORT));
  EXPECT_TRUE(no_netlink.no_data);
  EXPECT_NE(no_netlink.detail.find("without InfiniBand"), std::string::npos);
  EXPECT_TRUE(collect(std::vector<RdmaDeviceResources>{}).no_data);
  EXPECT_THROW(collect(std::unexpected(EAGAIN)), std::runtime_error)
      << "a timed-out dump is a failed scrape of this collector, not zeros";
  auto devices = Host();
  devices[0].errors.push_back("srq: Operation not supported");
  const CollectResult partial = collect(devices);
  EXPECT_FALSE(partial.no_data);
  EXPECT_NE(partial.detail.find("mlx5_0 srq: Operation not supported"), std::string::npos);
}

// pid="unknown" also covers processes outside the exporter's pid namespace (nldev.c,
// fill_res_name_pid: task_pid_vnr() is 0 there and the pid is omitted), so the exporter must
// know whether it runs in the initial pid namespace. The kernel names that one
// "pid:[4026531836]" (PROC_PID_INIT_INO, include/linux/proc_ns.h) whatever /proc is mounted.
TEST(ResourcesCollector, InitialPidNamespaceFromTheNamespaceInode) {
  const auto procfs_with = [](const testing::TempDir& root, const char* target) {
    std::filesystem::create_directories(root.path() / "self" / "ns");
    std::filesystem::create_symlink(target, root.path() / "self" / "ns" / "pid");
    return root.path();
  };
  testing::TempDir host, container, none;
  EXPECT_EQ(InInitialPidNamespace(procfs_with(host, "pid:[4026531836]")), true);
  EXPECT_EQ(InInitialPidNamespace(procfs_with(container, "pid:[4026532451]")), false);
  EXPECT_EQ(InInitialPidNamespace(none.path()), std::nullopt) << "unreadable: no verdict";
}

}  // namespace
}  // namespace rdmascope
