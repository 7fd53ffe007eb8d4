// The host collector's RoCE configuration and kernel module inputs (host_tuning.h): the
// default RoCE ToS of rdma_cm (configfs), the ECN enables of the mlx5 ECN sysfs, and the
// kernel modules RDMA needs. Absent files give no series, never a 0 that was not read.
#include <array>
#include <map>
#include <string_view>
#include <system_error>

#include "collectors/host_tuning.h"
#include "core/sysfs.h"

namespace rdmascope {
namespace fs = std::filesystem;
namespace {

using prometheus::MetricType;

constexpr MetricDesc kConfigfs{
    "rdma_host_rdma_cm_configfs",
    "1 when rdma_cm's configfs directory (/sys/kernel/config/rdma_cm) exists: configfs mounted "
    "and rdma_cm loaded; 0 otherwise (default RoCE ToS not readable).",
    MetricType::Gauge};
constexpr MetricDesc kDefaultTos{
    "rdma_port_default_roce_tos",
    "Type of service rdma_cm uses for RoCE connections whose application sets none "
    "(configfs rdma_cm/DEV/ports/N/default_roce_tos; present once DEV's directory was made).",
    MetricType::Gauge};
constexpr MetricDesc kEcn{"rdma_netdev_ecn_enabled",
                          "ECN of a RoCE priority as the mlx5 ECN sysfs shows it "
                          "(/sys/class/net/DEV/ecn/roce_np|roce_rp/enable/PRIO): point np is "
                          "the notification point (sends CNPs), rp the reaction point.",
                          MetricType::Gauge};
constexpr MetricDesc kModule{"rdma_host_kernel_module_loaded",
                             "1 when a kernel module RDMA needs is loaded, 0 when not; "
                             "needed_by: rdma (core modules) or the NIC driver whose RDMA "
                             "provider it is.",
                             MetricType::Gauge};

// Ethernet drivers and the RDMA provider each needs for its RDMA device (the kernel's
// drivers/infiniband/hw/*: mlx5_ib binds to mlx5_core's auxiliary devices, bnxt_re to bnxt_en's,
// irdma to ice's). i40e is left out: only its X722 variant does RDMA.
constexpr std::array<std::pair<std::string_view, std::string_view>, 8> kProviders = {{
    {"mlx5_core", "mlx5_ib"},
    {"mlx4_core", "mlx4_ib"},
    {"bnxt_en", "bnxt_re"},
    {"ice", "irdma"},
    {"qede", "qedr"},
    {"cxgb4", "iw_cxgb4"},
    {"hns3", "hns_roce_hw_v2"},
    {"mana", "mana_ib"},
}};

bool Exists(const fs::path& path) { return sysfs::PathExists(path); }

}  // namespace

size_t HostTuningCollector::CollectRoceConfig(MetricSet& out) const {
  size_t added = 0;
  const fs::path configfs = sysfs_ / "kernel/config/rdma_cm";
  const bool mounted = Exists(configfs);
  // Said only on a host with an RDMA device: elsewhere there is no ToS to miss.
  if (!sysfs::ListDirectory(sysfs_ / "class/infiniband").empty()) {
    out.Add(kConfigfs, {}, mounted ? 1 : 0);
    ++added;
  }
  if (mounted) {
    // One directory per device an administrator created (cma_configfs.c make_cma_dev()), with
    // ports/N/default_roce_tos (cma_configfs.c default_roce_tos_show(), "%u\n").
    for (const std::string& device : sysfs::ListDirectory(configfs)) {
      for (const std::string& port : sysfs::ListDirectory(configfs / device / "ports")) {
        const fs::path file = configfs / device / "ports" / port / "default_roce_tos";
        const auto tos = sysfs::ReadUnsigned(file);
        if (!tos) continue;
        if (*tos > 255) {
          WarnOnce(file, "a ToS byte");
          continue;
        }
        out.Add(kDefaultTos, {{"device", device}, {"port", port}}, static_cast<double>(*tos));
        ++added;
      }
    }
  }
  const fs::path net = sysfs_ / "class/net";
  for (const std::string& netdev : sysfs::ListDirectory(net)) {
    // The ECN directory belongs to the PCI netdev (mlx5e's sysfs); a virtual one has none.
    if (!HasDeviceLink(net / netdev)) continue;
    for (const char* point : {"np", "rp"}) {
      const fs::path dir = net / netdev / "ecn" / (std::string("roce_") + point) / "enable";
      for (const std::string& priority : sysfs::ListDirectory(dir)) {
        const auto enabled = sysfs::ReadUnsigned(dir / priority);
        if (!enabled || priority.size() != 1 || priority[0] < '0' || priority[0] > '7') continue;
        out.Add(kEcn, {{"device", netdev}, {"point", point}, {"priority", priority}},
                *enabled != 0 ? 1 : 0);
        ++added;
      }
    }
  }
  return added;
}

size_t HostTuningCollector::CollectModules(MetricSet& out) const {
  size_t added = 0;
  // A loaded module has /sys/module/NAME; a built-in one only if it has parameters, so each
  // module's own sysfs evidence counts too: ib_uverbs makes class/infiniband_verbs, rdma_ucm
  // the misc device rdma_cm (ucma.c ucma_misc), a provider the NIC's infiniband/ directory.
  const auto loaded = [&](std::string_view module, const fs::path& evidence) {
    return Exists(sysfs_ / "module" / module) || (!evidence.empty() && Exists(evidence));
  };
  const bool rdma_present = !sysfs::ListDirectory(sysfs_ / "class/infiniband").empty();
  std::map<std::string, bool> providers;  // "driver provider" -> loaded
  const fs::path net = sysfs_ / "class/net";
  for (const std::string& netdev : sysfs::ListDirectory(net)) {
    if (!HasDeviceLink(net / netdev)) continue;  // virtual: no driver to need a provider
    const auto driver = sysfs::ReadLinkBasename(net / netdev / "device/driver");
    if (!driver) continue;
    for (const auto& [nic_driver, provider] : kProviders) {
      if (*driver != nic_driver) continue;
      const bool has_rdma = !sysfs::ListDirectory(net / netdev / "device/infiniband").empty();
      auto& seen = providers[std::string(nic_driver) + " " + std::string(provider)];
      seen = seen || has_rdma || loaded(provider, {});
    }
  }
  if (!rdma_present && providers.empty()) return 0;  // no RDMA hardware: nothing is missing
  const struct {
    const char* module;
    const char* evidence;
  } kCore[] = {{"ib_core", "class/infiniband"},
               {"ib_uverbs", "class/infiniband_verbs"},
               {"rdma_ucm", "class/misc/rdma_cm"}};
  for (const auto& core : kCore) {
    out.Add(kModule, {{"module", core.module}, {"needed_by", "rdma"}},
            loaded(core.module, sysfs_ / core.evidence) ? 1 : 0);
    ++added;
  }
  for (const auto& [key, is_loaded] : providers) {
    const auto space = key.find(' ');
    out.Add(kModule, {{"module", key.substr(space + 1)}, {"needed_by", key.substr(0, space)}},
            is_loaded ? 1 : 0);
    ++added;
  }
  return added;
}

}  // namespace rdmascope
