// Links, issue 40: the pre-FEC bit error ratio over the window, uncorrectable FEC codewords and
// links that trained below the speed both ends advertise. The thresholds are the alert rules'
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

std::string ShowFec(const std::string& netdev) {
  return FixLine({"ethtool -I --show-fec ", HostValue(netdev)});
}

}  // namespace

std::vector<Finding> CheckFecPreBer(const Snapshot& now, const Snapshot* before,
                                    const DoctorOptions&) {
  const std::string id = "links.fec_pre_ber";
  std::vector<Finding> findings;
  for (const Sample* bits : now.Find("rdma_link_fec_corrected_bits_total")) {
    const auto threshold = WarningThreshold(now, *bits);
    if (!threshold) continue;  // not an RS-FEC PAM4 link: the BER is not judged
    if (before == nullptr) {
      findings.push_back(Skip(id, kArea, FecScope(*bits), "rdmalinkprefecberhigh", kNeedsWindow));
      continue;
    }
    const auto rate = Rate(now, *before, "rdma_link_fec_corrected_bits_total", *bits);
    const auto line = now.Value("rdma_link_line_rate_bits_per_second", PortKey(*bits));
    if (!rate || !line || *line <= 0) {
      findings.push_back(Skip(id, kArea, FecScope(*bits), "rdmalinkprefecberhigh",
                              "the corrected-bit counter reset during the window (a link-up)"));
      continue;
    }
    const double ber = *rate / *line;
    const bool critical = ber >= *threshold * kCriticalFactor;
    Finding finding =
        Make(id, kArea,
             critical            ? Severity::kCrit
             : ber >= *threshold ? Severity::kWarn
                                 : Severity::kOk,
             FecScope(*bits), critical ? "rdmalinkprefecbercritical" : "rdmalinkprefecberhigh");
    finding.observed = "pre-FEC BER " + Sci(ber) + " over " +
                       Num(now.seconds() - before->seconds()) + " s (" + Num(*rate) +
                       " corrected bits/s at a line rate of " + Num(*line / 1e9) + " Gb/s)";
    finding.expected = "under " + Sci(*threshold) + " (critical at " +
                       Sci(*threshold * kCriticalFactor) + "; RS-FEC on PAM4 lanes" +
                       (*threshold < kWarningBer ? ", over copper" : "") + ")";
    if (finding.severity != Severity::kOk) {
      finding.advice = "FEC corrects " + Sci(ber) + " of the bits on " + bits->Label("netdev") +
                       ": clean the fiber ends and the optic, reseat or replace the optic or "
                       "cable, and check the far end's optic and FEC counters; per lane: "
                       "rdma_link_fec_lane_corrected_bits_total";
      finding.fix = ShowFec(bits->Label("netdev"));
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

std::vector<Finding> CheckLinkSpeed(const Snapshot& now, const Snapshot*, const DoctorOptions&) {
  const std::string id = "links.speed_degraded";
  std::vector<Finding> findings;
  for (const Sample* speed : now.Find("rdma_link_speed_bits_per_second")) {
    const auto common = now.Value("rdma_link_common_max_speed_bits_per_second", PortKey(*speed));
    const auto max = now.Value("rdma_link_max_speed_bits_per_second", PortKey(*speed));
    if (!common) {
      if (max) {
        findings.push_back(Skip(id, kArea, FecScope(*speed), "rdmalinkspeeddegraded",
                                "no link partner modes (autonegotiation off or not reported): " +
                                    Num(speed->value / 1e9) + " Gb/s in a port of up to " +
                                    Num(*max / 1e9) + " Gb/s, not judged"));
      }
      continue;
    }
    const bool degraded = speed->value < *common;
    Finding finding = Make(id, kArea, degraded ? Severity::kWarn : Severity::kOk, FecScope(*speed),
                           "rdmalinkspeeddegraded");
    finding.observed = Num(speed->value / 1e9) + " Gb/s";
    finding.expected = Num(*common / 1e9) + " Gb/s (the fastest mode both ends advertise)";
    if (degraded) {
      finding.advice = speed->Label("netdev") +
                       " trained below what both ends advertise: a failing lane, optic or "
                       "cable; reseat or replace it, then restart autonegotiation";
      finding.fix = FixLine({"ethtool -r ", HostValue(speed->Label("netdev"))});
    }
    findings.push_back(std::move(finding));
  }
  return findings;
}

}  // namespace rdmascope::doctor
