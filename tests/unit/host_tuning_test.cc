// The host collector (collectors/host_tuning.cc) on tests/fixtures/sysfs/host_tuning.tree, and
// the doctor checks over its series and the rdma collector's (doctor/checks_nic.cc,
// checks_gid.cc, checks_host_tuning.cc): each fires on the pitfall and stays quiet without it.
#include "collectors/host_tuning.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>

#include "core/metric_set.h"
#include "doctor/checks_host_tuning.h"
#include "doctor/checks_roce_config.h"
#include "unit/doctor_fixtures.h"
#include "unit/fixture_tree.h"

namespace rdmascope {
namespace {

namespace fs = std::filesystem;
using doctor::Finding;
using doctor::Severity;
using doctor::Snapshot;

// fs/proc/meminfo.c meminfo_proc_show(); HugePages_* and Hugepagesize from
// hugetlb_report_meminfo() (mm/hugetlb.c): "HugePages_Total:   %5lu", "Hugepagesize:   %8lu kB".
constexpr const char* kMeminfo =
    "MemTotal:       263842412 kB\n"
    "MemFree:        201331520 kB\n"
    "HugePages_Total:     512\n"
    "HugePages_Free:        0\n"
    "HugePages_Rsvd:        0\n"
    "HugePages_Surp:        0\n"
    "Hugepagesize:       2048 kB\n"
    "Hugetlb:         1048576 kB\n";

struct Host {
  testing::TempDir root;
  Host() {
    testing::MaterialiseTree(testing::FixturePath("sysfs/host_tuning.tree"), root.path());
    std::ofstream(root.path() / "proc/meminfo") << kMeminfo;
  }
  std::vector<prometheus::MetricFamily> Collect(CollectResult* result = nullptr) const {
    HostTuningCollector collector(root.path() / "sys", root.path() / "proc");
    MetricSet set;
    const CollectResult r = collector.Collect(set);
    if (result != nullptr) *result = r;
    return set.Take();
  }
  void Write(const std::string& relative, const std::string& content) const {
    std::ofstream(root.path() / relative) << content << '\n';
  }
};

// The findings of one id, by the value of one scope key (or "" for host-wide findings).
std::map<std::string, Finding> ById(const std::vector<Finding>& findings, const std::string& key) {
  std::map<std::string, Finding> by;
  for (const Finding& f : findings) {
    std::string value;
    for (const auto& [k, v] : f.scope) {
      if (k == key) value = v;
    }
    by[value] = f;
  }
  return by;
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(HostTuning, PcieSpeedText) {
  EXPECT_EQ(ParsePcieSpeed("16.0 GT/s PCIe"), 16e9) << "pci_speed_string(), Linux 5.x+";
  EXPECT_EQ(ParsePcieSpeed("8 GT/s"), 8e9) << "older current_link_speed_show()";
  EXPECT_EQ(ParsePcieSpeed("2.5 GT/s"), 2.5e9);
  EXPECT_EQ(ParsePcieSpeed("64.0 GT/s PCIe\n"), 64e9);
  EXPECT_FALSE(ParsePcieSpeed("Unknown")) << "not a speed: no series, never 0";
  EXPECT_FALSE(ParsePcieSpeed("Unknown speed"));
  EXPECT_FALSE(ParsePcieSpeed(" GT/s"));
  EXPECT_FALSE(ParsePcieSpeed("0 GT/s"));
  EXPECT_FALSE(ParsePcieSpeed("8x GT/s"));
}

TEST(HostTuning, ThpSelectedMode) {
  EXPECT_EQ(SelectedMode("always [madvise] never"), "madvise");
  EXPECT_EQ(SelectedMode("[always] madvise never"), "always");
  EXPECT_FALSE(SelectedMode("always madvise never"));
  EXPECT_FALSE(SelectedMode("[always] [madvise] never"));
  EXPECT_FALSE(SelectedMode("[] never"));
}

// The golden file pins every series; the expectations below say why the notable ones are so.
TEST(HostTuning, CollectsTheFixtureHost) {
  Host host;
  CollectResult result;
  const auto families = host.Collect(&result);
  EXPECT_FALSE(result.no_data);
  const std::string text = testing::Serialise(families);
  EXPECT_TRUE(testing::MatchesGolden(text, "host_tuning.prom"));
  EXPECT_FALSE(Contains(text, "rdma_pcie_link_width_lanes{device=\"ens1f0np0\""))
      << "the netdev of mlx5_0's function: its link is reported once, as mlx5_0's";
  EXPECT_TRUE(Contains(text, "device=\"eno1\"")) << "a PCI netdev without RDMA device";
  EXPECT_FALSE(Contains(text, "mlx5_2")) << "a VF has no link of its own";
  EXPECT_TRUE(Contains(text, "device=\"irdma0\",pci_address=\"0000:c1:00.0\""))
      << "auxiliary device resolved to its PCI function";
  EXPECT_FALSE(Contains(text, "rdma_pcie_link_speed_transfers_per_second{device=\"broken0\""))
      << "Unknown and garbage speeds give no series";
  EXPECT_TRUE(Contains(text,
                       "rdma_pcie_link_width_lanes{device=\"broken0\",pci_address=\"0000:05:00.0\","
                       "end=\"device\",kind=\"current\"} 4"));
  EXPECT_TRUE(Contains(text, "rdma_host_cpu_frequency_governor_cpus{governor=\"powersave\"} 2"));
  EXPECT_TRUE(Contains(text, "rdma_host_online_cpus 15")) << "0-2,4-15";
  // IRQs 120 (8) and 121 (9-10) on node 1 of 4 readable (122 on CPU 0, 123 on every CPU; 124
  // has no /proc/irq entry).
  EXPECT_TRUE(Contains(text, "rdma_netdev_irq_local_node_ratio{device=\"ens1f0np0\"} 0.5"));
  EXPECT_TRUE(Contains(text, "rdma_netdev_irq_local_node_ratio{device=\"eno1\"} 1"));
  // tx-0 on 8-15, tx-1 on CPU 0, tx-2 unmapped, tx-3 unparsable (not counted).
  EXPECT_TRUE(Contains(text, "rdma_netdev_xps_configured_ratio{device=\"ens1f0np0\"} 0.666"));
  EXPECT_TRUE(Contains(text, "rdma_netdev_xps_local_node_ratio{device=\"ens1f0np0\"} 0.5"));
  EXPECT_FALSE(Contains(text, "rdma_netdev_xps_configured_ratio{device=\"eno1\"}"))
      << "no xps_cpus files: no series";
}

TEST(HostTuning, RoceConfigAndKernelModules) {
  Host host;
  const std::string text = testing::Serialise(host.Collect());
  EXPECT_TRUE(Contains(text, "rdma_host_rdma_cm_configfs 1"));
  EXPECT_TRUE(Contains(text, "rdma_port_default_roce_tos{device=\"mlx5_0\",port=\"1\"} 0"));
  EXPECT_TRUE(Contains(
      text, "rdma_netdev_ecn_enabled{device=\"ens1f0np0\",point=\"np\",priority=\"3\"} 0"));
  EXPECT_TRUE(Contains(
      text, "rdma_netdev_ecn_enabled{device=\"ens1f0np0\",point=\"rp\",priority=\"3\"} 1"));
  EXPECT_FALSE(Contains(text, "cnp_dscp")) << "only enable/PRIO files are ECN enables";
  EXPECT_TRUE(
      Contains(text, "rdma_host_kernel_module_loaded{module=\"ib_uverbs\",needed_by=\"rdma\"} 1"));
  EXPECT_TRUE(
      Contains(text, "rdma_host_kernel_module_loaded{module=\"rdma_ucm\",needed_by=\"rdma\"} 0"));
  EXPECT_TRUE(Contains(
      text, "rdma_host_kernel_module_loaded{module=\"mlx5_ib\",needed_by=\"mlx5_core\"} 1"));
  EXPECT_TRUE(
      Contains(text, "rdma_host_kernel_module_loaded{module=\"bnxt_re\",needed_by=\"bnxt_en\"} 0"));
  // A built-in rdma_ucm has no /sys/module entry without parameters: its misc device says so.
  fs::create_directories(host.root.path() / "sys/class/misc/rdma_cm");
  EXPECT_TRUE(Contains(testing::Serialise(host.Collect()),
                       "rdma_host_kernel_module_loaded{module=\"rdma_ucm\",needed_by=\"rdma\"} 1"));
  // Without configfs: said once, and no ToS read.
  fs::remove_all(host.root.path() / "sys/kernel/config");
  const std::string unmounted = testing::Serialise(host.Collect());
  EXPECT_TRUE(Contains(unmounted, "rdma_host_rdma_cm_configfs 0"));
  EXPECT_FALSE(Contains(unmounted, "rdma_port_default_roce_tos"));
}

// A netdev without a `device` link is virtual (veth, bridge): no ECN enables, no driver whose
// RDMA provider could be missing, whatever files appear below it. The collector does not look
// there at all, which is what keeps 64 veths from costing 1 ms a scrape.
TEST(HostTuning, VirtualNetdevsHaveNoHardwareSettings) {
  Host host;
  host.Write("sys/class/net/veth0/mtu", "1500");
  fs::create_directories(host.root.path() / "sys/class/net/veth0/ecn/roce_np/enable");
  host.Write("sys/class/net/veth0/ecn/roce_np/enable/3", "1");
  const std::string text = testing::Serialise(host.Collect());
  EXPECT_FALSE(Contains(text, "device=\"veth0\"")) << text;
  EXPECT_TRUE(Contains(
      text, "rdma_netdev_ecn_enabled{device=\"ens1f0np0\",point=\"rp\",priority=\"3\"} 1"));
}

// The host collector on a 60 s refresh interval, on a clock the test moves (not copyable: the
// collector's clock reads `now` through `this`).
struct RefreshingHost {
  RefreshingHost() = default;
  RefreshingHost(const RefreshingHost&) = delete;
  RefreshingHost& operator=(const RefreshingHost&) = delete;
  std::string Scrape() const {
    MetricSet set;
    collector.Collect(set);
    return testing::Serialise(set.Take());
  }

  Host host;
  std::chrono::steady_clock::time_point now =
      std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  HostTuningCollector collector{host.root.path() / "sys", host.root.path() / "proc",
                                HostTuningOptions{std::chrono::seconds(60)},
                                [this] { return now; }};
};

// Settings that change by hand are read once per refresh interval and served from that reading
// in between (series present, values as read); huge page counts move at every scrape. A module
// loaded, an ECN enable flipped or an interface added shows at the next refresh.
TEST(HostTuning, SlowSettingsRefreshOnTheirInterval) {
  RefreshingHost refreshing;
  Host& host = refreshing.host;
  auto& now = refreshing.now;
  const auto scrape = [&refreshing] { return refreshing.Scrape(); };
  const std::string rdma_ucm =
      "rdma_host_kernel_module_loaded{module=\"rdma_ucm\",needed_by=\"rdma\"} ";
  const std::string ecn_np3 =
      "rdma_netdev_ecn_enabled{device=\"ens1f0np0\",point=\"np\",priority=\"3\"} ";
  const std::string first = scrape();
  EXPECT_TRUE(Contains(first, rdma_ucm + "0"));
  EXPECT_TRUE(Contains(first, ecn_np3 + "0"));
  EXPECT_TRUE(Contains(first, "rdma_host_hugepages{state=\"free\"} 0"));

  // A module loaded, an ECN enable flipped, a PCI netdev hot-plugged with ECN on, and huge
  // pages taken by an application.
  fs::create_directories(host.root.path() / "sys/class/misc/rdma_cm");
  host.Write("sys/class/net/ens1f0np0/ecn/roce_np/enable/3", "1");
  const fs::path hotplugged = host.root.path() / "sys/class/net/ens9";
  fs::create_directories(hotplugged / "ecn/roce_rp/enable");
  fs::create_directory_symlink(
      host.root.path() / "sys/devices/pci0000:00/0000:00:1d.0/0000:06:00.0", hotplugged / "device");
  host.Write("sys/class/net/ens9/ecn/roce_rp/enable/5", "1");
  std::string meminfo = kMeminfo;
  meminfo.replace(meminfo.find("HugePages_Free:        0"), 24, "HugePages_Free:      100");
  std::ofstream(host.root.path() / "proc/meminfo") << meminfo;
  const std::string ens9 = "rdma_netdev_ecn_enabled{device=\"ens9\",point=\"rp\",priority=\"5\"} 1";

  now += std::chrono::seconds(59);
  const std::string between = scrape();
  EXPECT_TRUE(Contains(between, rdma_ucm + "0")) << "served from the last reading";
  EXPECT_TRUE(Contains(between, ecn_np3 + "0"));
  EXPECT_FALSE(Contains(between, ens9));
  EXPECT_TRUE(Contains(between, "rdma_host_online_cpus 15")) << "still present between reads";
  EXPECT_TRUE(Contains(between, "rdma_host_hugepages{state=\"free\"} 100")) << "every scrape";

  now += std::chrono::seconds(1);
  const std::string refreshed = scrape();
  EXPECT_TRUE(Contains(refreshed, rdma_ucm + "1"));
  EXPECT_TRUE(Contains(refreshed, ecn_np3 + "1"));
  EXPECT_TRUE(Contains(refreshed, ens9));
  EXPECT_TRUE(Contains(refreshed, "rdma_host_online_cpus 15"));
}

// The PCIe functions are found once per refresh interval (a lookup per class device, 2 ms a
// scrape on 64 veths), their link speed and width read at every scrape: a retrained link shows
// at once, a function gone gives no series rather than its last values, and a function
// hot-plugged or back shows at the next refresh.
TEST(HostTuning, PcieFunctionsFoundOnTheRefreshInterval) {
  RefreshingHost refreshing;
  Host& host = refreshing.host;
  auto& now = refreshing.now;
  const auto scrape = [&refreshing] { return refreshing.Scrape(); };
  const std::string eno1_width =
      "rdma_pcie_link_width_lanes{device=\"eno1\",pci_address=\"0000:02:00.0\",end=\"device\","
      "kind=\"current\"} ";
  const std::string ens9_speed =
      "rdma_pcie_link_speed_transfers_per_second{device=\"ens9\",pci_address=\"0000:03:00.0\","
      "end=\"device\",kind=\"current\"} 8000000000";
  const fs::path eno1_function =
      host.root.path() / "sys/devices/pci0000:00/0000:00:1c.0/0000:02:00.0";
  ASSERT_TRUE(Contains(scrape(), eno1_width + "4"));

  // eno1's link retrains to x1; a new PCI netdev appears.
  host.Write("sys/devices/pci0000:00/0000:00:1c.0/0000:02:00.0/current_link_width", "1");
  const fs::path ens9_function =
      host.root.path() / "sys/devices/pci0000:00/0000:00:1c.0/0000:03:00.0";
  fs::create_directories(ens9_function);
  for (const char* file : {"current_link_speed", "max_link_speed"}) {
    std::ofstream(ens9_function / file) << "8.0 GT/s PCIe\n";
  }
  fs::create_directories(host.root.path() / "sys/class/net/ens9");
  fs::create_directory_symlink(ens9_function, host.root.path() / "sys/class/net/ens9/device");
  now += std::chrono::seconds(30);
  std::string text = scrape();
  EXPECT_TRUE(Contains(text, eno1_width + "1")) << "link values are read at every scrape";
  EXPECT_FALSE(Contains(text, ens9_speed)) << "found at the next refresh, not at every scrape";

  // eno1's function goes away (its files with it): no series, not the last values.
  fs::rename(eno1_function, host.root.path() / "eno1-unplugged");
  now += std::chrono::seconds(20);
  text = scrape();
  EXPECT_FALSE(Contains(text, "rdma_pcie_link_width_lanes{device=\"eno1\"")) << text;
  EXPECT_FALSE(Contains(text, "rdma_pcie_link_speed_transfers_per_second{device=\"eno1\""));

  // Back, and the refresh interval is over: both functions found.
  fs::rename(host.root.path() / "eno1-unplugged", eno1_function);
  now += std::chrono::seconds(10);
  text = scrape();
  EXPECT_TRUE(Contains(text, eno1_width + "1"));
  EXPECT_TRUE(Contains(text, ens9_speed)) << text;
}

TEST(HostTuning, RefreshIntervalZeroReadsEveryScrape) {
  Host host;
  const auto now = std::chrono::steady_clock::time_point{};
  HostTuningCollector collector(host.root.path() / "sys", host.root.path() / "proc",
                                HostTuningOptions{std::chrono::nanoseconds(0)},
                                [now] { return now; });
  MetricSet set;
  collector.Collect(set);
  fs::create_directories(host.root.path() / "sys/class/misc/rdma_cm");
  collector.Collect(set = MetricSet());
  EXPECT_TRUE(Contains(testing::Serialise(set.Take()),
                       "rdma_host_kernel_module_loaded{module=\"rdma_ucm\",needed_by=\"rdma\"} 1"));
}

TEST(HostTuning, NoNumaNodeNoIrqRatio) {
  Host host;
  host.Write("sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/numa_node", "-1");
  const std::string text = testing::Serialise(host.Collect());
  EXPECT_FALSE(Contains(text, "rdma_netdev_irq_local_node_ratio{device=\"ens1f0np0\""))
      << "no node to be local to: no ratio, not 0";
  EXPECT_FALSE(Contains(text, "rdma_netdev_xps_local_node_ratio{device=\"ens1f0np0\""));
  EXPECT_FALSE(Contains(text, "rdma_netdev_xps_configured_ratio{device=\"ens1f0np0\""));
}

TEST(HostTuning, NothingToReadIsNoDataNotZero) {
  testing::TempDir empty;
  HostTuningCollector collector(empty.path() / "sys", empty.path() / "proc");
  MetricSet set;
  const CollectResult result = collector.Collect(set);
  EXPECT_TRUE(result.no_data);
  EXPECT_EQ(set.sample_count(), 0U);
}

Snapshot SnapshotOf(std::vector<prometheus::MetricFamily> families,
                    std::vector<prometheus::MetricFamily> more = {}, double seconds = 100) {
  std::move(more.begin(), more.end(), std::back_inserter(families));
  return Snapshot(families, seconds);
}

TEST(DoctorPcie, DowntrainedSlotLimitedAndHealthy) {
  Host host;
  MetricSet rate;
  // mlx5_0 drives a 200 Gb/s port: x8 Gen4 (15.8 GB/s) cannot carry its 25 GB/s.
  rate.Add({"rdma_port_rate_bytes_per_second", "", prometheus::MetricType::Gauge},
           {{"device", "mlx5_0"}, {"port", "1"}}, 25e9);
  const auto findings =
      ById(doctor::CheckPcieLink(SnapshotOf(host.Collect(), rate.Take()), nullptr, {}), "device");
  const Finding& down = findings.at("mlx5_0");
  EXPECT_EQ(down.severity, Severity::kCrit);
  EXPECT_EQ(down.observed, "x8 at 16 GT/s (15.8 GB/s)");
  EXPECT_TRUE(Contains(down.advice, "50% of the 31.5 GB/s")) << down.advice;
  EXPECT_TRUE(Contains(down.advice, "below the 25 GB/s of its RDMA port")) << down.advice;
  EXPECT_TRUE(Contains(down.advice, "lspci -vv -s 0000:3b:00.0")) << down.advice;
  const Finding& slot = findings.at("mlx5_1");
  EXPECT_EQ(slot.severity, Severity::kInfo) << "trained to all the slot can do";
  EXPECT_TRUE(Contains(slot.advice,
                       "supports x16 at 16 GT/s but the port above it only x16 at "
                       "8 GT/s"))
      << slot.advice;
  EXPECT_EQ(findings.at("irdma0").severity, Severity::kOk) << "a faster slot is not a problem";
  EXPECT_EQ(findings.at("eno1").severity, Severity::kOk);
  EXPECT_EQ(findings.at("broken0").severity, Severity::kSkip);
}

TEST(DoctorPcie, WarnWithoutAPortRateToCompare) {
  Host host;
  const auto findings =
      ById(doctor::CheckPcieLink(SnapshotOf(host.Collect()), nullptr, {}), "device");
  EXPECT_EQ(findings.at("mlx5_0").severity, Severity::kWarn);
}

TEST(DoctorPcie, Bandwidth) {
  EXPECT_NEAR(doctor::PcieBytesPerSecond(16e9, 16), 31.5e9, 0.01e9);
  EXPECT_NEAR(doctor::PcieBytesPerSecond(5e9, 4), 2e9, 1) << "8b/10b";
}

TEST(DoctorQueues, IrqAffinityAndXps) {
  Host host;
  auto families = host.Collect();
  MetricSet numa;  // the ethtool collector's series, which names the node in the advice
  numa.Add({"rdma_netdev_numa_node", "", prometheus::MetricType::Gauge}, {{"device", "ens1f0np0"}},
           1);
  const Snapshot now = SnapshotOf(std::move(families), numa.Take());
  const auto irqs = ById(doctor::CheckIrqAffinity(now, nullptr, {}), "netdev");
  EXPECT_EQ(irqs.at("ens1f0np0").severity, Severity::kInfo) << "half local: the mlx5 default";
  EXPECT_EQ(irqs.at("ens1f0np0").observed, "50% of ens1f0np0's interrupts on node 1");
  EXPECT_EQ(irqs.at("ens1f0np0").fix,
            "systemctl stop irqbalance && set_irq_affinity_bynode.sh 1 ens1f0np0");
  EXPECT_EQ(irqs.at("eno1").severity, Severity::kOk);
  // XPS steers the interface's own IP packets, never RoCE: it matters only where the interface
  // sends IP traffic (here 200k packets/s over 10 s).
  const auto sent = [&host](double packets) {
    MetricSet stats;
    stats.Add({"rdma_ethtool_stat", "", prometheus::MetricType::Untyped},
              {{"device", "ens1f0np0"}, {"stat", "tx_packets"}}, packets);
    return stats.Take();
  };
  const Snapshot before(sent(1e6), 100);
  const Snapshot busy_now = SnapshotOf(host.Collect(), sent(3e6), 110);
  const Snapshot idle_now = SnapshotOf(host.Collect(), sent(1e6 + 1e4), 110);
  const auto xps = ById(doctor::CheckXps(busy_now, &before, {}), "netdev");
  EXPECT_EQ(xps.at("ens1f0np0").severity, Severity::kInfo);
  EXPECT_TRUE(Contains(xps.at("ens1f0np0").advice, "33.3% unmapped, 50% mapped off-node"))
      << xps.at("ens1f0np0").advice;
  EXPECT_TRUE(Contains(xps.at("ens1f0np0").observed, "200000 IP packets/s sent"))
      << xps.at("ens1f0np0").observed;
  EXPECT_EQ(ById(doctor::CheckXps(idle_now, &before, {}), "netdev").at("ens1f0np0").severity,
            Severity::kOk)
      << "1k packets/s: the interface carries RDMA, which XPS does not steer";
  EXPECT_EQ(ById(doctor::CheckXps(now, nullptr, {}), "netdev").at("ens1f0np0").severity,
            Severity::kOk)
      << "no window: the IP packet rate is unknown";
  // Most interrupts remote: warn.
  host.Write("proc/irq/121/smp_affinity_list", "0-3");
  const auto worse =
      ById(doctor::CheckIrqAffinity(SnapshotOf(host.Collect()), nullptr, {}), "netdev");
  EXPECT_EQ(worse.at("ens1f0np0").severity, Severity::kWarn);
  EXPECT_EQ(worse.at("ens1f0np0").fix,
            "systemctl stop irqbalance && set_irq_affinity_bynode.sh NODE ens1f0np0")
      << "no rdma_netdev_numa_node: the node is a placeholder, never a guess";
}

TEST(DoctorQueues, RcVersusUcPerProcess) {
  doctor::testing::Families f;
  const auto qps = [&f](const char* pid, const char* comm, const char* type, const char* state,
                        double n) {
    f.Gauge("rdma_process_qps",
            {{"device", "mlx5_0"}, {"pid", pid}, {"comm", comm}, {"type", type}, {"state", state}},
            n);
  };
  qps("10", "app", "UC", "RTS", 4);
  qps("10", "app", "RC", "RTS", 2);
  qps("20", "rc_app", "RC", "RTS", 8);
  qps("30", "dead", "UC", "ERR", 1);    // carries nothing
  qps("40", "ud_app", "UD", "RTS", 2);  // no connected-mode choice
  const auto by = ById(doctor::CheckQpTypes(f.Build(1), nullptr, {}), "pid");
  EXPECT_EQ(by.at("10").severity, Severity::kInfo);
  EXPECT_EQ(by.at("10").observed, "2 RC, 4 UC QPs");
  EXPECT_TRUE(Contains(by.at("10").advice, "4 UC QPs")) << by.at("10").advice;
  EXPECT_EQ(by.at("20").severity, Severity::kOk);
  EXPECT_FALSE(by.contains("30"));
  EXPECT_FALSE(by.contains("40"));
}

TEST(DoctorFirmware, MismatchWithinOneBoard) {
  doctor::testing::Families f;
  for (const auto& [device, fw, board] :
       std::vector<std::array<std::string, 3>>{{"mlx5_0", "22.36.1010", "MT_0000000359"},
                                               {"mlx5_1", "22.9.1000", "MT_0000000359"},
                                               {"mlx5_2", "22.10.1000", "MT_0000000359"},
                                               {"mlx5_3", "20.31.1014", "MT_0000000222"},
                                               {"rxe0", "", ""}}) {
    f.Gauge("rdma_device_info",
            {{"device", device},
             {"node_type", "CA"},
             {"firmware_version", fw},
             {"board_id", board},
             {"hca_type", ""},
             {"node_guid", ""}},
            1);
  }
  f.Gauge("rdma_pcie_link_width_lanes",
          {{"device", "mlx5_1"},
           {"pci_address", "0000:81:00.0"},
           {"end", "device"},
           {"kind", "current"}},
          16);
  const auto findings = doctor::CheckFirmwareUniform(f.Build(1), nullptr, {});
  const auto by = ById(findings, "device");
  ASSERT_TRUE(by.contains("mlx5_1"));
  EXPECT_EQ(by.at("mlx5_1").severity, Severity::kWarn);
  EXPECT_TRUE(Contains(by.at("mlx5_1").advice, "update mlx5_1 from 22.9.1000 to 22.36.1010"))
      << "numeric order: 22.36 is newer than 22.10 and 22.9: " << by.at("mlx5_1").advice;
  EXPECT_EQ(by.at("mlx5_1").fix, "mlxfwmanager --online -u -d 0000:81:00.0");
  EXPECT_EQ(by.at("mlx5_2").fix, "mlxfwmanager --online -u") << "no PCI address known";
  EXPECT_FALSE(by.contains("mlx5_0")) << "the newest is the reference";
  const auto boards = ById(findings, "board_id");
  EXPECT_EQ(boards.at("MT_0000000222").severity, Severity::kOk) << "alone on its model";
  EXPECT_EQ(findings.size(), 3U) << "rxe0 has no model to compare within";
}

TEST(DoctorGid, IndexAdviceAndMissingRoceV2) {
  doctor::testing::Families f;
  for (const auto& [device, netdev] : {std::pair{"mlx5_0", "eth2"}, std::pair{"mlx5_1", "eth3"}}) {
    f.Gauge("rdma_port_info",
            {{"device", device},
             {"port", "1"},
             {"link_layer", "Ethernet"},
             {"state", "ACTIVE"},
             {"phys_state", "LinkUp"},
             {"netdev", netdev}},
            1);
  }
  // The kernel's table for a netdev with 192.168.10.11 and a global IPv6 address
  // (roce_gid_mgmt.c): link-local v1/v2 at 0/1, the IPv4-mapped address at 2/3, IPv6 at 4/5.
  const std::vector<std::array<std::string, 4>> gids{
      {"mlx5_0", "0", "fe80:0000:0000:0000:bace:f6ff:fee4:1a2c", "IB/RoCE v1"},
      {"mlx5_0", "1", "fe80:0000:0000:0000:bace:f6ff:fee4:1a2c", "RoCE v2"},
      {"mlx5_0", "2", "0000:0000:0000:0000:0000:ffff:c0a8:0a0b", "IB/RoCE v1"},
      {"mlx5_0", "3", "0000:0000:0000:0000:0000:ffff:c0a8:0a0b", "RoCE v2"},
      {"mlx5_0", "5", "2001:0db8:0000:0000:0000:0000:0000:0011", "RoCE v2"},
      {"mlx5_1", "0", "fe80:0000:0000:0000:bace:f6ff:fee4:1a2d", "IB/RoCE v1"},
      {"mlx5_1", "1", "fe80:0000:0000:0000:bace:f6ff:fee4:1a2d", "RoCE v2"},
      {"mlx5_1", "2", "0000:0000:0000:0000:0000:ffff:c0a8:0a0c", "IB/RoCE v1"}};
  for (const auto& [device, index, gid, type] : gids) {
    f.Gauge("rdma_port_gid_info",
            {{"device", device},
             {"port", "1"},
             {"index", index},
             {"gid", gid},
             {"type", type},
             {"netdev", ""}},
            1);
  }
  const auto by = ById(doctor::CheckGidIndex(f.Build(1), nullptr, {}), "device");
  EXPECT_EQ(by.at("mlx5_0").severity, Severity::kOk);
  EXPECT_EQ(by.at("mlx5_0").observed,
            "GID index 3 (RoCE v2, IPv4 192.168.10.11); for IPv6 index 5 (RoCE v2, IPv6 "
            "2001:0db8:0000:0000:0000:0000:0000:0011)")
      << "the line a healthy report prints";
  EXPECT_TRUE(Contains(by.at("mlx5_0").advice,
                       "use GID index 3 (RoCE v2, IPv4 192.168.10.11); for IPv6 index 5 (RoCE v2, "
                       "IPv6 2001:0db8:0000:0000:0000:0000:0000:0011)"))
      << by.at("mlx5_0").advice;
  EXPECT_EQ(by.at("mlx5_1").severity, Severity::kWarn) << "only RoCE v1 and link-local";
  EXPECT_EQ(by.at("mlx5_1").fix, "ip address add ADDRESS/PREFIX dev eth3");
  EXPECT_EQ(doctor::Ipv4OfGid("0000:0000:0000:0000:0000:ffff:0a00:020f"), "10.0.2.15");
  EXPECT_FALSE(doctor::Ipv4OfGid("0000:0000:0000:0000:0000:fffe:0a00:020f"));
  EXPECT_FALSE(doctor::Ipv4OfGid("0000:0000:0000:0000:0000:ffff:0a00:02"));
}

TEST(DoctorHostTuning, FiresOnTheFixtureHost) {
  Host host;
  const Snapshot now = SnapshotOf(host.Collect());
  const auto thp = doctor::CheckThp(now, nullptr, {});
  ASSERT_EQ(thp.size(), 1U);
  EXPECT_EQ(thp[0].severity, Severity::kInfo);
  EXPECT_EQ(thp[0].fix, "echo madvise > /sys/kernel/mm/transparent_hugepage/enabled");
  const auto pool = doctor::CheckHugepages(now, nullptr, {});
  ASSERT_EQ(pool.size(), 1U);
  EXPECT_EQ(pool[0].severity, Severity::kWarn) << "512 pages, none free";
  EXPECT_EQ(pool[0].fix, "sysctl -w vm.nr_hugepages=513");
  const auto numa = doctor::CheckNumaBalancing(now, nullptr, {});
  ASSERT_EQ(numa.size(), 1U);
  EXPECT_EQ(numa[0].severity, Severity::kWarn);
  EXPECT_EQ(numa[0].fix, "sysctl -w kernel.numa_balancing=0");
  const auto governors = ById(doctor::CheckCpuGovernor(now, nullptr, {}), "governor");
  EXPECT_EQ(governors.at("powersave").severity, Severity::kWarn);
  EXPECT_EQ(governors.at("powersave").observed, "2 CPU(s) on the powersave governor");
  EXPECT_EQ(governors.at("performance").severity, Severity::kOk);
}

TEST(DoctorHostTuning, QuietOnATunedHost) {
  Host host;
  host.Write("sys/kernel/mm/transparent_hugepage/enabled", "always [madvise] never");
  host.Write("proc/sys/kernel/numa_balancing", "0");
  host.Write("sys/devices/system/cpu/cpu1/cpufreq/scaling_governor", "performance");
  host.Write("sys/devices/system/cpu/cpu2/cpufreq/scaling_governor", "performance");
  std::ofstream(host.root.path() / "proc/meminfo")
      << "HugePages_Total:     512\nHugePages_Free:      100\nHugepagesize:       2048 kB\n";
  const Snapshot now = SnapshotOf(host.Collect());
  for (const auto& findings :
       {doctor::CheckThp(now, nullptr, {}), doctor::CheckHugepages(now, nullptr, {}),
        doctor::CheckNumaBalancing(now, nullptr, {}), doctor::CheckCpuGovernor(now, nullptr, {})}) {
    ASSERT_EQ(findings.size(), 1U);
    EXPECT_EQ(findings[0].severity, Severity::kOk)
        << findings[0].id << ": " << findings[0].observed;
  }
}

TEST(DoctorHostTuning, NoCpufreqIsNoFinding) {
  Host host;
  for (const char* cpu : {"cpu0", "cpu1", "cpu2"}) {
    fs::remove_all(host.root.path() / "sys/devices/system/cpu" / cpu / "cpufreq");
  }
  EXPECT_TRUE(doctor::CheckCpuGovernor(SnapshotOf(host.Collect()), nullptr, {}).empty())
      << "a VM: RunChecks turns this into one skip with the reason";
}

TEST(DoctorHostTuning, Memlock) {
  doctor::testing::Families f;
  f.Gauge("rdma_process_locked_memory_limit_bytes", {{"pid", "10"}, {"comm", "small"}},
          8 * 1024 * 1024);
  f.Gauge("rdma_process_locked_memory_limit_bytes", {{"pid", "20"}, {"comm", "large"}},
          64.0 * 1024 * 1024 * 1024);
  const auto by = ById(doctor::CheckMemlock(f.Build(1), nullptr, {}), "pid");
  EXPECT_EQ(by.at("10").severity, Severity::kWarn);
  EXPECT_EQ(by.at("10").observed, "RLIMIT_MEMLOCK 8 MiB");
  EXPECT_EQ(by.at("10").fix, "prlimit --pid 10 --memlock=unlimited:unlimited");
  EXPECT_EQ(by.at("20").severity, Severity::kOk) << "finite but large";
  doctor::testing::Families raised;
  raised.Gauge("rdma_process_locked_memory_limit_bytes", {{"pid", "30"}, {"comm", "raised"}},
               16.0 * 1024 * 1024);
  EXPECT_EQ(doctor::CheckMemlock(raised.Build(1), nullptr, {})[0].severity, Severity::kOk)
      << "above the kernel's MLOCK_LIMIT (8 MiB): someone raised it; how close pinned memory "
         "comes is memory.pinned_vs_memlock's";
  EXPECT_TRUE(by.at("20").fix.empty());
  doctor::testing::Families none;
  EXPECT_TRUE(doctor::CheckMemlock(none.Build(1), nullptr, {}).empty())
      << "no series: every RDMA process is unlimited";
}

// roce.default_tos, roce.ecn and host.kernel_modules on what the collector read from the
// fixture host, with the rdma collector's port of mlx5_0 (netdev ens1f0np0).
TEST(DoctorRoceConfig, FiresOnTheFixtureHostAndQuietWhenFixed) {
  Host host;
  const auto port = [] {
    MetricSet set;
    set.Add({"rdma_port_info", "t", prometheus::MetricType::Gauge},
            {{"device", "mlx5_0"},
             {"port", "1"},
             {"link_layer", "Ethernet"},
             {"state", "ACTIVE"},
             {"phys_state", "LinkUp"},
             {"netdev", "ens1f0np0"}},
            1);
    return set.Take();
  };
  const Snapshot bad = SnapshotOf(host.Collect(), port());
  const auto tos = doctor::CheckDefaultTos(bad, nullptr, {});
  ASSERT_EQ(tos.size(), 1U);
  EXPECT_EQ(tos[0].severity, Severity::kWarn);
  EXPECT_EQ(tos[0].observed, "default RoCE ToS 0 (DSCP 0, priority 0 under the default DSCP map)");
  EXPECT_EQ(tos[0].fix, "echo 106 > /sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos");
  const auto ecn = doctor::CheckEcn(bad, nullptr, {});
  ASSERT_EQ(ecn.size(), 1U);
  EXPECT_EQ(ecn[0].severity, Severity::kWarn);
  EXPECT_EQ(ecn[0].fix, "echo 1 > /sys/class/net/ens1f0np0/ecn/roce_np/enable/3");
  const auto modules = ById(doctor::CheckKernelModules(bad, nullptr, {}), "module");
  EXPECT_EQ(modules.at("rdma_ucm").severity, Severity::kWarn);
  EXPECT_EQ(modules.at("rdma_ucm").fix, "modprobe rdma_ucm");
  EXPECT_EQ(modules.at("bnxt_re").severity, Severity::kWarn);
  EXPECT_TRUE(Contains(modules.at("bnxt_re").advice, "NICs driven by bnxt_en have no RDMA device"));
  EXPECT_EQ(modules.at("ib_uverbs").severity, Severity::kOk);
  // Fixed: ToS 106 (DSCP 26, priority 3), ECN on, rdma_ucm loaded.
  host.Write("sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos", "106");
  host.Write("sys/class/net/ens1f0np0/ecn/roce_np/enable/3", "1");
  fs::create_directories(host.root.path() / "sys/module/rdma_ucm");
  const Snapshot fixed = SnapshotOf(host.Collect(), port());
  EXPECT_EQ(doctor::CheckDefaultTos(fixed, nullptr, {})[0].severity, Severity::kOk);
  EXPECT_EQ(doctor::CheckEcn(fixed, nullptr, {})[0].severity, Severity::kOk);
  EXPECT_EQ(ById(doctor::CheckKernelModules(fixed, nullptr, {}), "module").at("rdma_ucm").severity,
            Severity::kOk);
  // The RoCE priority is an option: ToS 106 is priority 3, not 5.
  doctor::DoctorOptions five;
  five.roce_priority = 5;
  const auto other = doctor::CheckDefaultTos(fixed, nullptr, five);
  EXPECT_EQ(other[0].severity, Severity::kWarn);
  EXPECT_EQ(other[0].fix, "echo 170 > /sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos")
      << "DSCP 42 (5 x 8 + 2) with ECT(0)";
  // No configfs directory for the device: skipped with the reason, never read as 0.
  fs::remove_all(host.root.path() / "sys/kernel/config/rdma_cm/mlx5_0");
  const auto unset = doctor::CheckDefaultTos(SnapshotOf(host.Collect(), port()), nullptr, {});
  EXPECT_EQ(unset[0].severity, Severity::kSkip);
  EXPECT_TRUE(Contains(unset[0].observed, "mkdir it")) << unset[0].observed;
  // A driver without the ECN sysfs: skipped with the reason.
  fs::remove_all(host.root.path() / "sys/class/net/ens1f0np0/ecn");
  const auto no_ecn = doctor::CheckEcn(SnapshotOf(host.Collect(), port()), nullptr, {});
  EXPECT_EQ(no_ecn[0].severity, Severity::kSkip);
}

}  // namespace
}  // namespace rdmascope
