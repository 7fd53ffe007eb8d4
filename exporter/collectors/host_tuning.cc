#include "collectors/host_tuning.h"

#include <charconv>
#include <map>
#include <system_error>

#include "core/log.h"
#include "core/sysfs.h"
#include "sys/cpu_topology.h"
#include "sys/pmu_sysfs.h"

namespace rdmascope {
namespace fs = std::filesystem;
namespace {

constexpr MetricDesc kPcieSpeed{
    "rdma_pcie_link_speed_transfers_per_second",
    "PCIe link speed per lane of an RDMA device's PCI function (end=device) or of the port above "
    "it (end=upstream): kind=current is the trained link, kind=max the capability.",
    prometheus::MetricType::Gauge};
constexpr MetricDesc kPcieWidth{
    "rdma_pcie_link_width_lanes",
    "PCIe link width of an RDMA device's PCI function (end=device) or of the port above it "
    "(end=upstream): kind=current is the trained link, kind=max the capability.",
    prometheus::MetricType::Gauge};
constexpr MetricDesc kThp{"rdma_host_transparent_hugepage_mode",
                          "Transparent huge pages mode (/sys/kernel/mm/transparent_hugepage/"
                          "enabled): 1 for the selected mode, 0 for the others.",
                          prometheus::MetricType::Gauge};
constexpr MetricDesc kHugepages{"rdma_host_hugepages",
                                "Huge pages of the default size in the pool, from /proc/meminfo "
                                "HugePages_Total, _Free, _Rsvd, _Surp.",
                                prometheus::MetricType::Gauge};
constexpr MetricDesc kHugepageSize{"rdma_host_hugepage_size_bytes",
                                   "Default huge page size (/proc/meminfo Hugepagesize).",
                                   prometheus::MetricType::Gauge};
constexpr MetricDesc kNumaBalancing{
    "rdma_host_numa_balancing",
    "kernel.numa_balancing (/proc/sys/kernel/numa_balancing): 0 off, 1 on, 2 and 3 memory "
    "tiering modes.",
    prometheus::MetricType::Gauge};
constexpr MetricDesc kGovernor{
    "rdma_host_cpu_frequency_governor_cpus",
    "Online CPUs per cpufreq scaling governor (devices/system/cpu/cpuN/cpufreq/"
    "scaling_governor); absent without cpufreq (most VMs).",
    prometheus::MetricType::Gauge};

constexpr MetricDesc kIrqLocal{
    "rdma_netdev_irq_local_node_ratio",
    "Share of the PCI netdev's MSI/MSI-X interrupts (device/msi_irqs) whose affinity "
    "(/proc/irq/N/smp_affinity_list) lies entirely on the device's NUMA node.",
    prometheus::MetricType::Gauge};
constexpr MetricDesc kXpsConfigured{
    "rdma_netdev_xps_configured_ratio",
    "Share of the netdev's transmit queues with a non-empty XPS CPU mask "
    "(queues/tx-N/xps_cpus).",
    prometheus::MetricType::Gauge};
constexpr MetricDesc kXpsLocal{
    "rdma_netdev_xps_local_node_ratio",
    "Share of the netdev's XPS-configured transmit queues whose CPUs lie entirely on the "
    "device's NUMA node.",
    prometheus::MetricType::Gauge};

// "00000000,0000ff00" (bitmap_print_to_pagebuf(), 32-bit words, most significant first) ->
// {8..15}; nullopt on anything but hex digits and commas.
std::optional<std::vector<int>> ParseCpuMask(std::string_view text) {
  text = sysfs::Trim(text);
  std::vector<int> cpus;
  int bit = 0;
  if (text.empty()) return std::nullopt;
  for (auto it = text.rbegin(); it != text.rend(); ++it) {
    if (*it == ',') continue;
    int nibble = 0;
    if (*it >= '0' && *it <= '9') {
      nibble = *it - '0';
    } else if (*it >= 'a' && *it <= 'f') {
      nibble = *it - 'a' + 10;
    } else {
      return std::nullopt;
    }
    for (int i = 0; i < 4; ++i) {
      if ((nibble >> i) & 1) cpus.push_back(bit + i);
    }
    bit += 4;
  }
  return cpus;
}

// All of `cpus` on `node` (a CPU of no known node counts as elsewhere).
bool OnNode(const std::vector<int>& cpus, const sys::CpuTopology& topology, int64_t node) {
  for (int cpu : cpus) {
    const auto it = topology.node_of_cpu.find(cpu);
    if (it == topology.node_of_cpu.end() || it->second != node) return false;
  }
  return true;
}

constexpr MetricDesc kOnlineCpus{"rdma_host_online_cpus",
                                 "Online CPUs (devices/system/cpu/online), the cores RDMA "
                                 "queues and interrupts spread over.",
                                 prometheus::MetricType::Gauge};

bool IsCpuDirectory(std::string_view name) {
  if (!name.starts_with("cpu") || name.size() == 3) return false;
  for (char c : name.substr(3)) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// The resolved PCI directory of a class device, if it is a PCI function with a link of its
// own (pci-sysfs.c shows the link attributes on PCIe functions only); a virtual function's `physfn`
// link means its link registers are the physical function's (the VF's read as reserved).
std::optional<fs::path> PciDirectory(const fs::path& class_device) {
  if (!HasDeviceLink(class_device)) return std::nullopt;
  const auto canonical = sysfs::Canonical(class_device / "device");
  if (!canonical) return std::nullopt;
  fs::path dir = *canonical;
  // irdma and bnxt_re hang their RDMA device off an auxiliary device (ice.roce.0,
  // bnxt_en.rdma.0) whose parent is the PCI function.
  if (sysfs::ReadLinkBasename(dir / "subsystem") == "auxiliary") dir = dir.parent_path();
  if (!sysfs::PathExists(dir / "max_link_speed")) return std::nullopt;
  if (sysfs::IsSymlink(dir / "physfn")) return std::nullopt;
  return dir;
}

}  // namespace

bool HasDeviceLink(const fs::path& class_device) {
  return sysfs::IsSymlink(class_device / "device");
}

std::optional<double> ParsePcieSpeed(std::string_view text) {
  text = sysfs::Trim(text);
  const auto unit = text.find(" GT/s");
  if (unit == std::string_view::npos || unit == 0) return std::nullopt;
  // ParseDouble refuses "inf" (from_chars took it: an infinite link speed).
  const auto gts = sysfs::ParseDouble(text.substr(0, unit));
  if (!gts || !(*gts > 0)) return std::nullopt;
  return *gts * 1e9;
}

std::optional<std::string> SelectedMode(std::string_view text) {
  const auto open = text.find('[');
  const auto close = text.find(']');
  if (open == std::string_view::npos || close == std::string_view::npos || close <= open + 1 ||
      text.find('[', open + 1) != std::string_view::npos) {
    return std::nullopt;
  }
  return std::string(text.substr(open + 1, close - open - 1));
}

std::vector<PcieFunction> FindPcieFunctions(const fs::path& sysfs) {
  std::vector<PcieFunction> functions;
  std::set<fs::path> seen;
  for (const char* cls : {"infiniband", "net"}) {
    const fs::path class_dir = sysfs / "class" / cls;
    for (const std::string& name : sysfs::ListDirectory(class_dir)) {
      const auto dir = PciDirectory(class_dir / name);
      // A netdev on a function that already has an RDMA device is the same link: reported
      // once, under the RDMA device's name (rdma_port_info's netdev label joins the two).
      if (!dir || !seen.insert(*dir).second) continue;
      functions.push_back({name, dir->filename().string(), *dir, dir->parent_path()});
    }
  }
  return functions;
}

HostTuningCollector::HostTuningCollector(fs::path sysfs, fs::path procfs, HostTuningOptions options,
                                         Clock clock)
    : sysfs_(std::move(sysfs)),
      procfs_(std::move(procfs)),
      options_(options),
      clock_(std::move(clock)) {}

void HostTuningCollector::WarnOnce(const fs::path& path, std::string_view what) const {
  std::lock_guard lock(mutex_);
  if (!warned_.insert(path.string()).second) return;
  log::Warn("unparsable host setting: series omitted",
            {{"file", path.string()}, {"expected", std::string(what)}});
}

size_t HostTuningCollector::CollectPcie(MetricSet& out) const {
  std::lock_guard lock(pcie_mutex_);
  const auto now = clock_();
  if (!pcie_found_at_ || now - *pcie_found_at_ >= options_.refresh_interval) {
    pcie_functions_ = FindPcieFunctions(sysfs_);
    pcie_found_at_ = now;
  }
  size_t added = 0;
  for (const PcieFunction& function : pcie_functions_) {
    struct End {
      const char* name;
      const fs::path& dir;
    };
    for (const End& end : {End{"device", function.dir}, End{"upstream", function.upstream}}) {
      for (const char* kind : {"current", "max"}) {
        const std::string prefix = std::string(kind) + "_link_";
        const fs::path speed_file = end.dir / (prefix + "speed");
        if (const auto text = sysfs::ReadAttribute(speed_file)) {
          // "Unknown" is the kernel saying it does not know: no series, logged once.
          if (const auto speed = ParsePcieSpeed(*text)) {
            out.Add(kPcieSpeed,
                    {{"device", function.device},
                     {"pci_address", function.pci_address},
                     {"end", end.name},
                     {"kind", kind}},
                    *speed);
            ++added;
          } else {
            WarnOnce(speed_file, "N GT/s");
          }
        }
        const fs::path width_file = end.dir / (prefix + "width");
        if (const auto width = sysfs::ReadUnsigned(width_file)) {
          out.Add(kPcieWidth,
                  {{"device", function.device},
                   {"pci_address", function.pci_address},
                   {"end", end.name},
                   {"kind", kind}},
                  static_cast<double>(*width));
          ++added;
        }
      }
    }
  }
  return added;
}

size_t HostTuningCollector::CollectQueues(MetricSet& out) const {
  size_t added = 0;
  std::optional<sys::CpuTopology> topology;  // read once, when a netdev needs it
  const fs::path class_dir = sysfs_ / "class" / "net";
  for (const std::string& netdev : sysfs::ListDirectory(class_dir)) {
    if (!PciDirectory(class_dir / netdev)) continue;
    // A device without a NUMA node (-1: one node, or firmware that gives none) has no
    // "local": no series rather than a ratio against a guess.
    const auto node = sysfs::ReadSigned(class_dir / netdev / "device" / "numa_node");
    if (!node || *node < 0) continue;
    if (!topology) topology = sys::ReadCpuTopology(sysfs_);
    size_t irqs = 0, local_irqs = 0;
    for (const std::string& irq : sysfs::ListDirectory(class_dir / netdev / "device/msi_irqs")) {
      const auto list = sysfs::ReadAttribute(procfs_ / "irq" / irq / "smp_affinity_list");
      if (!list) continue;  // freed since the listing, or no procfs irq directory
      const auto cpus = sys::ParseCpuList(*list);
      if (cpus.empty()) continue;
      ++irqs;
      if (OnNode(cpus, *topology, *node)) ++local_irqs;
    }
    if (irqs > 0) {
      out.Add(kIrqLocal, {{"device", netdev}},
              static_cast<double>(local_irqs) / static_cast<double>(irqs));
      ++added;
    }
    size_t queues = 0, configured = 0, local_queues = 0;
    const fs::path queue_dir = class_dir / netdev / "queues";
    for (const std::string& queue : sysfs::ListDirectory(queue_dir)) {
      if (!queue.starts_with("tx-")) continue;
      // Absent without CONFIG_XPS, and on single-queue devices (net-sysfs.c xps_cpus_show()).
      const fs::path file = queue_dir / queue / "xps_cpus";
      const auto text = sysfs::ReadAttribute(file);
      if (!text) continue;
      const auto cpus = ParseCpuMask(*text);
      if (!cpus) {
        WarnOnce(file, "a hexadecimal CPU mask");
        continue;
      }
      ++queues;
      if (cpus->empty()) continue;
      ++configured;
      if (OnNode(*cpus, *topology, *node)) ++local_queues;
    }
    if (queues > 0) {
      out.Add(kXpsConfigured, {{"device", netdev}},
              static_cast<double>(configured) / static_cast<double>(queues));
      ++added;
    }
    if (configured > 0) {
      out.Add(kXpsLocal, {{"device", netdev}},
              static_cast<double>(local_queues) / static_cast<double>(configured));
      ++added;
    }
  }
  return added;
}

size_t HostTuningCollector::CollectThp(MetricSet& out) const {
  size_t added = 0;
  const fs::path thp_file = sysfs_ / "kernel/mm/transparent_hugepage/enabled";
  if (const auto text = sysfs::ReadAttribute(thp_file)) {
    if (const auto selected = SelectedMode(*text)) {
      std::string_view rest = *text;
      while (!rest.empty()) {
        const auto space = rest.find(' ');
        std::string mode(rest.substr(0, space));
        rest = space == std::string_view::npos ? "" : rest.substr(space + 1);
        if (mode.empty()) continue;
        if (mode.front() == '[') mode = mode.substr(1, mode.size() - 2);
        out.Add(kThp, {{"mode", mode}}, mode == *selected ? 1 : 0);
        ++added;
      }
    } else {
      WarnOnce(thp_file, "modes with one [selected]");
    }
  }
  return added;
}

size_t HostTuningCollector::CollectHugepages(MetricSet& out) const {
  size_t added = 0;
  const fs::path meminfo = procfs_ / "meminfo";
  if (const auto text = sysfs::ReadFile(meminfo, 64 * 1024)) {
    static const std::map<std::string_view, std::string_view> kStates{
        {"HugePages_Total", "total"},
        {"HugePages_Free", "free"},
        {"HugePages_Rsvd", "reserved"},
        {"HugePages_Surp", "surplus"}};
    std::string_view rest = *text;
    while (!rest.empty()) {
      const auto newline = rest.find('\n');
      const std::string_view line = rest.substr(0, newline);
      rest = newline == std::string_view::npos ? "" : rest.substr(newline + 1);
      const auto colon = line.find(':');
      if (colon == std::string_view::npos) continue;
      const std::string_view key = line.substr(0, colon);
      std::string_view value = sysfs::Trim(line.substr(colon + 1));
      if (const auto state = kStates.find(key); state != kStates.end()) {
        if (const auto pages = sysfs::ParseUnsigned(value)) {
          out.Add(kHugepages, {{"state", state->second}}, static_cast<double>(*pages));
          ++added;
        }
      } else if (key == "Hugepagesize" && value.ends_with(" kB")) {
        if (const auto kib = sysfs::ParseUnsigned(value.substr(0, value.size() - 3))) {
          out.Add(kHugepageSize, {}, static_cast<double>(*kib) * 1024);
          ++added;
        }
      }
    }
  }
  return added;
}

size_t HostTuningCollector::CollectScheduler(MetricSet& out) const {
  size_t added = 0;
  if (const auto mode = sysfs::ReadUnsigned(procfs_ / "sys/kernel/numa_balancing")) {
    out.Add(kNumaBalancing, {}, static_cast<double>(*mode));
    ++added;
  }
  if (const auto online = sysfs::ReadAttribute(sysfs_ / "devices/system/cpu/online")) {
    const auto cpus = sys::ParseCpuList(*online);
    if (!cpus.empty()) {
      out.Add(kOnlineCpus, {}, static_cast<double>(cpus.size()));
      ++added;
    }
  }
  std::map<std::string, size_t> governors;
  const fs::path cpus = sysfs_ / "devices/system/cpu";
  for (const std::string& cpu : sysfs::ListDirectory(cpus)) {
    if (!IsCpuDirectory(cpu)) continue;
    // Offline CPUs have no cpufreq directory (their policy is inactive) and are not counted.
    if (const auto governor = sysfs::ReadAttribute(cpus / cpu / "cpufreq/scaling_governor")) {
      const std::string_view name = sysfs::Trim(*governor);
      if (!name.empty()) ++governors[std::string(name)];
    }
  }
  for (const auto& [governor, count] : governors) {
    out.Add(kGovernor, {{"governor", governor}}, static_cast<double>(count));
    ++added;
  }
  return added;
}

namespace {

// Adds the samples of families a MetricSet produced earlier (all gauges, counters or untyped
// here); the views point into `families`, which outlives the call.
size_t Replay(const std::vector<prometheus::MetricFamily>& families, MetricSet& out) {
  size_t added = 0;
  std::vector<Label> labels;
  for (const prometheus::MetricFamily& family : families) {
    const MetricDesc desc{family.name, family.help, family.type};
    for (const prometheus::ClientMetric& metric : family.metric) {
      labels.clear();
      for (const auto& label : metric.label) labels.emplace_back(label.name, label.value);
      double value = metric.untyped.value;
      if (family.type == prometheus::MetricType::Gauge) value = metric.gauge.value;
      if (family.type == prometheus::MetricType::Counter) value = metric.counter.value;
      if (out.Add(desc, labels, value)) ++added;
    }
  }
  return added;
}

}  // namespace

size_t HostTuningCollector::CollectSlow(MetricSet& out) const {
  std::lock_guard lock(slow_mutex_);
  const auto now = clock_();
  if (!slow_read_at_ || now - *slow_read_at_ >= options_.refresh_interval) {
    MetricSet fresh;
    CollectQueues(fresh);
    CollectThp(fresh);
    CollectScheduler(fresh);
    CollectRoceConfig(fresh);
    CollectModules(fresh);
    slow_families_ = fresh.Take();
    slow_read_at_ = now;
  }
  return Replay(slow_families_, out);
}

CollectResult HostTuningCollector::Collect(MetricSet& out) const {
  const size_t pcie = CollectPcie(out);
  const size_t rest = CollectHugepages(out) + CollectSlow(out);
  CollectResult result;
  result.no_data = pcie + rest == 0;
  result.detail =
      std::to_string(pcie) + " PCIe link series, " + std::to_string(rest) + " host setting series";
  return result;
}

}  // namespace rdmascope
