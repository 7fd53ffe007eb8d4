// FEC statistics of every interface in one ethtool netlink dump (issue 40): ETHTOOL_MSG_FEC_GET
// (Linux 5.6; statistics with ETHTOOL_FLAG_STATS since 5.13; the FEC histogram since 6.18),
// as net/ethtool/fec.c builds the reply:
//  - ETHTOOL_A_FEC_AUTO (u8) and ETHTOOL_A_FEC_ACTIVE (u32, a link mode bit index:
//    ETHTOOL_LINK_MODE_FEC_NONE/RS/BASER/LLRS_BIT; absent when the driver names none active);
//  - ETHTOOL_A_FEC_STATS, a nest of CORRECTED, UNCORR and CORR_BITS, each an array of u64:
//    the total first, then one per lane. fec_stats_recalc() leaves out what the driver did not
//    set (ETHTOOL_STAT_NOT_SET): an empty array is "not reported", never 0; when lanes are
//    reported the total is their sum, the driver's own total ignored. ETHTOOL_A_FEC_STAT_PAD
//    attributes may sit between them (nla_put_64bit's alignment);
//  - from 6.18, ETHTOOL_A_FEC_STAT_HIST nests in ETHTOOL_A_FEC_STATS, one per bin
//    (fec_put_hist: at most 16 bins, IEEE 802.3ck/df): BIN_LOW and BIN_HIGH (u32, symbol
//    errors per codeword, inclusive), BIN_VAL (a "uint": 4 or 8 bytes; the sum of the lanes
//    when the driver gave only lanes) and optionally BIN_VAL_PER_LANE (u64 array).
// ethtool's netlink/fec.c (fec_show_stats) reads the same layout: `--include-statistics
// --show-fec` prints the array's first value as the total and the rest as lanes 0.., and each
// histogram bin's low, high, value and lanes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rdmascope::sys {

// Linux 6.18's include/uapi/linux/ethtool_netlink_generated.h (the FEC histogram, merged as
// "ethtool: add FEC bins histogram report"; bookworm's 6.1 headers lack it). An earlier
// netdev revision numbered BIN_LOW 1 with no pad attribute: only the merged numbering is read.
inline constexpr uint16_t kEthtoolFecStatHist = 5;  // ETHTOOL_A_FEC_STAT_HIST
inline constexpr uint16_t kEthtoolFecHistPad = 1;   // ETHTOOL_A_FEC_HIST_PAD
inline constexpr uint16_t kEthtoolFecHistBinLow = 2;
inline constexpr uint16_t kEthtoolFecHistBinHigh = 3;
inline constexpr uint16_t kEthtoolFecHistBinVal = 4;
inline constexpr uint16_t kEthtoolFecHistBinValPerLane = 5;
// include/linux/ethtool.h: ETHTOOL_MAX_LANES; ETHTOOL_FEC_HIST_MAX is 17 (16 bins and the
// driver's end marker), so a reply has at most 16 bins.
inline constexpr size_t kEthtoolMaxLanes = 8;
inline constexpr size_t kEthtoolMaxFecBins = 16;

// One counter of ETHTOOL_A_FEC_STATS: none when the driver did not report it.
struct FecCounter {
  std::optional<uint64_t> total;
  std::vector<uint64_t> lanes;  // lane 0.. as ethtool numbers them; empty: totals only
  bool operator==(const FecCounter&) const = default;
};

struct FecHistogramBin {
  uint32_t low = 0;   // symbol errors per codeword, inclusive
  uint32_t high = 0;  // inclusive
  uint64_t codewords = 0;
  std::vector<uint64_t> lanes;
  bool operator==(const FecHistogramBin&) const = default;
};

struct FecReading {
  uint32_t ifindex = 0;
  std::string ifname;
  std::optional<bool> fec_auto;
  std::optional<uint32_t> active_link_mode;  // ETHTOOL_LINK_MODE_FEC_*_BIT
  bool has_stats = false;                    // ETHTOOL_A_FEC_STATS was in the reply
  FecCounter corrected;                      // codewords (blocks) corrected
  FecCounter uncorrectable;                  // codewords that could not be
  FecCounter corrected_bits;
  std::vector<FecHistogramBin> histogram;  // empty: none (before 6.18, or the driver has none)
  bool operator==(const FecReading&) const = default;
};

// ETHTOOL_MSG_FEC_GET as a dump of every interface, with ETHTOOL_FLAG_STATS.
size_t BuildFecDumpRequest(uint16_t family, uint32_t seq, std::vector<char>& buf);

// Appends the readings in a dump's bytes. 0: the dump ended (NLMSG_DONE); 1: more to come;
// -errno: the kernel's error, or -EBADMSG for a malformed reply (an array whose length is no
// multiple of 8 or has more than 1 + 8 values, a bin without its bounds or value, more than
// 16 bins, an attribute of the wrong size), whatever was appended before it kept.
int ParseFecDump(const void* data, size_t len, std::vector<FecReading>& out);

// "off", "rs", "baser", "llrs" for ETHTOOL_A_FEC_ACTIVE's link mode bit ("none" when no mode
// is active: the attribute is absent; "other" for a bit that is no FEC mode).
std::string_view FecModeName(std::optional<uint32_t> link_mode);

}  // namespace rdmascope::sys
