// rdma_link_* series from the link collector's snapshot (docs/metrics.md, "Links"). Every
// value in base units (celsius, volts, amperes, watts: dBm is the recording rules'); what a
// module did not give is a missing series, never a 0.
#include <cstdio>
#include <string>

#include "collectors/link.h"

namespace rdmascope {
namespace {

using prometheus::MetricType;

constexpr MetricDesc kAvailable{"rdma_link_source_available", kLinkSourceAvailableHelp,
                                MetricType::Gauge};
constexpr MetricDesc kInfo{"rdma_link_module_info",
                           "The pluggable module's identity (SFF-8024 type, memory map, vendor, "
                           "part, serial, revision, media, wavelength, CMIS firmware).",
                           MetricType::Gauge};
constexpr MetricDesc kMaxSpeed{
    "rdma_link_module_max_speed_bits_per_second",
    "The fastest Ethernet speed the module advertises (CMIS: its highest application's host "
    "interface, SFF-8024 Table 4-5; SFF-8636: compliance codes, else the lanes' nominal rate; "
    "SFF-8472: nominal rate); absent when it advertises nothing decoded.",
    MetricType::Gauge};
constexpr MetricDesc kTemperature{"rdma_link_module_temperature_celsius",
                                  "Module temperature, as the module measures it.",
                                  MetricType::Gauge};
constexpr MetricDesc kSupply{"rdma_link_module_supply_voltage_volts", "Module supply voltage.",
                             MetricType::Gauge};
constexpr MetricDesc kBias{"rdma_link_module_lane_tx_bias_amperes", "Laser bias current per lane.",
                           MetricType::Gauge};
constexpr MetricDesc kTxPower{"rdma_link_module_lane_tx_power_watts",
                              "Transmitted optical power per lane (0 is no light).",
                              MetricType::Gauge};
constexpr MetricDesc kRxPower{"rdma_link_module_lane_rx_power_watts",
                              "Received optical power per lane (0 is no light).",
                              MetricType::Gauge};
constexpr MetricDesc kTemperatureThreshold{
    "rdma_link_module_temperature_threshold_celsius",
    "The module's own temperature threshold, by level (alarm, warning) and bound (high, low); "
    "only from a table that makes sense (rdma_link_module_thresholds_valid).",
    MetricType::Gauge};
constexpr MetricDesc kSupplyThreshold{"rdma_link_module_supply_voltage_threshold_volts",
                                      "The module's own supply voltage threshold, by level and "
                                      "bound; only from a valid table.",
                                      MetricType::Gauge};
constexpr MetricDesc kBiasThreshold{"rdma_link_module_tx_bias_threshold_amperes",
                                    "The module's own laser bias threshold (every lane), by "
                                    "level and bound; only from a valid table.",
                                    MetricType::Gauge};
constexpr MetricDesc kTxPowerThreshold{"rdma_link_module_tx_power_threshold_watts",
                                       "The module's own TX power threshold (every lane), by "
                                       "level and bound; only from a valid table.",
                                       MetricType::Gauge};
constexpr MetricDesc kRxPowerThreshold{"rdma_link_module_rx_power_threshold_watts",
                                       "The module's own RX power threshold (every lane), by "
                                       "level and bound; only from a valid table.",
                                       MetricType::Gauge};
constexpr MetricDesc kThresholdsValid{
    "rdma_link_module_thresholds_valid",
    "1 when the module's thresholds of the quantity make sense (not all zero, finite, low "
    "alarm <= low warning < high warning <= high alarm), 0 when they do not (then no "
    "threshold series: compare with defaults).",
    MetricType::Gauge};
constexpr MetricDesc kState{"rdma_link_module_state",
                            "CMIS module state: 1 low power, 2 powering up, 3 ready, 4 "
                            "powering down, 5 fault.",
                            MetricType::Gauge};
constexpr MetricDesc kStateInfo{"rdma_link_module_state_info",
                                "CMIS module state and fault cause, named.", MetricType::Gauge};
constexpr MetricDesc kFaultCause{"rdma_link_module_fault_cause",
                                 "CMIS module fault cause: 0 none, 1 TEC runaway, 2 data memory "
                                 "corrupted, 3 program memory corrupted, others reserved or "
                                 "custom.",
                                 MetricType::Gauge};
constexpr MetricDesc kErrors{"rdma_link_module_read_errors_total",
                             "Module reads that failed, whole or in part, by errno (a driver "
                             "without module access, EOPNOTSUPP, is not counted).",
                             MetricType::Counter};
constexpr MetricDesc kDuration{"rdma_link_module_read_duration_seconds",
                               "How long the module's last read took (every page of it, or the "
                               "dynamic ones between static reads).",
                               MetricType::Gauge};

constexpr MetricDesc kIbWidth{"rdma_link_ib_width_lanes",
                              "An InfiniBand port's active link width in lanes, from its rate "
                              "(\"400 Gb/sec (4X NDR)\": 4); only while the port is up.",
                              MetricType::Gauge};
constexpr MetricDesc kIbLaneRate{"rdma_link_ib_lane_rate_bits_per_second",
                                 "An InfiniBand port's data rate per lane: its rate over its "
                                 "width (NDR 1e11, HDR 5e10, EDR 2.5e10); only while the port "
                                 "is up.",
                                 MetricType::Gauge};

// SFF-8024 table 4-1, the identifiers the decoder reads.
const char* TypeName(uint8_t identifier) {
  switch (identifier) {
    case 0x03:
      return "SFP";
    case 0x0c:
      return "QSFP";
    case 0x0d:
      return "QSFP+";
    case 0x11:
      return "QSFP28";
    case 0x18:
      return "QSFP-DD";
    case 0x19:
      return "OSFP";
    case 0x1e:
      return "QSFP+ CMIS";
    default:
      return "unknown";
  }
}

}  // namespace

const char* CmisModuleStateName(uint8_t state) {
  switch (state) {
    case 1:
      return "low_power";
    case 2:
      return "powering_up";
    case 3:
      return "ready";
    case 4:
      return "powering_down";
    case 5:
      return "fault";
    default:
      return "reserved";
  }
}

namespace {

const char* FaultName(uint8_t cause) {
  switch (cause) {
    case 0:
      return "none";
    case 1:
      return "tec_runaway";
    case 2:
      return "data_memory_corrupted";
    case 3:
      return "program_memory_corrupted";
    default:
      return "other";
  }
}

// Shortest decimal that reads back as the value ("850", "1310.55").
std::string Number(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.6g", value);
  return buffer;
}

void MapThresholds(const std::vector<Label>& key, std::string_view quantity,
                   const std::optional<sys::ModuleThresholds>& thresholds, const MetricDesc& desc,
                   MetricSet& out) {
  if (!thresholds) return;
  std::vector<Label> valid = key;
  valid.emplace_back("quantity", quantity);
  out.Add(kThresholdsValid, valid, thresholds->valid ? 1 : 0);
  // An invalid table's numbers are no threshold anyone can compare with: not exported.
  if (!thresholds->valid) return;
  const struct {
    std::string_view level, bound;
    double value;
  } rows[] = {{"alarm", "high", thresholds->high_alarm},
              {"alarm", "low", thresholds->low_alarm},
              {"warning", "high", thresholds->high_warning},
              {"warning", "low", thresholds->low_warning}};
  for (const auto& row : rows) {
    std::vector<Label> labels = key;
    labels.emplace_back("level", row.level);
    labels.emplace_back("bound", row.bound);
    out.Add(desc, labels, row.value);
  }
}

void MapModule(const std::vector<Label>& key, const ModuleState& state, MetricSet& out) {
  if (const auto& r = state.reading) {
    const std::string wavelength = r->wavelength_nm ? Number(*r->wavelength_nm) : "";
    std::vector<Label> info = key;
    info.insert(info.end(), {{"type", TypeName(r->identifier)},
                             {"standard", sys::StandardName(r->standard)},
                             {"vendor", r->vendor},
                             {"oui", r->oui},
                             {"part", r->part_number},
                             {"serial", r->serial},
                             {"revision", r->vendor_revision},
                             {"media", r->media},
                             {"wavelength_nm", wavelength},
                             {"firmware", r->firmware}});
    out.Add(kInfo, info, 1);
    if (r->max_speed_mbps) out.Add(kMaxSpeed, key, *r->max_speed_mbps * 1e6);
    if (r->temperature_celsius) out.Add(kTemperature, key, *r->temperature_celsius);
    if (r->supply_volts) out.Add(kSupply, key, *r->supply_volts);
    for (size_t i = 0; i < r->lanes.size(); ++i) {
      const std::string lane = std::to_string(i + 1);  // lanes are numbered from 1 by the specs
      std::vector<Label> labels = key;
      labels.emplace_back("lane", lane);
      const sys::ModuleLane& l = r->lanes[i];
      if (l.tx_bias_amperes) out.Add(kBias, labels, *l.tx_bias_amperes);
      if (l.tx_power_watts) out.Add(kTxPower, labels, *l.tx_power_watts);
      if (l.rx_power_watts) out.Add(kRxPower, labels, *l.rx_power_watts);
    }
    MapThresholds(key, "temperature", r->temperature_thresholds, kTemperatureThreshold, out);
    MapThresholds(key, "supply_voltage", r->supply_thresholds, kSupplyThreshold, out);
    MapThresholds(key, "tx_bias", r->tx_bias_thresholds, kBiasThreshold, out);
    MapThresholds(key, "tx_power", r->tx_power_thresholds, kTxPowerThreshold, out);
    MapThresholds(key, "rx_power", r->rx_power_thresholds, kRxPowerThreshold, out);
    if (r->cmis_module_state) {
      out.Add(kState, key, *r->cmis_module_state);
      std::vector<Label> named = key;
      named.emplace_back("state", CmisModuleStateName(*r->cmis_module_state));
      named.emplace_back("fault_cause", r->cmis_fault_cause ? FaultName(*r->cmis_fault_cause) : "");
      out.Add(kStateInfo, named, 1);
    }
    if (r->cmis_fault_cause) out.Add(kFaultCause, key, *r->cmis_fault_cause);
  }
  for (const auto& [reason, count] : state.errors) {
    std::vector<Label> labels = key;
    labels.emplace_back("reason", reason);
    out.Add(kErrors, labels, static_cast<double>(count));
  }
  if (state.read_seconds) out.Add(kDuration, key, *state.read_seconds);
}

// Issue 40 items 2 and 5: whether the RDMA port's PMA counters answer, and an InfiniBand
// port's width and lane speed as trained.
void MapIbPort(const LinkPort& port, const std::vector<Label>& key, MetricSet& out) {
  if (port.ib_counters) {
    std::vector<Label> source = key;
    source.emplace_back("source", "ib_counters");
    out.Add(kAvailable, source, *port.ib_counters ? 1 : 0);
  }
  if (port.ib_rate) {
    out.Add(kIbWidth, key, port.ib_rate->width_lanes);
    out.Add(kIbLaneRate, key, port.ib_rate->lane_bits_per_second);
  }
}

}  // namespace

void MapLinks(const LinkSnapshot& snapshot, MetricSet& out) {
  for (const LinkPort& port : snapshot.ports) {
    const std::vector<Label> key{
        {"device", port.device}, {"port", port.port}, {"netdev", port.netdev}};
    MapIbPort(port, key, out);
    std::vector<Label> source = key;
    source.emplace_back("source", "module");
    const auto state = port.netdev.empty() || port.native_ib || port.over_limit
                           ? snapshot.modules.end()
                           : snapshot.modules.find(port.netdev);
    if (state == snapshot.modules.end()) {
      // Nothing to read (native InfiniBand, an interface elsewhere, over the bound) is 0; a
      // module not read yet has no series until it is.
      if (port.netdev.empty() || port.native_ib || port.over_limit) out.Add(kAvailable, source, 0);
      MapLinkFec(key, port, snapshot.fec, kAvailable, out);  // issue 40: FEC and link modes
      continue;
    }
    out.Add(kAvailable, source, state->second.available ? 1 : 0);
    MapModule(key, state->second, out);
    MapLinkFec(key, port, snapshot.fec, kAvailable, out);  // issue 40: FEC and link modes
  }
  MapLinkEvents(snapshot, out);
}

}  // namespace rdmascope
