// The host collector: the host settings RDMA performance depends on that no other collector
// reads. PCIe link of every RDMA device (and of every PCI netdev without one) against the
// capability of the device and of the port above it (drivers/pci/pci-sysfs.c), IRQ affinity
// and XPS of PCI netdevs against their NUMA node, transparent huge pages, the huge page pool
// (/proc/meminfo), kernel.numa_balancing and the CPU frequency governors, rdma_cm's default RoCE
// ToS, ECN enables and the kernel modules RDMA needs. Every value comes from
// one file; a file that is absent or unparsable gives no series (a VM has no cpufreq, a VF has no
// link of its own), never a 0.
#pragma once

#include <filesystem>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/collector.h"

namespace rdmascope {

// "16.0 GT/s PCIe" (pci_speed_string(), drivers/pci/probe.c, since Linux 5.x) or "8 GT/s"
// (older current_link_speed_show()) -> 16e9 / 8e9 transfers per second; "Unknown" or anything
// else -> nullopt.
std::optional<double> ParsePcieSpeed(std::string_view text);

// "always [madvise] never" (mm/huge_memory.c enabled_show) -> "madvise"; nullopt without
// exactly one bracketed mode.
std::optional<std::string> SelectedMode(std::string_view text);

// Virtual netdevs (veth, bridges, bonds, tunnels) have no `device` link and no hardware
// settings (PCIe, IRQs, ECN, a driver needing an RDMA provider): one lstat says so, where a
// lookup below the link (fs::canonical, device/driver, ecn/...) walks every path component
// (2 ms a scrape on 64 veths).
bool HasDeviceLink(const std::filesystem::path& class_device);

// One PCIe function the collector reports, found from a class device's `device` link.
struct PcieFunction {
  std::string device;              // RDMA device name, or the netdev name for a netdev without one
  std::string pci_address;         // 0000:3b:00.0
  std::filesystem::path dir;       // resolved sysfs directory of the function
  std::filesystem::path upstream;  // the port above it (its parent directory), may lack links
};

// RDMA devices first, then PCI netdevs whose function carries no RDMA device; virtual
// functions (a `physfn` link: no link of their own) and non-PCI devices are left out.
std::vector<PcieFunction> FindPcieFunctions(const std::filesystem::path& sysfs);

struct HostTuningOptions {
  // --collector.host.refresh-interval: how old the slowly changing settings may be; 0 reads them
  // at every scrape.
  std::chrono::nanoseconds refresh_interval = std::chrono::seconds(60);
};

class HostTuningCollector : public Collector {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  // `clock` is injectable so that tests can step over the refresh interval without sleeping.
  HostTuningCollector(std::filesystem::path sysfs, std::filesystem::path procfs,
                      HostTuningOptions options = {}, Clock clock = std::chrono::steady_clock::now);
  CollectResult Collect(MetricSet& out) const override;

 private:
  // The slowly changing settings, read again when the last reading is older than the interval,
  // then replayed into `out`. Returns the number of series added.
  size_t CollectSlow(MetricSet& out) const;
  // PCIe link speed and width of the functions FindPcieFunctions found at the last refresh: a
  // function gone since gives no series (its files cannot be read) until the next refresh.
  size_t CollectPcie(MetricSet& out) const;
  size_t CollectQueues(MetricSet& out) const;  // IRQ affinity and XPS of PCI netdevs
  size_t CollectThp(MetricSet& out) const;
  size_t CollectHugepages(MetricSet& out) const;  // /proc/meminfo: free pages move at run time
  size_t CollectScheduler(MetricSet& out) const;
  // host_tuning_roce.cc: rdma_cm's default RoCE ToS (configfs), mlx5 ECN enables, and the
  // kernel modules RDMA needs (core modules, the provider of each RDMA-capable NIC driver).
  size_t CollectRoceConfig(MetricSet& out) const;
  size_t CollectModules(MetricSet& out) const;
  // Logs an unparsable file once per path, not on every scrape.
  void WarnOnce(const std::filesystem::path& path, std::string_view what) const;

  std::filesystem::path sysfs_;
  std::filesystem::path procfs_;
  HostTuningOptions options_;
  Clock clock_;
  mutable std::mutex mutex_;  // warned_
  mutable std::set<std::string> warned_;
  // The last reading of the slow settings (owning the label strings the replay views).
  mutable std::mutex slow_mutex_;
  mutable std::optional<std::chrono::steady_clock::time_point> slow_read_at_;
  mutable std::vector<prometheus::MetricFamily> slow_families_;
  // The PCIe functions as last found (on the refresh interval; their links every scrape).
  mutable std::mutex pcie_mutex_;
  mutable std::optional<std::chrono::steady_clock::time_point> pcie_found_at_;
  mutable std::vector<PcieFunction> pcie_functions_;
};

}  // namespace rdmascope
