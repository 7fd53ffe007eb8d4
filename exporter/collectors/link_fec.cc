// rdma_link_fec_* and the link-mode series (docs/metrics.md, "Link FEC and speed").
#include "collectors/link_fec.h"

#include <cerrno>
#include <memory>
#include <optional>
#include <utility>

#include "core/capture.h"
#include "core/log.h"
#include "sys/ethtool_netlink.h"
#include "sys/netlink_capture.h"

namespace rdmascope {
namespace {

using prometheus::MetricType;

constexpr MetricDesc kFecInfo{
    "rdma_link_fec_info",
    "The active FEC mode (ETHTOOL_A_FEC_ACTIVE: off, rs, baser, llrs; none while the driver "
    "names none) and whether FEC is chosen automatically (auto 1/0).",
    MetricType::Gauge};
constexpr MetricDesc kCorrected{"rdma_link_fec_corrected_codewords_total",
                                "FEC codewords (blocks) received with errors that FEC corrected.",
                                MetricType::Counter};
constexpr MetricDesc kUncorrectable{
    "rdma_link_fec_uncorrectable_codewords_total",
    "FEC codewords received with more errors than FEC corrects: frames lost.", MetricType::Counter};
constexpr MetricDesc kCorrectedBits{"rdma_link_fec_corrected_bits_total",
                                    "Bits FEC corrected (the numerator of the pre-FEC BER).",
                                    MetricType::Counter};
constexpr MetricDesc kLaneCorrected{"rdma_link_fec_lane_corrected_codewords_total",
                                    "Corrected FEC codewords per FEC lane (0.. as ethtool).",
                                    MetricType::Counter};
constexpr MetricDesc kLaneUncorrectable{"rdma_link_fec_lane_uncorrectable_codewords_total",
                                        "Uncorrectable FEC codewords per FEC lane.",
                                        MetricType::Counter};
constexpr MetricDesc kLaneCorrectedBits{"rdma_link_fec_lane_corrected_bits_total",
                                        "Bits FEC corrected per FEC lane.", MetricType::Counter};
constexpr MetricDesc kHistogram{
    "rdma_link_fec_histogram_codewords_total",
    "Codewords received with bin_low..bin_high symbol errors (inclusive; IEEE 802.3ck/df FEC "
    "histogram, Linux 6.18).",
    MetricType::Counter};
constexpr MetricDesc kLaneHistogram{"rdma_link_fec_lane_histogram_codewords_total",
                                    "The FEC histogram per FEC lane.", MetricType::Counter};
constexpr MetricDesc kBinLow{
    "rdma_link_fec_histogram_bin_low_symbol_errors",
    "The low bound of each histogram bin, as a value (rdma:link_fec_tail_symbol_errors).",
    MetricType::Gauge};
constexpr MetricDesc kSpeed{"rdma_link_speed_bits_per_second",
                            "The link's active speed (ETHTOOL_A_LINKMODES_SPEED); absent while "
                            "the link is down.",
                            MetricType::Gauge};
constexpr MetricDesc kLanes{"rdma_link_lanes",
                            "Lanes the active link uses (the driver's, else the one lane "
                            "count of the advertised modes of the active speed).",
                            MetricType::Gauge};
constexpr MetricDesc kLineRate{"rdma_link_line_rate_bits_per_second",
                               "Bits per second on the wire: lanes x the lanes' signalling rate "
                               "(25.78125 G NRZ, 53.125 G PAM4, 106.25 G PAM4, 212.5 G PAM4); "
                               "the denominator of the pre-FEC BER.",
                               MetricType::Gauge};
constexpr MetricDesc kMaxSpeed{"rdma_link_max_speed_bits_per_second",
                               "The highest speed of the port's supported link modes.",
                               MetricType::Gauge};
constexpr MetricDesc kCommonMaxSpeed{
    "rdma_link_common_max_speed_bits_per_second",
    "The highest speed both ends advertise (ours and the link partner's modes); absent "
    "without autonegotiation's partner modes.",
    MetricType::Gauge};

// Parses a whole dump's bytes: a dump cut before NLMSG_DONE (a recording that ended) is
// EAGAIN, as a receive timeout is.
template <typename Reading, typename Parse>
std::expected<std::vector<Reading>, int> ParseWhole(const std::string& bytes, Parse parse) {
  std::vector<Reading> readings;
  const int ret = parse(bytes.data(), bytes.size(), readings);
  if (ret < 0) return std::unexpected(-ret);
  if (ret > 0) return std::unexpected(EAGAIN);
  return readings;
}

void AddCounter(const MetricDesc& total, const MetricDesc& lane, const std::vector<Label>& key,
                const sys::FecCounter& counter, MetricSet& out) {
  if (!counter.total) return;  // not reported by the driver: no series, never 0
  out.Add(total, key, static_cast<double>(*counter.total));
  for (size_t i = 0; i < counter.lanes.size(); ++i) {
    const std::string name = std::to_string(i);
    std::vector<Label> labels = key;
    labels.emplace_back("lane", name);
    out.Add(lane, labels, static_cast<double>(counter.lanes[i]));
  }
}

void MapFec(const std::vector<Label>& key, const std::vector<Label>& source_key,
            const sys::FecReading& r, MetricSet& out) {
  const std::string auto_value = r.fec_auto ? (*r.fec_auto ? "1" : "0") : "";
  std::vector<Label> info = key;
  info.emplace_back("mode", sys::FecModeName(r.active_link_mode));
  info.emplace_back("auto", auto_value);
  out.Add(kFecInfo, info, 1);
  AddCounter(kCorrected, kLaneCorrected, source_key, r.corrected, out);
  AddCounter(kUncorrectable, kLaneUncorrectable, source_key, r.uncorrectable, out);
  AddCounter(kCorrectedBits, kLaneCorrectedBits, source_key, r.corrected_bits, out);
  for (const sys::FecHistogramBin& bin : r.histogram) {
    const std::string low = std::to_string(bin.low), high = std::to_string(bin.high);
    std::vector<Label> labels = source_key;
    labels.emplace_back("bin_low", low);
    labels.emplace_back("bin_high", high);
    out.Add(kHistogram, labels, static_cast<double>(bin.codewords));
    std::vector<Label> bounds = key;
    bounds.emplace_back("bin_low", low);
    bounds.emplace_back("bin_high", high);
    out.Add(kBinLow, bounds, bin.low);
    for (size_t i = 0; i < bin.lanes.size(); ++i) {
      const std::string lane = std::to_string(i);
      std::vector<Label> per_lane = labels;
      per_lane.emplace_back("lane", lane);
      out.Add(kLaneHistogram, per_lane, static_cast<double>(bin.lanes[i]));
    }
  }
}

void MapModes(const std::vector<Label>& key, const sys::LinkModesReading& m, MetricSet& out) {
  if (m.speed_mbps) out.Add(kSpeed, key, *m.speed_mbps * 1e6);
  if (const auto lanes = sys::ActiveLanes(m)) out.Add(kLanes, key, *lanes);
  if (const auto rate = sys::LineRateBitsPerSecond(m)) out.Add(kLineRate, key, *rate);
  if (const auto max = sys::MaxSupportedSpeedMbps(m)) out.Add(kMaxSpeed, key, *max * 1e6);
  if (const auto common = sys::CommonMaxSpeedMbps(m)) out.Add(kCommonMaxSpeed, key, *common * 1e6);
}

void AddAvailable(const MetricDesc& desc, const std::vector<Label>& key, std::string_view source,
                  bool available, MetricSet& out) {
  std::vector<Label> labels = key;
  labels.emplace_back("source", source);
  out.Add(desc, labels, available ? 1 : 0);
}

}  // namespace

LinkEthtoolRead SystemLinkEthtoolRead() {
  // Shared by the function's copies; used by one pass at a time (LinkCollector's lock).
  auto netlink = std::make_shared<std::optional<sys::EthtoolNetlink>>();
  return [netlink]() -> LinkEthtoolDumps {
    if (!netlink->has_value()) {
      auto opened = sys::EthtoolNetlink::Open();
      if (!opened) {
        // Recorded as each dump's errno, so that a replay says why as the host did.
        for (const auto build : {&sys::BuildFecDumpRequest, &sys::BuildLinkModesDumpRequest}) {
          std::vector<char> request;
          const size_t len = build(0, 0, request);
          sys::NetlinkRecording(sys::NetlinkFamily::kEthtool, request.data(), len)
              .Finish(opened.error());
        }
        return {std::unexpected(opened.error()), std::unexpected(opened.error())};
      }
      netlink->emplace(std::move(*opened));
    }
    LinkEthtoolDumps dumps{std::unexpected(0), std::unexpected(0)};
    const auto fec = (*netlink)->Dump(&sys::BuildFecDumpRequest);
    dumps.fec =
        fec ? ParseWhole<sys::FecReading>(*fec, sys::ParseFecDump) : std::unexpected(fec.error());
    const auto modes = (*netlink)->Dump(&sys::BuildLinkModesDumpRequest);
    dumps.modes = modes ? ParseWhole<sys::LinkModesReading>(*modes, sys::ParseLinkModesDump)
                        : std::unexpected(modes.error());
    return dumps;
  };
}

std::string FecAtEvent(const LinkFecSnapshot& fec, const std::string& netdev) {
  const auto it = fec.fec.find(netdev);
  if (it == fec.fec.end() || !it->second.has_stats) return "";
  std::string out;
  for (const auto& [name, counter] :
       {std::pair<const char*, const sys::FecCounter&>{"corrected", it->second.corrected},
        {"uncorrectable", it->second.uncorrectable},
        {"corrected bits", it->second.corrected_bits}}) {
    if (!counter.total) continue;
    out += (out.empty() ? "" : ", ") + std::string(name) + " " + std::to_string(*counter.total);
  }
  return out;
}

LinkFecSnapshot MakeLinkFecSnapshot(LinkEthtoolDumps dumps) {
  LinkFecSnapshot snapshot{.read = true};
  if (dumps.fec) {
    for (sys::FecReading& r : *dumps.fec) snapshot.fec[r.ifname] = std::move(r);
  } else {
    snapshot.fec_error = dumps.fec.error();
  }
  if (dumps.modes) {
    for (sys::LinkModesReading& m : *dumps.modes) snapshot.modes[m.ifname] = std::move(m);
  } else {
    snapshot.modes_error = dumps.modes.error();
  }
  return snapshot;
}

void MapLinkFec(const std::vector<Label>& key, const LinkPort& port, const LinkFecSnapshot& fec,
                const MetricDesc& available, MetricSet& out) {
  if (!fec.read) return;
  const bool readable = !port.netdev.empty() && !port.native_ib && !port.over_limit;
  const auto r = readable ? fec.fec.find(port.netdev) : fec.fec.end();
  const auto m = readable ? fec.modes.find(port.netdev) : fec.modes.end();
  const bool has_fec = r != fec.fec.end();
  // "fec": the driver reports FEC statistics (in the dump, with at least one counter).
  const bool counters = has_fec && r->second.has_stats &&
                        (r->second.corrected.total || r->second.uncorrectable.total ||
                         r->second.corrected_bits.total);
  AddAvailable(available, key, "fec", counters, out);
  AddAvailable(available, key, "fec_hist", has_fec && !r->second.histogram.empty(), out);
  AddAvailable(available, key, "linkmodes", m != fec.modes.end(), out);
  if (has_fec) {
    std::vector<Label> source_key = key;
    source_key.emplace_back("source", "netlink");
    MapFec(key, source_key, r->second, out);
  }
  if (m != fec.modes.end()) MapModes(key, m->second, out);
}

}  // namespace rdmascope
