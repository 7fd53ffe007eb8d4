#include "collectors/rdma_sysfs.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <span>
#include <stdexcept>

#include "core/log.h"
#include "core/sysfs.h"
#include "core/sysfs_dir.h"

namespace rdmascope {
namespace {

namespace fs = std::filesystem;

std::string AttributeOrEmpty(const fs::path& path) {
  return sysfs::ReadAttribute(path).value_or("");
}

// One open directory, openat + one read per file (core/sysfs_dir.h): a port has ~100 of these.
// A directory that is absent or cannot be read is no counters; a file that cannot be read or
// parsed is a missing series, its reason logged at debug level.
std::vector<std::pair<std::string, uint64_t>> ReadCounterDir(const fs::path& dir) {
  std::vector<std::pair<std::string, uint64_t>> counters;
  auto opened = sysfs::SysfsDir::Open(dir);
  if (!opened) {
    if (opened.error() != ENOENT && opened.error() != ENOTDIR) {
      log::Debug("cannot open counter directory",
                 {{"path", dir.string()}, {"error", std::strerror(opened.error())}});
    }
    return counters;
  }
  const auto names = opened->List();
  if (!names) {
    log::Debug("cannot list counter directory",
               {{"path", dir.string()}, {"error", std::strerror(names.error())}});
    return counters;
  }
  counters.reserve(names->size());
  for (const std::string& name : *names) {
    // lifespan is the hw_counters refresh period in ms, a setting, not a counter.
    if (name == "lifespan") continue;
    const auto value = opened->ReadUnsigned(name);
    if (value) {
      counters.emplace_back(name, *value);
    } else if (log::Enabled(log::Level::kDebug)) {
      log::Debug("counter file unreadable, series omitted",
                 {{"path", (dir / name).string()}, {"reason", value.error().Reason()}});
    }
  }
  return counters;
}

bool IsZeroGid(std::string_view gid) {
  for (const char c : gid) {
    if (c != '0' && c != ':') return false;
  }
  return true;
}

std::vector<RdmaGid> ReadGids(const fs::path& port_dir) {
  std::vector<RdmaGid> gids;
  const fs::path gid_dir = port_dir / "gids";
  for (const std::string& entry : sysfs::ListDirectory(gid_dir)) {
    const auto index = sysfs::ParseUnsigned(entry);
    if (!index || *index > UINT32_MAX) continue;
    const auto gid = sysfs::ReadAttribute(gid_dir / entry);
    if (!gid || IsZeroGid(*gid)) continue;
    gids.push_back({
        .index = static_cast<uint32_t>(*index),
        .gid = *gid,
        .type = AttributeOrEmpty(port_dir / "gid_attrs" / "types" / entry),
        .netdev = AttributeOrEmpty(port_dir / "gid_attrs" / "ndevs" / entry),
    });
  }
  std::sort(gids.begin(), gids.end(),
            [](const RdmaGid& a, const RdmaGid& b) { return a.index < b.index; });
  return gids;
}

RdmaPort ReadPort(const fs::path& port_dir, uint32_t number) {
  RdmaPort port{.number = number};
  if (const auto text = sysfs::ReadAttribute(port_dir / "state")) {
    if (const auto parsed = ParseNumberedState(*text)) {
      port.state = parsed->first;
      port.state_name = parsed->second;
    }
  }
  if (const auto text = sysfs::ReadAttribute(port_dir / "phys_state")) {
    if (const auto parsed = ParseNumberedState(*text)) {
      port.phys_state = parsed->first;
      port.phys_state_name = parsed->second;
    }
  }
  port.link_layer = AttributeOrEmpty(port_dir / "link_layer");
  if (const auto text = sysfs::ReadAttribute(port_dir / "rate")) {
    port.rate_bytes_per_second = ParseRateBytesPerSecond(*text);
    port.data_rate_bytes_per_second = DataRateBytesPerSecond(*text, port.link_layer);
  }
  port.counters = ReadCounterDir(port_dir / "counters");
  MergeLegacyExtendedCounters(port, ReadCounterDir(port_dir / "counters_ext"));
  port.hw_counters = ReadCounterDir(port_dir / "hw_counters");
  port.gids = ReadGids(port_dir);
  return port;
}

// bnxt_re's live object counts and their high-water marks (bnxt_re/hw_counters.c,
// bnxt_re_stat_descs: BNXT_RE_ACTIVE_* and BNXT_RE_WATERMARK_*, filled from the driver's
// atomic object counters in bnxt_re_ib_get_hw_stats), and db_fifo_register, a doorbell FIFO
// register read as it stands (readl), 6.5+.
constexpr std::array<std::string_view, 19> kBnxtReGauges{
    "active_pds",    "active_ahs",    "active_qps",       "active_rc_qps",    "active_ud_qps",
    "active_srqs",   "active_cqs",    "active_mrs",       "active_mws",       "watermark_pds",
    "watermark_ahs", "watermark_qps", "watermark_rc_qps", "watermark_ud_qps", "watermark_srqs",
    "watermark_cqs", "watermark_mrs", "watermark_mws",    "db_fifo_register"};

// mana_ib's port statistics (hw/mana/counters.c, mana_ib_port_stats_desc) from the
// firmware's query: current_rate is the congestion control's current sending rate and
// num_qps_congested the QPs congested now, both current values; the other names count events.
constexpr std::array<std::string_view, 2> kManaGauges{"current_rate", "num_qps_congested"};

struct DriverGauges {
  std::string_view driver;
  std::span<const std::string_view> names;
};

// The driver of the RDMA device's parent (`device/driver`), which is not always the RDMA
// driver: bnxt_re binds an auxiliary device since Linux 6.3 ("bnxt_re.rdma") but its ib_device
// hangs off bnxt_en's PCI function (bnxt_re_register_ib: dev.parent = &en_dev->pdev->dev);
// mana_ib binds the auxiliary "mana.rdma" yet parents its ib_device on the PCI function too
// (mana_ib_probe: dev.parent = gc->dev, the mana PCI driver's device), so its link names "mana"
// (vendor matrix, docs/vendor-matrix.md: the mana_ib.rdma key never matched).
constexpr std::array<DriverGauges, 3> kDriverGauges{{
    {"bnxt_re.rdma", kBnxtReGauges},
    {"bnxt_en", kBnxtReGauges},
    {"mana", kManaGauges},
}};

struct CounterWidth {
  std::string_view file;
  unsigned bits;
};

// core/sysfs.c PORT_PMA_ATTR(name, counter, width, offset) of IB_PMA_PORT_COUNTERS.
constexpr std::array<CounterWidth, 17> kPortCounterWidths{{
    {"symbol_error", 16},
    {"link_error_recovery", 8},
    {"link_downed", 8},
    {"port_rcv_errors", 16},
    {"port_rcv_remote_physical_errors", 16},
    {"port_rcv_switch_relay_errors", 16},
    {"port_xmit_discards", 16},
    {"port_xmit_constraint_errors", 8},
    {"port_rcv_constraint_errors", 8},
    {"local_link_integrity_errors", 4},
    {"excessive_buffer_overrun_errors", 4},
    {"VL15_dropped", 16},
    {"port_xmit_data", 32},
    {"port_rcv_data", 32},
    {"port_xmit_packets", 32},
    {"port_rcv_packets", 32},
    {"port_xmit_wait", 32},
}};

}  // namespace

bool IsHwCounterGauge(std::string_view driver, std::string_view counter) {
  for (const DriverGauges& entry : kDriverGauges) {
    if (entry.driver != driver) continue;
    return std::ranges::find(entry.names, counter) != entry.names.end();
  }
  return false;
}

std::optional<unsigned> PortCounterWidth(std::string_view file) {
  for (const CounterWidth& entry : kPortCounterWidths) {
    if (entry.file == file) return entry.bits;
  }
  return std::nullopt;
}

bool PortIsUp(const RdmaPort& port) {
  const bool active = port.state && (*port.state == 4 || *port.state == 5);
  const bool link_up = !port.phys_state || *port.phys_state == 5;
  return active && link_up;
}

std::optional<std::pair<uint32_t, std::string>> ParseNumberedState(std::string_view text) {
  text = sysfs::Trim(text);
  const auto colon = text.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  const auto number = sysfs::ParseUnsigned(text.substr(0, colon));
  if (!number || *number > UINT32_MAX) return std::nullopt;
  return std::make_pair(static_cast<uint32_t>(*number),
                        std::string(sysfs::Trim(text.substr(colon + 1))));
}

std::optional<double> ParseRateBytesPerSecond(std::string_view text) {
  text = sysfs::Trim(text);
  const auto space = text.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  // ParseDouble refuses "nan" and "inf": from_chars took them (a NaN or infinite rate).
  const auto parsed = sysfs::ParseDouble(text.substr(0, space));
  if (!parsed || *parsed < 0) return std::nullopt;
  const double gbits = *parsed;
  const std::string_view unit = text.substr(space + 1);
  if (unit.starts_with("GB/sec") && gbits == 0) return 0.0;
  if (!unit.starts_with("Gb/sec")) return std::nullopt;
  return gbits * 1e9 / 8;
}

std::optional<double> DataRateBytesPerSecond(std::string_view text, std::string_view link_layer) {
  const auto signalling = ParseRateBytesPerSecond(text);
  if (!signalling || link_layer != "InfiniBand") return signalling;
  // "40 Gb/sec (4X QDR)": the speed is the last word inside the parentheses.
  const auto open = text.find('(');
  const auto close = text.find(')', open);
  if (open == std::string_view::npos || close == std::string_view::npos) return signalling;
  const std::string_view inside = text.substr(open + 1, close - open - 1);
  const std::string_view speed = inside.substr(inside.rfind(' ') + 1);
  if (speed == "SDR" || speed == "DDR" || speed == "QDR") return *signalling * 8 / 10;
  if (speed == "FDR") return *signalling * (14.0625 * 64 / 66) / 14;
  return signalling;
}

void MergeLegacyExtendedCounters(RdmaPort& port,
                                 const std::vector<std::pair<std::string, uint64_t>>& ext) {
  // counters_ext/ file -> the counters/ name the same PortCountersExtended field has since 4.5
  // (core/sysfs.c pma_group_ext); the names node_exporter's procfs reads as "legacy".
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 8> kTwins{{
      {"port_xmit_data_64", "port_xmit_data"},
      {"port_rcv_data_64", "port_rcv_data"},
      {"port_xmit_packets_64", "port_xmit_packets"},
      {"port_rcv_packets_64", "port_rcv_packets"},
      {"port_unicast_xmit_packets", "unicast_xmit_packets"},
      {"port_unicast_rcv_packets", "unicast_rcv_packets"},
      {"port_multicast_xmit_packets", "multicast_xmit_packets"},
      {"port_multicast_rcv_packets", "multicast_rcv_packets"},
  }};
  for (const auto& [file, value] : ext) {
    const auto twin =
        std::ranges::find(kTwins, file, &std::pair<std::string_view, std::string_view>::first);
    if (twin == kTwins.end()) continue;
    const std::string name(twin->second);
    const auto it =
        std::ranges::find(port.counters, name, &std::pair<std::string, uint64_t>::first);
    if (it != port.counters.end()) {
      // Both count the same traffic since the port's last reset, so the 64-bit twin is never
      // behind the 32-bit one unless it is stale (an old driver's counters_ext not refreshed):
      // the larger of the two, so that a stale set never hides real traffic (issue 26 item 14).
      // The max of two monotonic counts stays monotonic.
      if (it->second > value) continue;  // the 32-bit counter, flagged when saturated
      it->second = value;
    } else {
      port.counters.emplace_back(name, value);
    }
    port.counters_64bit.push_back(name);
  }
  std::ranges::sort(port.counters);
}

std::vector<RdmaDevice> ReadRdmaDevices(const fs::path& sysfs, const NameFilter& devices) {
  std::vector<RdmaDevice> out;
  const fs::path class_dir = sysfs / "class" / "infiniband";
  // Absent: no RDMA device (no data). Present but unreadable (EACCES, EMFILE...): a failure with
  // its reason, never "no RDMA device on this host".
  const auto names = sysfs::ListDirectoryChecked(class_dir);
  if (!names) {
    throw std::runtime_error("cannot list " + class_dir.string() + ": " +
                             std::strerror(names.error()));
  }
  for (const std::string& name : *names) {
    if (!devices.Allows(name)) continue;
    const fs::path dir = class_dir / name;
    RdmaDevice device{.name = name};
    if (const auto text = sysfs::ReadAttribute(dir / "node_type")) {
      // "1: CA"; keep the name, or the raw text if the format is unexpected.
      const auto parsed = ParseNumberedState(*text);
      device.node_type = parsed ? parsed->second : *text;
    }
    device.fw_ver = AttributeOrEmpty(dir / "fw_ver");
    device.board_id = AttributeOrEmpty(dir / "board_id");
    device.hca_type = AttributeOrEmpty(dir / "hca_type");
    device.node_guid = AttributeOrEmpty(dir / "node_guid");
    device.numa_node = sysfs::ReadSigned(dir / "device" / "numa_node");
    device.driver = sysfs::ReadLinkBasename(dir / "device" / "driver").value_or("");
    device.hw_counters = ReadCounterDir(dir / "hw_counters");
    for (const std::string& entry : sysfs::ListDirectory(dir / "ports")) {
      const auto number = sysfs::ParseUnsigned(entry);
      if (!number || *number > UINT32_MAX) continue;
      device.ports.push_back(ReadPort(dir / "ports" / entry, static_cast<uint32_t>(*number)));
    }
    std::sort(device.ports.begin(), device.ports.end(),
              [](const RdmaPort& a, const RdmaPort& b) { return a.number < b.number; });
    // A device removed while we read it (hot unplug, driver unbind, a VF destroyed, a rename)
    // left the rest of its reads missing and its identity labels empty: that snapshot would
    // name a device that is gone, with an info series of empty labels. Dropped; its series are
    // missing from this scrape, as they are from the next.
    if (!sysfs::PathExists(dir)) {
      log::Debug("RDMA device vanished while read", {{"device", name}});
      continue;
    }
    out.push_back(std::move(device));
  }
  return out;
}

}  // namespace rdmascope
