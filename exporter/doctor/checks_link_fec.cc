// Links, issue 40: the pre-FEC bit error ratio over the window, uncorrectable FEC codewords and
// links that trained below the speed both ends advertise (or, without the partner's modes, below
// the port's and its module's maxima). The thresholds are the alert rules'
// (rules/rdmascope.rules.yml, group rdmascope.link-fec): RS-FEC on PAM4 lanes warns at 1e-7 and
// is critical at 1e-5, 10x stricter over copper; any uncorrectable codeword is critical.
// Sources: the link collector (collectors/link_fec.h, docs/metrics.md).
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "doctor/check_util.h"
#include "doctor/checks.h"
#include "doctor/shell_quote.h"

namespace rdmascope::doctor {
namespace {

constexpr const char* kArea = "links";
constexpr double kPam4LaneBitsPerSecond = 50e9;  // above: a PAM4 lane (53.125 Gb/s and up)
constexpr double kWarningBer = 1e-7;
constexpr double kCriticalFactor = 100;  // critical: 1e-5
constexpr double kCopperFactor = 0.1;    // a DAC: 10x stricter

Matchers PortKey(const Sample& series) {
  return {{"device", series.Label("device")},
          {"port", series.Label("port")},
          {"netdev", series.Label("netdev")}};
}

Scope FecScope(const Sample& series) {
  Scope scope;
  if (!series.Label("device").empty()) scope = PortScope(series);
  scope.emplace_back("netdev", series.Label("netdev"));
  return scope;
}

std::string Sci(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2g", value);
  return buffer;
}

// The warning threshold of the port's pre-FEC BER; none for links the rules do not judge
// (not RS-FEC, NRZ lanes, no line rate).
std::optional<double> WarningThreshold(const Snapshot& now, const Sample& series) {
  const Matchers key = PortKey(series);
  const auto rate = now.Value("rdma_link_line_rate_bits_per_second", key);
  const auto lanes = now.Value("rdma_link_lanes", key);
  if (!rate || !lanes || *lanes <= 0 || *rate / *lanes <= kPam4LaneBitsPerSecond) {
    return std::nullopt;
  }
  Matchers rs = key;
  rs.emplace_back("mode", "rs");
  if (now.Find("rdma_link_fec_info", rs).empty()) return std::nullopt;
  for (const Sample* module : now.Find("rdma_link_module_info", key)) {
    if (module->Label("media").find("copper") != std::string::npos) {
      return kWarningBer * kCopperFactor;
    }
  }
  return kWarningBer;
}

// Where a port's corrected bits come from, as rdma:link_fec_pre_ber:rate12m takes them
// (rules/rdmascope.rules.yml): FEC_GET's corrected bits; else the driver's `ethtool -S` bits
// (mlx5 rx_corrected_bits_phy, bnxt_en rx_corrected_bits); else corrected codewords (FEC_GET's,
// else bnxt_en's rx_fec_corrected_blocks) x 75 bits, FBOSS's estimate for RS(544,514), t = 15
// (fboss/lib/phy/PhyUtils.cpp): the only code judged here (RS on PAM4 lanes).
constexpr double kEstimatedBitsPerCodeword = 15 * 10 / 2.0;

struct CorrectedBits {
  std::string name;  // the counter's series name
  const Sample* series;
  double bits_each;  // bits per count: 1, or the estimate per codeword
  std::string what;  // "corrected-bit", "corrected-codeword"
  std::string note;  // said in `observed` after the rate
};

std::optional<CorrectedBits> CorrectedBitsOf(const Snapshot& now, const Sample& line) {
  const Matchers key = PortKey(line);
  const std::string netdev = line.Label("netdev");
  const auto vendor = [&](const char* stat) -> const Sample* {
    if (netdev.empty()) return nullptr;
    const auto found = now.Find("rdma_ethtool_stat", {{"device", netdev}, {"stat", stat}});
    return found.empty() ? nullptr : found.front();
  };
  if (const auto bits = now.Find("rdma_link_fec_corrected_bits_total", key); !bits.empty()) {
    return CorrectedBits{"rdma_link_fec_corrected_bits_total", bits.front(), 1, "corrected-bit",
                         ""};
  }
  for (const char* stat : {"rx_corrected_bits_phy", "rx_corrected_bits"}) {
    if (const Sample* bits = vendor(stat)) {
      return CorrectedBits{"rdma_ethtool_stat", bits, 1, "corrected-bit",
                           std::string(", the driver's ") + stat};
    }
  }
  const std::string estimate =
      ", estimated from corrected codewords x 75 bits: between a 75th of it and twice it";
  if (const auto words = now.Find("rdma_link_fec_corrected_codewords_total", key); !words.empty()) {
    return CorrectedBits{"rdma_link_fec_corrected_codewords_total", words.front(),
                         kEstimatedBitsPerCodeword, "corrected-codeword", estimate};
  }
  if (const Sample* words = vendor("rx_fec_corrected_blocks")) {
    return CorrectedBits{"rdma_ethtool_stat", words, kEstimatedBitsPerCodeword,
                         "corrected-codeword", estimate};
  }
  return std::nullopt;
}

std::string ShowFec(const std::string& netdev) {
  return FixLine({"ethtool -I --show-fec ", HostValue(netdev)});
}

}  // namespace

std::vector<Finding> CheckFecPreBer(const Snapshot& now, const Snapshot* before,
                                    const DoctorOptions&) {
  const std::string id = "links.fec_pre_ber";
  std::vector<Finding> findings;
  for (const Sample* line : now.Find("rdma_link_line_rate_bits_per_second")) {
    const auto counter = CorrectedBitsOf(now, *line);
    if (!counter) continue;  // the port counts no corrected bits or codewords
    const auto threshold = WarningThreshold(now, *line);
    if (!threshold) continue;  // not an RS-FEC PAM4 link: the BER is not judged
    if (before == nullptr) {
      findings.push_back(Skip(id, kArea, FecScope(*line), "rdmalinkprefecberhigh", kNeedsWindow));
      continue;
    }
    const auto counted = Rate(now, *before, counter->name, *counter->series);
    if (!counted || line->value <= 0) {
      findings.push_back(
          Skip(id, kArea, FecScope(*line), "rdmalinkprefecberhigh",
               "the " + counter->what + " counter reset during the window (a link-up)"));
      continue;
    }
    const double rate = *counted * counter->bits_each;
    const double ber = rate / line->value;
    const bool critical = ber >= *threshold * kCriticalFactor;
    Finding finding =
        Make(id, kArea,
             critical            ? Severity::kCrit
             : ber >= *threshold ? Severity::kWarn
                                 : Severity::kOk,
             FecScope(*line), critical ? "rdmalinkprefecbercritical" : "rdmalinkprefecberhigh");
    finding.observed = "pre-FEC BER " + Sci(ber) + " over " +
                       Num(now.seconds() - before->seconds()) + " s (" + Num(rate) +
                       " corrected bits/s at a line rate of " + Num(line->value / 1e9) + " Gb/s" +
                       counter->note + ")";
    finding.expected = "under " + Sci(*threshold) + " (critical at " +
                       Sci(*threshold * kCriticalFactor) + "; RS-FEC on PAM4 lanes" +
                       (*threshold < kWarningBer ? ", over copper" : "") + ")";
    if (finding.severity != Severity::kOk) {
      finding.advice = "FEC corrects " + Sci(ber) + " of the bits on " + line->Label("netdev") +
                       ": clean the fiber ends and the optic, reseat or replace the optic or "
                       "cable, and check the far end's optic and FEC counters; per lane: "
                       "rdma:link_fec_lane_pre_ber:rate12m";
      finding.fix = ShowFec(line->Label("netdev"));
    }
    findings.push_back(std::move(finding));
  }
  return findings;
}

std::vector<Finding> CheckFecUncorrectable(const Snapshot& now, const Snapshot* before,
                                           const DoctorOptions&) {
  const std::string id = "links.fec_uncorrectable";
  std::vector<Finding> findings;
  for (const Sample* series : now.Find("rdma_link_fec_uncorrectable_codewords_total")) {
    if (before == nullptr) {
      findings.push_back(
          Skip(id, kArea, FecScope(*series), "rdmalinkfecuncorrectable", kNeedsWindow));
      continue;
    }
    const auto increase = Increase(*before, "rdma_link_fec_uncorrectable_codewords_total", *series);
    if (!increase) {
      findings.push_back(Skip(id, kArea, FecScope(*series), "rdmalinkfecuncorrectable",
                              "the counter reset during the window (a link-up)"));
      continue;
    }
    Finding finding = Make(id, kArea, *increase > 0 ? Severity::kCrit : Severity::kOk,
                           FecScope(*series), "rdmalinkfecuncorrectable");
    finding.observed = Num(*increase) + " uncorrectable FEC codewords in " +
                       Num(now.seconds() - before->seconds()) + " s";
    finding.expected = "0";
    if (*increase > 0) {
      finding.advice = "each is a lost frame on " + series->Label("netdev") +
                       ": replace the optic or cable (clean and reseat first), check the far "
                       "end's optic, port and FEC mode (rdma_link_fec_info: both ends alike)";
      finding.fix = ShowFec(series->Label("netdev"));
    }
    findings.push_back(std::move(finding));
  }
  return findings;
}

namespace {

// The reference a port's speed is compared with, as RdmaLinkSpeedDegraded takes it: the fastest
// mode both ends advertise; without the partner's modes, the lower of the port's fastest mode
// and its module's advertised maximum (sys/module_speed.h).
struct SpeedReference {
  double bits_per_second;
  std::string what;
};
std::optional<SpeedReference> ReferenceSpeed(const Snapshot& now, const Sample& speed) {
  const Matchers key = PortKey(speed);
  if (const auto common = now.Value("rdma_link_common_max_speed_bits_per_second", key)) {
    return SpeedReference{*common, "the fastest mode both ends advertise"};
  }
  const auto max = now.Value("rdma_link_max_speed_bits_per_second", key);
  const auto module = now.Value("rdma_link_module_max_speed_bits_per_second", key);
  if (!max || !module) return std::nullopt;
  return *module < *max
             ? SpeedReference{*module, "the module's advertised maximum, below the port's " +
                                           Num(*max / 1e9) + " Gb/s; no partner modes"}
             : SpeedReference{*max, "the port's fastest mode, which its module (" +
                                        Num(*module / 1e9) + " Gb/s) carries; no partner modes"};
}

}  // namespace

std::vector<Finding> CheckLinkSpeed(const Snapshot& now, const Snapshot*, const DoctorOptions&) {
  const std::string id = "links.speed_degraded";
  std::vector<Finding> findings;
  for (const Sample* speed : now.Find("rdma_link_speed_bits_per_second")) {
    const auto reference = ReferenceSpeed(now, *speed);
    if (!reference) {
      if (const auto max = now.Value("rdma_link_max_speed_bits_per_second", PortKey(*speed))) {
        findings.push_back(Skip(id, kArea, FecScope(*speed), "rdmalinkspeeddegraded",
                                "no link partner modes (autonegotiation off or not reported) "
                                "and no module advertisement decoded: " +
                                    Num(speed->value / 1e9) + " Gb/s in a port of up to " +
                                    Num(*max / 1e9) + " Gb/s, not judged"));
      }
      continue;
    }
    const bool degraded = speed->value < reference->bits_per_second;
    Finding finding = Make(id, kArea, degraded ? Severity::kWarn : Severity::kOk, FecScope(*speed),
                           "rdmalinkspeeddegraded");
    finding.observed = Num(speed->value / 1e9) + " Gb/s";
    finding.expected = Num(reference->bits_per_second / 1e9) + " Gb/s (" + reference->what + ")";
    if (degraded) {
      finding.advice = speed->Label("netdev") + " trained below " + reference->what +
                       ": a failing lane, optic or cable; reseat or replace it, then restart "
                       "autonegotiation (unless the speed was set on purpose)";
      finding.fix = FixLine({"ethtool -r ", HostValue(speed->Label("netdev"))});
    }
    findings.push_back(std::move(finding));
  }
  return findings;
}

}  // namespace rdmascope::doctor
