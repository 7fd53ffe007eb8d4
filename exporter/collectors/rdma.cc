#include "collectors/rdma.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "core/log.h"

namespace rdmascope {
namespace {

using prometheus::MetricType;

constexpr MetricDesc kDeviceInfo{"rdma_device_info", "RDMA device identity from sysfs.",
                                 MetricType::Gauge};
constexpr MetricDesc kDeviceNuma{"rdma_device_numa_node",
                                 "NUMA node of the RDMA device (-1: the platform reports none).",
                                 MetricType::Gauge};
constexpr MetricDesc kPortInfo{"rdma_port_info",
                               "RDMA port identity and state names; netdev is the port's "
                               "interface in this network namespace (RDMA netlink).",
                               MetricType::Gauge};
constexpr MetricDesc kPortState{"rdma_port_state",
                                "Port logical state number (1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE, "
                                "5 ACTIVE_DEFER).",
                                MetricType::Gauge};
constexpr MetricDesc kPortPhysState{"rdma_port_physical_state",
                                    "Port physical state number (5 = LinkUp).", MetricType::Gauge};
constexpr MetricDesc kNetdevAdminUp{
    "rdma_port_netdev_admin_up",
    "1 when the port's netdev is administratively up (IFF_UP), 0 when an operator set it down. "
    "On RoCE/iWARP a DOWN + Disabled port whose netdev is up has lost its link (cable, peer).",
    MetricType::Gauge};
constexpr MetricDesc kNetdevCarrier{"rdma_port_netdev_carrier",
                                    "1 when the port's netdev has carrier, 0 when it has none "
                                    "(absent while the netdev is administratively down).",
                                    MetricType::Gauge};
constexpr MetricDesc kPortRate{"rdma_port_rate_bytes_per_second",
                               "Port signalling rate in bytes per second (ports up only).",
                               MetricType::Gauge};
constexpr MetricDesc kPortDataRate{
    "rdma_port_data_rate_bytes_per_second",
    "Port data rate in bytes per second: the signalling rate less line coding (InfiniBand "
    "SDR/DDR/QDR 8b/10b, FDR 64b/66b; ports up only).",
    MetricType::Gauge};
constexpr MetricDesc kHwCounter{"rdma_port_hw_counter_total",
                                "A driver hw_counters file, raw name in `counter`.",
                                MetricType::Counter};
constexpr MetricDesc kHwGauge{"rdma_port_hw_value",
                              "A driver hw_counters file that holds a current value (object "
                              "count, high-water mark), raw name in `counter`.",
                              MetricType::Gauge};
constexpr MetricDesc kDeviceHwCounter{"rdma_device_hw_stat_total",
                                      "A device-level hw_counters file, raw name in `counter`.",
                                      MetricType::Counter};
constexpr MetricDesc kDeviceHwGauge{"rdma_device_hw_value",
                                    "A device-level hw_counters file that holds a current "
                                    "value, raw name in `counter`.",
                                    MetricType::Gauge};
constexpr MetricDesc kSaturated{"rdma_port_stat_saturated",
                                "1 when a fixed-width port counter (counters/, raw name in "
                                "`counter`) sits at its maximum: it no longer counts.",
                                MetricType::Gauge};
constexpr MetricDesc kPortCounter{"rdma_port_stat_total",
                                  "A standard port counters/ file not curated below, raw name in "
                                  "`counter`.",
                                  MetricType::Counter};
constexpr MetricDesc kGidInfo{"rdma_port_gid_info",
                              "A populated GID table entry with its RoCE type and netdev.",
                              MetricType::Gauge};
constexpr MetricDesc kActiveMtu{"rdma_port_active_mtu_bytes",
                                "Active path MTU of the port (ibv_query_port).", MetricType::Gauge};
constexpr MetricDesc kMaxMtu{"rdma_port_max_mtu_bytes",
                             "Largest MTU the port supports (ibv_query_port).", MetricType::Gauge};

struct CuratedCounter {
  std::string_view file;
  MetricDesc desc;
  double scale;
};

// The IBA PortCounters, in base units. Data counters count 4-byte words.
constexpr std::array<CuratedCounter, 10> kCurated{{
    {"port_rcv_data",
     {"rdma_port_data_received_bytes_total", "Data received on the port, in bytes.",
      MetricType::Counter},
     4},
    {"port_xmit_data",
     {"rdma_port_data_transmitted_bytes_total", "Data transmitted on the port, in bytes.",
      MetricType::Counter},
     4},
    {"port_rcv_packets",
     {"rdma_port_packets_received_total", "Packets received on the port.", MetricType::Counter},
     1},
    {"port_xmit_packets",
     {"rdma_port_packets_transmitted_total", "Packets transmitted on the port.",
      MetricType::Counter},
     1},
    {"symbol_error",
     {"rdma_port_symbol_errors_total", "Minor link errors detected on the physical lanes.",
      MetricType::Counter},
     1},
    {"link_downed",
     {"rdma_port_link_downed_total", "Times the link failed its error recovery and went down.",
      MetricType::Counter},
     1},
    {"link_error_recovery",
     {"rdma_port_link_error_recovery_total", "Successful link error recoveries.",
      MetricType::Counter},
     1},
    {"port_rcv_errors",
     {"rdma_port_receive_errors_total", "Packets received with errors.", MetricType::Counter},
     1},
    {"port_xmit_discards",
     {"rdma_port_transmit_discards_total", "Outbound packets discarded (port down or congested).",
      MetricType::Counter},
     1},
    {"port_xmit_wait",
     {"rdma_port_transmit_wait_total",
      "Ticks during which the port had data to send but no flow-control credits.",
      MetricType::Counter},
     1},
}};

const CuratedCounter* FindCurated(std::string_view file) {
  for (const auto& counter : kCurated) {
    if (counter.file == file) return &counter;
  }
  return nullptr;
}

void MapPort(const RdmaDevice& device, const RdmaPort& port, MetricSet& out) {
  const std::string number = std::to_string(port.number);
  const std::initializer_list<Label> key{{"device", device.name}, {"port", number}};
  out.Add(kPortInfo,
          {{"device", device.name},
           {"port", number},
           {"link_layer", port.link_layer},
           {"state", port.state_name},
           {"phys_state", port.phys_state_name},
           {"netdev", port.netdev}},
          1);
  if (port.state) out.Add(kPortState, key, *port.state);
  if (port.phys_state) out.Add(kPortPhysState, key, *port.phys_state);
  if (port.netdev_admin_up) out.Add(kNetdevAdminUp, key, *port.netdev_admin_up ? 1 : 0);
  if (port.netdev_carrier) out.Add(kNetdevCarrier, key, *port.netdev_carrier ? 1 : 0);
  // A down port still prints a rate (a driver preset), which would read as capacity.
  if (port.rate_bytes_per_second && PortIsUp(port)) {
    out.Add(kPortRate, key, *port.rate_bytes_per_second);
  }
  if (port.data_rate_bytes_per_second && PortIsUp(port)) {
    out.Add(kPortDataRate, key, *port.data_rate_bytes_per_second);
  }
  if (port.mtu) {
    out.Add(kActiveMtu, key, port.mtu->active_bytes);
    out.Add(kMaxMtu, key, port.mtu->max_bytes);
  }
  for (const auto& [file, value] : port.counters) {
    if (const CuratedCounter* curated = FindCurated(file)) {
      out.Add(curated->desc, key, static_cast<double>(value) * curated->scale);
    } else {
      out.Add(kPortCounter, {{"device", device.name}, {"port", number}, {"counter", file}},
              static_cast<double>(value));
    }
    const bool from_64bit =
        std::ranges::find(port.counters_64bit, file) != port.counters_64bit.end();
    if (const auto width = PortCounterWidth(file); width && !from_64bit) {
      const uint64_t max = (uint64_t{1} << *width) - 1;
      out.Add(kSaturated, {{"device", device.name}, {"port", number}, {"counter", file}},
              value == max ? 1 : 0);
    }
  }
  for (const auto& [file, value] : port.hw_counters) {
    out.Add(IsHwCounterGauge(device.driver, file) ? kHwGauge : kHwCounter,
            {{"device", device.name}, {"port", number}, {"counter", file}},
            static_cast<double>(value));
  }
  for (const RdmaGid& gid : port.gids) {
    const std::string index = std::to_string(gid.index);
    out.Add(kGidInfo,
            {{"device", device.name},
             {"port", number},
             {"index", index},
             {"gid", gid.gid},
             {"type", gid.type},
             {"netdev", gid.netdev}},
            1);
  }
}

}  // namespace

void MapRdmaDevices(const std::vector<RdmaDevice>& devices, MetricSet& out) {
  for (const RdmaDevice& device : devices) {
    out.Add(kDeviceInfo,
            {{"device", device.name},
             {"node_type", device.node_type},
             {"firmware_version", device.fw_ver},
             {"board_id", device.board_id},
             {"hca_type", device.hca_type},
             {"node_guid", device.node_guid},
             // Deprecated, removed in 0.2.0: the first name of firmware_version (the sysfs
             // file's), served with the same value until then so that existing queries keep
             // working (docs/metrics.md).
             {"fw_ver", device.fw_ver}},
            1);
    if (device.numa_node) {
      out.Add(kDeviceNuma, {{"device", device.name}}, static_cast<double>(*device.numa_node));
    }
    for (const auto& [file, value] : device.hw_counters) {
      out.Add(IsHwCounterGauge(device.driver, file) ? kDeviceHwGauge : kDeviceHwCounter,
              {{"device", device.name}, {"counter", file}}, static_cast<double>(value));
    }
    for (const RdmaPort& port : device.ports) MapPort(device, port, out);
  }
}

RdmaCollector::RdmaCollector(const RdmaOptions& options, std::filesystem::path sysfs,
                             std::unique_ptr<PortMtuQuerier> mtu)
    : RdmaCollector(options, sysfs, std::move(mtu),
                    sysfs == "/sys" ? std::unique_ptr<PortNetdevSource>(
                                          std::make_unique<NetlinkPortNetdevSource>())
                                    : std::make_unique<SysfsPortNetdevSource>(sysfs)) {}

RdmaCollector::RdmaCollector(const RdmaOptions& options, std::filesystem::path sysfs,
                             std::unique_ptr<PortMtuQuerier> mtu,
                             std::unique_ptr<PortNetdevSource> netdevs)
    : devices_(options.device_include, options.device_exclude),
      sysfs_(std::move(sysfs)),
      mtu_(std::move(mtu)),
      netdevs_(std::move(netdevs)) {}

// The GID table's ndevs name interfaces of every network namespace (a pod's eth0 beside the
// host's): RDMA netlink says which interface of *this* namespace carries the port; without it,
// sysfs says so only for interfaces of the device itself (SysfsPortNetdevSource).
void RdmaCollector::FillNetdevs(std::vector<RdmaDevice>& devices) const {
  if (!netdevs_) return;
  auto netdevs = netdevs_->Read();
  if (!netdevs) {
    if (!netdev_failure_logged_.exchange(true)) {
      log::Warn(
          "RDMA netlink port dump failed: port netdevs from sysfs only (none for rxe, "
          "siw or bonds)",
          {{"error", std::strerror(netdevs.error())}});
    }
    netdevs = SysfsPortNetdevSource(sysfs_).Read();
  }
  for (RdmaDevice& device : devices) {
    for (RdmaPort& port : device.ports) {
      const auto it = netdevs->find({device.name, port.number});
      if (it == netdevs->end()) continue;
      port.netdev = it->second;
      const NetdevLinkState link = ReadNetdevLinkState(sysfs_, port.netdev);
      port.netdev_admin_up = link.admin_up;
      port.netdev_carrier = link.carrier;
    }
  }
}

CollectResult RdmaCollector::Collect(MetricSet& out) const {
  std::vector<RdmaDevice> devices = ReadRdmaDevices(sysfs_, devices_);
  if (devices.empty()) {
    return {.no_data = true,
            .detail = "no RDMA device under " + (sysfs_ / "class" / "infiniband").string()};
  }
  FillNetdevs(devices);
  if (mtu_) {
    const auto mtus = mtu_->Query(devices);
    for (RdmaDevice& device : devices) {
      for (RdmaPort& port : device.ports) {
        if (const auto it = mtus.find({device.name, port.number}); it != mtus.end()) {
          port.mtu = it->second;
        }
      }
    }
  }
  MapRdmaDevices(devices, out);
  size_t ports = 0;
  for (const auto& device : devices) ports += device.ports.size();
  return {.detail =
              std::to_string(devices.size()) + " devices, " + std::to_string(ports) + " ports"};
}

}  // namespace rdmascope
