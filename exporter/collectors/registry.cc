#include "collectors/registry.h"

#include <array>

#include "collectors/ethtool.h"
#include "collectors/host_tuning.h"
#include "collectors/link.h"
#include "collectors/mr.h"
#include "collectors/occupancy.h"
#include "collectors/perf.h"
#include "collectors/perf_capture.h"
#include "collectors/rdma.h"
#include "collectors/resources.h"
#include "collectors/verbs.h"
#include "collectors/verbs_ports_capture.h"
#include "collectors/workload.h"
#include "core/capture.h"
#include "core/log.h"
#include "sys/grpc_capture.h"

namespace rdmascope {
namespace {

std::unique_ptr<Collector> MakeEthtool(const CollectorsConfig& config) {
  return std::make_unique<EthtoolCollector>(
      config.ethtool, std::make_unique<SystemNetdevSource>(config.sysfs, config.ethtool.pfc,
                                                           config.ethtool.refresh_interval));
}

std::unique_ptr<Collector> MakeRdma(const CollectorsConfig& config) {
  return std::make_unique<RdmaCollector>(
      config.rdma, config.sysfs,
      std::make_unique<CapturedPortMtuQuerier>(std::make_unique<VerbsPortMtuQuerier>()));
}

std::unique_ptr<Collector> MakeResources(const CollectorsConfig& config) {
  return std::make_unique<ResourcesCollector>(
      config.resources, config.procfs,
      std::make_unique<NetlinkResourceSource>(config.resources.max_raw_cqs));
}

std::unique_ptr<Collector> MakeVerbs(const CollectorsConfig& config) {
  VerbsOptions options = config.verbs;
  options.probe.libraries = config.mr.libraries;
  options.probe.binaries = config.mr.binaries;
  return std::make_unique<VerbsCollector>(options, config.procfs);
}

std::unique_ptr<Collector> MakeOccupancy(const CollectorsConfig& config) {
  return std::make_unique<OccupancyCollector>(config.occupancy, config.procfs);
}

std::unique_ptr<Collector> MakePerf(const CollectorsConfig& config) {
  return std::make_unique<PerfCollector>(
      config.perf, config.sysfs, std::make_unique<CapturedPerfHost>(SystemPerfHost(config.sysfs)));
}

std::unique_ptr<Collector> MakeMr(const CollectorsConfig& config) {
  return std::make_unique<MrCollector>(config.mr, config.procfs, config.sysfs);
}

std::unique_ptr<Collector> MakeHostTuning(const CollectorsConfig& config) {
  return std::make_unique<HostTuningCollector>(config.sysfs, config.procfs, config.host);
}

std::unique_ptr<Collector> MakeLink(const CollectorsConfig& config) {
  // The port -> netdev mapping as the rdma collector reads it (RDMA netlink on the host's own
  // /sys, sysfs alone under --path.sysfs).
  std::unique_ptr<PortNetdevSource> netdevs;
  if (config.sysfs == "/sys") {
    netdevs = std::make_unique<NetlinkPortNetdevSource>();
  } else {
    netdevs = std::make_unique<SysfsPortNetdevSource>(config.sysfs);
  }
  return std::make_unique<LinkCollector>(
      config.link,
      std::make_unique<SystemLinkPorts>(config.sysfs, std::move(netdevs), config.link.max_netdevs),
      SystemModuleRead(), std::chrono::steady_clock::now, SystemLinkEthtoolRead(),
      SystemLinkEventReads(config.sysfs));
}

// Replaying: the container runtime and the kubelet the capture recorded, answered from each
// sample's grpc/*.json (sys/grpc_capture.h): no socket, no gRPC library. A source the capture
// did not record (the host had none to ask) is not there, as on that host.
std::unique_ptr<Collector> MakeReplayedWorkload(const CollectorsConfig& config) {
  std::unique_ptr<sys::ContainerNames> names;
  if (const auto endpoint = sys::RecordedEndpoint(sys::kCriAnswerFile)) {
    log::Info("container names from the capture", {{"endpoint", *endpoint}});
    // Interval 0: in step with the samples, whatever the flags said.
    names = std::make_unique<sys::ContainerNames>(
        sys::CriOptions{.endpoint = *endpoint, .refresh_interval = std::chrono::milliseconds(0)});
  }
  std::unique_ptr<DeviceWorkloads> devices;
  if (const auto endpoint = sys::RecordedEndpoint(sys::kPodResourcesAnswerFile)) {
    log::Info("devices of pods from the capture", {{"endpoint", *endpoint}});
    devices = std::make_unique<DeviceWorkloads>(
        config.sysfs,
        std::make_unique<sys::PodResources>(sys::PodResourcesOptions{
            .endpoint = *endpoint, .refresh_interval = std::chrono::milliseconds(0)}));
  }
  return std::make_unique<WorkloadCollector>(config.procfs, std::move(names), std::move(devices),
                                             config.workload.recheck_interval);
}

// The gRPC library for a source at `endpoint`, or why there is none (recorded in a capture's
// index: the source was there and could not be asked).
std::optional<std::filesystem::path> GrpcLibraryFor(const char* source,
                                                    const std::string& endpoint) {
  std::error_code ec;
  auto library =
      sys::FindGrpcLibrary(std::filesystem::read_symlink("/proc/self/exe", ec).parent_path());
  if (library) return *library;
  log::Warn(std::string("no ") + source + ": the gRPC library is missing",
            {{"err", library.error()}});
  if (capture::Session* session = capture::Active(); session && session->writer()) {
    session->writer()->Missed(std::string("workload: ") + source + " at " + endpoint,
                              "the gRPC library is missing: " + library.error());
  }
  return std::nullopt;
}

std::unique_ptr<Collector> MakeWorkload(const CollectorsConfig& config) {
  const capture::Session* session = capture::Active();
  if (session != nullptr && session->replaying()) return MakeReplayedWorkload(config);
  std::unique_ptr<sys::ContainerNames> names;
  const std::string endpoint = ResolveCriEndpoint(config.workload.cri_endpoint, "/");
  if (!endpoint.empty()) {
    if (const auto library = GrpcLibraryFor("container names", endpoint)) {
      log::Info("container names from the container runtime", {{"endpoint", endpoint}});
      names = std::make_unique<sys::ContainerNames>(
          sys::CriOptions{.endpoint = endpoint,
                          .timeout = config.workload.cri_timeout,
                          .refresh_interval = config.workload.cri_refresh_interval,
                          .library = *library});
    }
  } else if (config.workload.cri_endpoint == "auto") {
    log::Debug("no container runtime socket found: container names are not asked for");
  }
  std::unique_ptr<DeviceWorkloads> devices;
  const std::string kubelet = ResolveKubeletSocket(config.workload_kubelet.socket, "/");
  if (!kubelet.empty()) {
    if (const auto library = GrpcLibraryFor("devices of pods", kubelet)) {
      log::Info("devices of pods from the kubelet's PodResources API", {{"endpoint", kubelet}});
      devices = std::make_unique<DeviceWorkloads>(
          config.sysfs, std::make_unique<sys::PodResources>(sys::PodResourcesOptions{
                            .endpoint = kubelet,
                            .timeout = config.workload_kubelet.timeout,
                            .refresh_interval = config.workload_kubelet.refresh_interval,
                            .library = *library}));
    }
  } else if (config.workload_kubelet.socket == "auto") {
    log::Debug("no kubelet PodResources socket found: devices of pods are not asked for");
  }
  return std::make_unique<WorkloadCollector>(config.procfs, std::move(names), std::move(devices),
                                             config.workload.recheck_interval);
}

// Order matters once: `workload` describes the processes of the series listed before it.
constexpr std::array<CollectorEntry, 10> kCollectors{{
    {"ethtool", "NIC statistics, RoCE health counters and NIC configuration (SIOCETHTOOL, DCB)",
     true, &MakeEthtool},
    {"rdma", "RDMA devices and ports from /sys/class/infiniband, MTU from libibverbs", true,
     &MakeRdma},
    {"resources",
     "RDMA objects (PD, CQ, QP, MR, SRQ, context, CM id) per device and process, from RDMA "
     "netlink",
     true, &MakeResources},
    {"mr", "RDMA memory registrations per process (eBPF uprobes on libibverbs)", true, &MakeMr},
    {"verbs",
     "CQ and SRQ sizing and async events per process (eBPF uprobes on the libibverbs control "
     "path)",
     true, &MakeVerbs},
    {"perf",
     "CPU and memory-controller counters per NUMA node and socket (perf_event_open, libpfm4)", true,
     &MakePerf},
    {"occupancy",
     "Exact CQ and SRQ fill levels of applications run with librdmascope_preload.so (opt-in)", true,
     &MakeOccupancy},
    {"host",
     "Host tuning: PCIe link of RDMA devices against their capability, huge pages, THP, "
     "numa_balancing, CPU frequency governors (sysfs, procfs)",
     true, &MakeHostTuning},
    {"link",
     "Optics of each port's pluggable module: temperature, supply, per-lane bias and TX/RX power "
     "against the module's thresholds, identity, CMIS state (ethtool netlink "
     "MODULE_EEPROM_GET, read in the background)",
     true, &MakeLink},
    {"workload",
     "The Kubernetes pod and container, Slurm job and step or systemd unit of each process the "
     "collectors above export (/proc/PID/cgroup)",
     true, &MakeWorkload},
}};

}  // namespace

std::span<const CollectorEntry> AllCollectors() { return kCollectors; }

}  // namespace rdmascope
