// InfiniBand links (issue 40 items 2 and 5): the post-FEC symbol BER over doctor's window
// against UFM's validation figure (1e-14, docs/runbook.md RdmaIbSymbolBerHigh), and each port's
// trained width and lane speed against the host's other InfiniBand ports of the same board
// (rdma_device_info board_id): sysfs has no supported width, and the rules compare a port with
// its own past instead (docs/link-health.md "Degraded InfiniBand links").
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>

#include "doctor/check_util.h"
#include "doctor/checks_link_health.h"

namespace rdmascope::doctor {
namespace {

constexpr const char* kArea = "links";

Matchers PortKey(const Sample& series) {
  return {{"device", series.Label("device")}, {"port", series.Label("port")}};
}

std::string Fix(const Sample& port) {
  // mlxlink takes the RDMA device name; -c prints the port's counters and BER.
  return FixLine({"mlxlink -d ", HostValue(port.Label("device")), " -p ",
                  HostValue(port.Label("port")), " -c"});
}

std::string Sci(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2e", value);
  return buffer;
}

// The board a device is (rdma_device_info board_id: one model of HCA), else the device itself.
std::string Board(const Snapshot& now, const std::string& device) {
  for (const Sample* info : now.Find("rdma_device_info", {{"device", device}})) {
    if (!info->Label("board_id").empty()) return info->Label("board_id");
  }
  return device;
}

}  // namespace

std::vector<Finding> CheckIbSymbolBer(const Snapshot& now, const Snapshot* before,
                                      const DoctorOptions&) {
  std::vector<Finding> findings;
  for (const Sample* lane : now.Find("rdma_link_ib_lane_rate_bits_per_second")) {
    const Scope scope = PortScope(*lane);
    if (lane->value < kPostFecLaneBitsPerSecond) {
      findings.push_back(Skip("links.ib_symbol_ber", kArea, scope, "rdmaibsymbolberhigh",
                              "slower than HDR: symbol_error counts raw line errors "
                              "(links.symbol_errors)"));
      continue;
    }
    if (before == nullptr) {
      findings.push_back(
          Skip("links.ib_symbol_ber", kArea, scope, "rdmaibsymbolberhigh", kNeedsWindow));
      continue;
    }
    const auto errors = now.Value("rdma_port_symbol_errors_total", PortKey(*lane));
    const auto errors_before = before->Value("rdma_port_symbol_errors_total", PortKey(*lane));
    const auto rate = now.Value("rdma_port_rate_bytes_per_second", PortKey(*lane));
    const double seconds = now.seconds() - before->seconds();
    if (!errors || !errors_before || !rate || *rate <= 0 || seconds <= 0 ||
        *errors < *errors_before) {
      findings.push_back(Skip("links.ib_symbol_ber", kArea, scope, "rdmaibsymbolberhigh",
                              "no symbol_error or rate in both collections (or the counters "
                              "were reset)"));
      continue;
    }
    const double increase = *errors - *errors_before;
    Matchers saturated = PortKey(*lane);
    saturated.emplace_back("counter", "symbol_error");
    if (increase == 0 && now.Value("rdma_port_stat_saturated", saturated) == 1.0) {
      findings.push_back(Skip("links.ib_symbol_ber", kArea, scope, "rdmaportcountersaturated",
                              "symbol_error is saturated: it no longer counts (clear it with "
                              "perfquery -R)"));
      continue;
    }
    const double ber = increase / (seconds * *rate * 8);
    const bool high = ber >= kPostFecBerThreshold;
    Finding finding = Make("links.ib_symbol_ber", kArea, high ? Severity::kWarn : Severity::kOk,
                           scope, "rdmaibsymbolberhigh");
    finding.observed = Num(increase) + " symbol errors after FEC in " + Num(seconds) + " s at " +
                       Num(*rate * 8 / 1e9) + " Gb/s: post-FEC BER " + Sci(ber);
    finding.expected = "below " + Sci(kPostFecBerThreshold) +
                       " (UFM's validation: 2.88 errors in 12 minutes at NDR 4X)";
    if (high) {
      finding.advice =
          "BER " + Sci(ber) + " is " + Num(std::round(ber / kPostFecBerThreshold * 10) / 10) +
          "x UFM's figure; errors FEC did not correct: packets are lost and retransmitted" +
          std::string(seconds < 720 ? " (a window under 12 minutes: one error reads as a high "
                                      "BER; confirm with --window 12m or perfquery twice)"
                                    : "") +
          "; reseat or replace the cable or transceiver, check the far end (ibqueryerrors)";
      finding.fix = Fix(*lane);
    }
    findings.push_back(std::move(finding));
  }
  return findings;
}

std::vector<Finding> CheckIbLinkDegraded(const Snapshot& now, const Snapshot*,
                                         const DoctorOptions&) {
  // The widest width and fastest lane among each board's ports that are up.
  struct Best {
    double width = 0;
    double lane = 0;
    std::string widest;  // "mlx5_2/1"
    std::string fastest;
  };
  std::map<std::string, Best> best;
  const auto widths = now.Find("rdma_link_ib_width_lanes");
  for (const Sample* width : widths) {
    const auto lane = now.Value("rdma_link_ib_lane_rate_bits_per_second", PortKey(*width));
    Best& b = best[Board(now, width->Label("device"))];
    const std::string name = width->Label("device") + "/" + width->Label("port");
    if (width->value > b.width) b = {width->value, b.lane, name, b.fastest};
    if (lane && *lane > b.lane) b = {b.width, *lane, b.widest, name};
  }
  std::vector<Finding> findings;
  for (const Sample* width : widths) {
    const auto lane = now.Value("rdma_link_ib_lane_rate_bits_per_second", PortKey(*width));
    const std::string board = Board(now, width->Label("device"));
    const Best& b = best[board];
    const bool narrow = width->value < b.width;
    const bool slow = lane && *lane < b.lane;
    Finding finding = Make("links.ib_link_degraded", kArea,
                           narrow || slow ? Severity::kWarn : Severity::kOk, PortScope(*width),
                           narrow || !slow ? "rdmaiblinkwidthdegraded" : "rdmaiblinkspeeddegraded");
    finding.observed = "trained at " + Num(width->value) + "X" +
                       (lane ? ", " + Num(*lane / 1e9) + " Gb/s a lane" : std::string());
    finding.expected = Num(b.width) + "X at " + Num(b.lane / 1e9) +
                       " Gb/s a lane, as the host's best port of board " + board;
    if (narrow) finding.observed += "; " + b.widest + " runs at " + Num(b.width) + "X";
    if (slow) finding.observed += "; " + b.fastest + " at " + Num(b.lane / 1e9) + " Gb/s a lane";
    if (narrow || slow) {
      finding.advice =
          "the link carries " +
          Num(std::round(width->value * (lane ? *lane : b.lane) / (b.width * b.lane) * 100)) +
          "% of what its sibling ports of the same board do (a lane did not train, or a cable or "
          "optic that does not pass at full speed): reseat or replace the cable or transceiver, "
          "check the far end; a port cabled narrower on purpose is fine";
      finding.fix = FixLine({"mlxlink -d ", HostValue(width->Label("device")), " -p ",
                             HostValue(width->Label("port"))});
    }
    findings.push_back(std::move(finding));
  }
  return findings;
}

}  // namespace rdmascope::doctor
