// sys/ethtool_fec and sys/ethtool_linkmodes: dump replies built as the kernel builds them
// (net/ethtool/fec.c fec_fill_reply / fec_put_stats / fec_put_hist, net/ethtool/linkmodes.c,
// net/ethtool/bitset.c), decoded to values written here; malformed, cut and refused dumps;
// the line rate and maxima from link modes; the capture keys of ethtool requests.
#include "sys/ethtool_fec.h"

#include <gtest/gtest.h>
#include <linux/ethtool.h>

#include <cerrno>
#include <string>
#include <vector>

#include "sys/ethtool_linkmodes.h"
#include "sys/netlink_capture.h"
#include "unit/ethtool_reply_builder.h"

namespace rdmascope::sys {
namespace {

using testing::EthtoolDump;

struct Bin {
  uint32_t low, high;
  uint64_t value;
  std::vector<uint64_t> lanes;
};

struct FecFixture {
  uint32_t ifindex;
  std::string name;
  uint32_t active;  // a link mode bit, 0: the kernel leaves ETHTOOL_A_FEC_ACTIVE out
  uint8_t fec_auto;
  // The arrays as fec_put_stats puts them (fec_stats_recalc: total first, then lanes; empty
  // when the driver did not set the counter).
  std::vector<uint64_t> corrected, uncorr, bits;
  std::vector<Bin> histogram;
  bool pad = false;  // nla_put_64bit's ETHTOOL_A_FEC_STAT_PAD (architectures that align)
};

// One FEC_GET_REPLY, attribute by attribute in fec_fill_reply's order. ETHTOOL_A_FEC_MODES is
// a verbose bitset (the request does not ask for compact ones): what ethnl_put_bitset puts
// for a list without mask, one named bit.
void PutFec(EthtoolDump& dump, const FecFixture& f) {
  nlmsghdr* m = dump.Begin(ETHTOOL_MSG_FEC_GET_REPLY, ETHTOOL_A_FEC_HEADER, f.ifindex, f.name);
  nlattr* modes = mnl_attr_nest_start(m, ETHTOOL_A_FEC_MODES);
  mnl_attr_put(m, ETHTOOL_A_BITSET_NOMASK, 0, nullptr);
  mnl_attr_put_u32(m, ETHTOOL_A_BITSET_SIZE, 93);
  nlattr* bits = mnl_attr_nest_start(m, ETHTOOL_A_BITSET_BITS);
  nlattr* bit = mnl_attr_nest_start(m, ETHTOOL_A_BITSET_BITS_BIT);
  mnl_attr_put_u32(m, ETHTOOL_A_BITSET_BIT_INDEX, ETHTOOL_LINK_MODE_FEC_RS_BIT);
  mnl_attr_put_strz(m, ETHTOOL_A_BITSET_BIT_NAME, "RS");
  mnl_attr_nest_end(m, bit);
  mnl_attr_nest_end(m, bits);
  mnl_attr_nest_end(m, modes);
  mnl_attr_put_u8(m, ETHTOOL_A_FEC_AUTO, f.fec_auto);
  if (f.active != 0) mnl_attr_put_u32(m, ETHTOOL_A_FEC_ACTIVE, f.active);
  nlattr* stats = mnl_attr_nest_start(m, ETHTOOL_A_FEC_STATS);
  if (f.pad) mnl_attr_put(m, ETHTOOL_A_FEC_STAT_PAD, 0, nullptr);
  EthtoolDump::PutArray(m, ETHTOOL_A_FEC_STAT_CORRECTED, f.corrected);
  EthtoolDump::PutArray(m, ETHTOOL_A_FEC_STAT_UNCORR, f.uncorr);
  EthtoolDump::PutArray(m, ETHTOOL_A_FEC_STAT_CORR_BITS, f.bits);
  for (const Bin& b : f.histogram) {
    nlattr* hist = mnl_attr_nest_start(m, kEthtoolFecStatHist);
    mnl_attr_put_u32(m, kEthtoolFecHistBinLow, b.low);
    mnl_attr_put_u32(m, kEthtoolFecHistBinHigh, b.high);
    // nla_put_uint: 4 bytes when the value fits in 32 bits.
    if (b.value <= UINT32_MAX) {
      mnl_attr_put_u32(m, kEthtoolFecHistBinVal, static_cast<uint32_t>(b.value));
    } else {
      mnl_attr_put_u64(m, kEthtoolFecHistBinVal, b.value);
    }
    if (f.pad) mnl_attr_put(m, kEthtoolFecHistPad, 0, nullptr);
    if (!b.lanes.empty()) EthtoolDump::PutArray(m, kEthtoolFecHistBinValPerLane, b.lanes);
    mnl_attr_nest_end(m, hist);
  }
  mnl_attr_nest_end(m, stats);
  dump.End();
}

std::vector<FecReading> Parse(const std::string& bytes, int expect = 0) {
  std::vector<FecReading> out;
  EXPECT_EQ(ParseFecDump(bytes.data(), bytes.size(), out), expect);
  return out;
}

// mlx5 in RS mode (mlx5e_get_fec_stats, en_stats.c: totals of PPCNT's RS counters, no lanes),
// mlx5 in FC-FEC / BaseR (per-lane corrected and uncorrectable blocks; the kernel sums them into
// the total and reports no corrected bits), ice (totals, no corrected bits), and an interface
// whose driver has no get_fec_stats (three empty arrays).
TEST(EthtoolFec, DriversTotalsAndLanes) {
  EthtoolDump dump;
  PutFec(dump, {.ifindex = 4,
                .name = "ens1f0np0",
                .active = ETHTOOL_LINK_MODE_FEC_RS_BIT,
                .fec_auto = 0,
                .corrected = {1234},
                .uncorr = {5},
                .bits = {98765}});
  PutFec(dump, {.ifindex = 5,
                .name = "ens1f1np1",
                .active = ETHTOOL_LINK_MODE_FEC_BASER_BIT,
                .fec_auto = 1,
                .corrected = {100, 10, 20, 30, 40},
                .uncorr = {1, 0, 1, 0, 0},
                .bits = {},
                .pad = true});
  PutFec(dump, {.ifindex = 6,
                .name = "ens2f0",
                .active = ETHTOOL_LINK_MODE_FEC_RS_BIT,
                .fec_auto = 1,
                .corrected = {77},
                .uncorr = {0},
                .bits = {}});
  PutFec(dump, {.ifindex = 7, .name = "eno1", .active = 0, .fec_auto = 0});
  const auto r = Parse(dump.Done());
  ASSERT_EQ(r.size(), 4U);
  EXPECT_EQ(r[0].ifname, "ens1f0np0");
  EXPECT_EQ(r[0].ifindex, 4U);
  EXPECT_EQ(FecModeName(r[0].active_link_mode), "rs");
  EXPECT_EQ(r[0].fec_auto, false);
  EXPECT_TRUE(r[0].has_stats);
  EXPECT_EQ(r[0].corrected, (FecCounter{1234, {}}));
  EXPECT_EQ(r[0].uncorrectable, (FecCounter{5, {}}));
  EXPECT_EQ(r[0].corrected_bits, (FecCounter{98765, {}}));
  EXPECT_TRUE(r[0].histogram.empty());
  // ethtool --json --include-statistics --show-fec prints the same split (netlink/fec.c:
  // the first u64 is "total", the rest "lanes"): corrected_blocks total 100, lanes
  // [10, 20, 30, 40]; uncorrectable_blocks total 1, lanes [0, 1, 0, 0].
  EXPECT_EQ(FecModeName(r[1].active_link_mode), "baser");
  EXPECT_EQ(r[1].fec_auto, true);
  EXPECT_EQ(r[1].corrected, (FecCounter{100, {10, 20, 30, 40}}));
  EXPECT_EQ(r[1].uncorrectable, (FecCounter{1, {0, 1, 0, 0}}));
  EXPECT_EQ(r[1].corrected_bits, FecCounter{});  // not reported: none, never 0
  EXPECT_EQ(r[2].corrected, (FecCounter{77, {}}));
  EXPECT_EQ(r[2].uncorrectable, (FecCounter{0, {}}));
  EXPECT_FALSE(r[2].corrected_bits.total);
  // No FEC mode active (link down): the kernel leaves ETHTOOL_A_FEC_ACTIVE out.
  EXPECT_EQ(FecModeName(r[3].active_link_mode), "none");
  EXPECT_TRUE(r[3].has_stats);
  EXPECT_FALSE(r[3].corrected.total);
  EXPECT_FALSE(r[3].uncorrectable.total);
}

// Linux 6.18's histogram: netdevsim's example (drivers/net/netdevsim/ethtool.c: bins 0, 1-3,
// 4-7; per-lane values of bin 0 summed by the kernel into BIN_VAL), and bnxt's 16 single-count
// bins (bnxt_ethtool.c) with a bin over 2^32 (BIN_VAL is then 8 bytes).
TEST(EthtoolFec, Histogram618) {
  EthtoolDump dump;
  PutFec(dump,
         {.ifindex = 2,
          .name = "eni0np1",
          .active = ETHTOOL_LINK_MODE_FEC_RS_BIT,
          .fec_auto = 0,
          .corrected = {123},
          .uncorr = {4},
          .histogram = {{0, 0, 445, {125, 120, 100, 100}}, {1, 3, 12, {}}, {4, 7, 2, {2, 0, 0, 0}}},
          .pad = true});
  std::vector<Bin> bnxt;
  for (uint32_t i = 0; i < 16; ++i)
    bnxt.push_back({i, i, i == 0 ? 5'000'000'000'000ULL : 16 - i, {}});
  PutFec(dump, {.ifindex = 3,
                .name = "ens3f0np0",
                .active = ETHTOOL_LINK_MODE_FEC_RS_BIT,
                .fec_auto = 1,
                .corrected = {136},
                .uncorr = {0},
                .bits = {150},
                .histogram = bnxt});
  const auto r = Parse(dump.Done());
  ASSERT_EQ(r.size(), 2U);
  ASSERT_EQ(r[0].histogram.size(), 3U);
  EXPECT_EQ(r[0].histogram[0], (FecHistogramBin{0, 0, 445, {125, 120, 100, 100}}));
  EXPECT_EQ(r[0].histogram[1], (FecHistogramBin{1, 3, 12, {}}));
  EXPECT_EQ(r[0].histogram[2], (FecHistogramBin{4, 7, 2, {2, 0, 0, 0}}));
  EXPECT_EQ(r[0].corrected, (FecCounter{123, {}}));
  ASSERT_EQ(r[1].histogram.size(), 16U);
  EXPECT_EQ(r[1].histogram[0].codewords, 5'000'000'000'000ULL);
  EXPECT_EQ(r[1].histogram[15], (FecHistogramBin{15, 15, 1, {}}));
  EXPECT_EQ(r[1].corrected_bits, (FecCounter{150, {}}));
}

// A dump arrives in several receive buffers: 1 until NLMSG_DONE; the readings accumulate.
TEST(EthtoolFec, DumpAcrossBuffers) {
  EthtoolDump first;
  PutFec(first, {.ifindex = 4,
                 .name = "eth4",
                 .active = ETHTOOL_LINK_MODE_FEC_RS_BIT,
                 .corrected = {1},
                 .uncorr = {0},
                 .bits = {2}});
  std::vector<FecReading> out;
  EXPECT_EQ(ParseFecDump(first.bytes().data(), first.bytes().size(), out), 1);
  EthtoolDump second;
  PutFec(second, {.ifindex = 5,
                  .name = "eth5",
                  .active = ETHTOOL_LINK_MODE_FEC_LLRS_BIT,
                  .corrected = {3},
                  .uncorr = {0},
                  .bits = {4}});
  const std::string rest = second.Done();
  EXPECT_EQ(ParseFecDump(rest.data(), rest.size(), out), 0);
  ASSERT_EQ(out.size(), 2U);
  EXPECT_EQ(FecModeName(out[1].active_link_mode), "llrs");
  // An empty dump (no interface has FEC: veth, virtio) is a dump, of nothing.
  EthtoolDump empty;
  EXPECT_TRUE(Parse(empty.Done()).empty());
}

TEST(EthtoolFec, RefusedMalformedAndCut) {
  EthtoolDump refused;
  std::vector<FecReading> out;
  const std::string error = refused.Error(EOPNOTSUPP);
  EXPECT_EQ(ParseFecDump(error.data(), error.size(), out), -EOPNOTSUPP);
  // An array of 12 bytes, of 10 values, a bin without its high bound, 17 bins, an inverted
  // bin, a BIN_VAL of 2 bytes: each -EBADMSG.
  const auto malformed = [](auto put) {
    EthtoolDump dump;
    nlmsghdr* m = dump.Begin(ETHTOOL_MSG_FEC_GET_REPLY, ETHTOOL_A_FEC_HEADER, 9, "bad0");
    nlattr* stats = mnl_attr_nest_start(m, ETHTOOL_A_FEC_STATS);
    put(m);
    mnl_attr_nest_end(m, stats);
    dump.End();
    std::vector<FecReading> readings;
    const std::string bytes = dump.Done();
    return ParseFecDump(bytes.data(), bytes.size(), readings);
  };
  EXPECT_EQ(malformed([](nlmsghdr* m) {
              const char twelve[12] = {};
              mnl_attr_put(m, ETHTOOL_A_FEC_STAT_CORRECTED, sizeof twelve, twelve);
            }),
            -EBADMSG);
  EXPECT_EQ(malformed([](nlmsghdr* m) {
              EthtoolDump::PutArray(m, ETHTOOL_A_FEC_STAT_UNCORR, std::vector<uint64_t>(10, 1));
            }),
            -EBADMSG);
  const auto bin = [](nlmsghdr* m, bool high, uint32_t low_value, uint32_t high_value) {
    nlattr* hist = mnl_attr_nest_start(m, kEthtoolFecStatHist);
    mnl_attr_put_u32(m, kEthtoolFecHistBinLow, low_value);
    if (high) mnl_attr_put_u32(m, kEthtoolFecHistBinHigh, high_value);
    mnl_attr_put_u32(m, kEthtoolFecHistBinVal, 1);
    mnl_attr_nest_end(m, hist);
  };
  EXPECT_EQ(malformed([&](nlmsghdr* m) { bin(m, false, 1, 1); }), -EBADMSG);
  EXPECT_EQ(malformed([&](nlmsghdr* m) { bin(m, true, 5, 4); }), -EBADMSG);
  EXPECT_EQ(malformed([&](nlmsghdr* m) {
              for (uint32_t i = 0; i < 17; ++i) bin(m, true, i, i);
            }),
            -EBADMSG);
  EXPECT_EQ(malformed([&](nlmsghdr* m) {
              for (uint32_t i = 0; i < 16; ++i) bin(m, true, i, i);
            }),
            0);
  EXPECT_EQ(malformed([](nlmsghdr* m) {
              nlattr* hist = mnl_attr_nest_start(m, kEthtoolFecStatHist);
              mnl_attr_put_u32(m, kEthtoolFecHistBinLow, 0);
              mnl_attr_put_u32(m, kEthtoolFecHistBinHigh, 0);
              mnl_attr_put_u16(m, kEthtoolFecHistBinVal, 1);
              mnl_attr_nest_end(m, hist);
            }),
            -EBADMSG);
  // Cut inside a message: not whole messages.
  EthtoolDump whole;
  PutFec(whole, {.ifindex = 4, .name = "eth4", .corrected = {1}, .uncorr = {0}, .bits = {2}});
  const std::string bytes = whole.Done();
  for (size_t cut : {size_t{3}, size_t{20}, bytes.size() - 25}) {
    std::vector<FecReading> readings;
    EXPECT_EQ(ParseFecDump(bytes.data(), cut, readings), -EBADMSG) << cut;
  }
  // A reply of another command, a header without a name: not this dump's.
  EthtoolDump other;
  other.Begin(ETHTOOL_MSG_LINKMODES_GET_REPLY, ETHTOOL_A_FEC_HEADER, 4, "eth4");
  other.End();
  EXPECT_EQ(Parse(other.Done(), -EBADMSG).size(), 0U);
  // An NLMSG_ERROR whose code is no errno.
  EthtoolDump garbage;
  const std::string odd = garbage.Error(-5000);
  EXPECT_EQ(ParseFecDump(odd.data(), odd.size(), out), -EBADMSG);
}

// ---- link modes

std::vector<uint32_t> Words(std::initializer_list<uint32_t> bits, uint32_t size) {
  std::vector<uint32_t> words((size + 31) / 32, 0);
  for (const uint32_t bit : bits) words[bit / 32] |= 1U << (bit % 32);
  return words;
}

// ethnl_put_bitset, compact: SIZE, VALUE and MASK (or NOMASK) as 32-bit words.
void PutBitset(nlmsghdr* m, uint16_t type, std::initializer_list<uint32_t> value,
               std::optional<std::initializer_list<uint32_t>> mask, uint32_t size = 125) {
  nlattr* nest = mnl_attr_nest_start(m, type);
  if (!mask) mnl_attr_put(m, ETHTOOL_A_BITSET_NOMASK, 0, nullptr);
  mnl_attr_put_u32(m, ETHTOOL_A_BITSET_SIZE, size);
  const auto v = Words(value, size);
  mnl_attr_put(m, ETHTOOL_A_BITSET_VALUE, v.size() * 4, v.data());
  if (mask) {
    const auto k = Words(*mask, size);
    mnl_attr_put(m, ETHTOOL_A_BITSET_MASK, k.size() * 4, k.data());
  }
  mnl_attr_nest_end(m, nest);
}

void PutModes(EthtoolDump& dump, const std::string& name, uint32_t speed,
              std::optional<uint32_t> lanes, std::initializer_list<uint32_t> advertised,
              std::initializer_list<uint32_t> supported,
              std::optional<std::initializer_list<uint32_t>> peer = std::nullopt) {
  nlmsghdr* m = dump.Begin(ETHTOOL_MSG_LINKMODES_GET_REPLY, ETHTOOL_A_LINKMODES_HEADER, 3, name);
  mnl_attr_put_u8(m, ETHTOOL_A_LINKMODES_AUTONEG, AUTONEG_ENABLE);
  PutBitset(m, ETHTOOL_A_LINKMODES_OURS, advertised, supported);
  if (peer) PutBitset(m, ETHTOOL_A_LINKMODES_PEER, *peer, std::nullopt);
  mnl_attr_put_u32(m, ETHTOOL_A_LINKMODES_SPEED, speed);
  mnl_attr_put_u8(m, ETHTOOL_A_LINKMODES_DUPLEX, DUPLEX_FULL);
  if (lanes) mnl_attr_put_u32(m, ETHTOOL_A_LINKMODES_LANES, *lanes);
  dump.End();
}

std::vector<LinkModesReading> ParseModes(const std::string& bytes, int expect = 0) {
  std::vector<LinkModesReading> out;
  EXPECT_EQ(ParseLinkModesDump(bytes.data(), bytes.size(), out), expect);
  return out;
}

TEST(EthtoolLinkModes, LineRateAndMaxima) {
  constexpr uint32_t k100gCr4 = ETHTOOL_LINK_MODE_100000baseCR4_Full_BIT;  // 38
  constexpr uint32_t k200gCr4 = ETHTOOL_LINK_MODE_200000baseCR4_Full_BIT;  // 66
  constexpr uint32_t k200gCr2 = ETHTOOL_LINK_MODE_200000baseCR2_Full_BIT;  // 84
  constexpr uint32_t k400gCr4 = ETHTOOL_LINK_MODE_400000baseCR4_Full_BIT;  // 89
  constexpr uint32_t k400gCr8 = ETHTOOL_LINK_MODE_400000baseCR8_Full_BIT;  // 73
  constexpr uint32_t k800gCr8 = 93;  // 800000baseCR8_Full, after 6.1's headers
  EthtoolDump dump;
  // 100G over 4 x 25G NRZ, the driver says 4 lanes: 4 x 25.78125 Gb/s.
  PutModes(dump, "eth0", 100000, 4, {k100gCr4}, {k100gCr4, k200gCr4});
  // 400G over 4 x 100G PAM4: 4 x 106.25 Gb/s; the port could do 800G.
  PutModes(dump, "eth1", 400000, 4, {k400gCr4, k400gCr8}, {k400gCr4, k400gCr8, k800gCr8},
           {{k400gCr4, k400gCr8}});
  // 200G, lanes not said: the advertised 200G modes all use 4 lanes: 4 x 53.125 Gb/s.
  PutModes(dump, "eth2", 200000, std::nullopt, {k200gCr4, k100gCr4}, {k200gCr4, k200gCr2});
  // 200G, lanes not said, 4- and 2-lane modes advertised: ambiguous, no line rate.
  PutModes(dump, "eth3", 200000, std::nullopt, {k200gCr4, k200gCr2}, {k200gCr4, k200gCr2});
  // Link down: SPEED_UNKNOWN.
  PutModes(dump, "eth4", static_cast<uint32_t>(SPEED_UNKNOWN), std::nullopt, {k100gCr4},
           {k100gCr4});
  // veth: 10G, no link modes at all.
  PutModes(dump, "veth0", 10000, std::nullopt, {}, {});
  const auto r = ParseModes(dump.Done());
  ASSERT_EQ(r.size(), 6U);
  EXPECT_EQ(r[0].speed_mbps, 100000U);
  EXPECT_EQ(r[0].supported, (std::vector<uint32_t>{k100gCr4, k200gCr4}));
  EXPECT_EQ(r[0].advertised, (std::vector<uint32_t>{k100gCr4}));
  EXPECT_DOUBLE_EQ(LineRateBitsPerSecond(r[0]).value(), 103.125e9);
  EXPECT_EQ(MaxSupportedSpeedMbps(r[0]), 200000U);
  EXPECT_FALSE(CommonMaxSpeedMbps(r[0]));  // no partner modes
  EXPECT_DOUBLE_EQ(LineRateBitsPerSecond(r[1]).value(), 425e9);
  EXPECT_EQ(MaxSupportedSpeedMbps(r[1]), 800000U);
  EXPECT_EQ(CommonMaxSpeedMbps(r[1]), 400000U);
  EXPECT_EQ(ActiveLanes(r[2]), 4U);
  EXPECT_DOUBLE_EQ(LineRateBitsPerSecond(r[2]).value(), 212.5e9);
  EXPECT_FALSE(ActiveLanes(r[3]));
  EXPECT_FALSE(LineRateBitsPerSecond(r[3]));
  EXPECT_FALSE(r[4].speed_mbps);
  EXPECT_FALSE(LineRateBitsPerSecond(r[4]));
  EXPECT_EQ(r[5].speed_mbps, 10000U);
  EXPECT_FALSE(MaxSupportedSpeedMbps(r[5]));
}

TEST(EthtoolLinkModes, TableFollowsTheKernel) {
  // net/ethtool/common.c link_mode_params: speed and __LINK_MODE_LANES_<type>.
  EXPECT_EQ(LinkModeParamsOf(ETHTOOL_LINK_MODE_10000baseKX4_Full_BIT)->lanes, 4U);
  EXPECT_EQ(LinkModeParamsOf(ETHTOOL_LINK_MODE_20000baseMLD2_Full_BIT)->lanes, 2U);
  EXPECT_EQ(LinkModeParamsOf(ETHTOOL_LINK_MODE_100000baseLR4_ER4_Full_BIT)->lanes, 4U);
  EXPECT_EQ(LinkModeParamsOf(ETHTOOL_LINK_MODE_400000baseDR4_Full_BIT)->speed_mbps, 400000U);
  EXPECT_EQ(LinkModeParamsOf(96)->lanes, 8U);   // 800000baseDR8_2
  EXPECT_EQ(LinkModeParamsOf(106)->lanes, 1U);  // 200000baseDR_2
  EXPECT_EQ(LinkModeParamsOf(124)->speed_mbps, 1600000U);
  EXPECT_FALSE(LinkModeParamsOf(ETHTOOL_LINK_MODE_FEC_RS_BIT));
  EXPECT_FALSE(LinkModeParamsOf(ETHTOOL_LINK_MODE_Autoneg_BIT));
  EXPECT_FALSE(LinkModeParamsOf(ETHTOOL_LINK_MODE_10000baseR_FEC_BIT));
  EXPECT_FALSE(LinkModeParamsOf(125));
  EXPECT_DOUBLE_EQ(LaneSignallingRate(50000).value(), 53.125e9);
  EXPECT_DOUBLE_EQ(LaneSignallingRate(200000).value(), 212.5e9);
  EXPECT_FALSE(LaneSignallingRate(14000));  // 56G x4: no IEEE signalling rate
}

TEST(EthtoolLinkModes, MalformedBitsets) {
  const auto parse = [](auto put) {
    EthtoolDump dump;
    nlmsghdr* m =
        dump.Begin(ETHTOOL_MSG_LINKMODES_GET_REPLY, ETHTOOL_A_LINKMODES_HEADER, 3, "eth0");
    put(m);
    dump.End();
    std::vector<LinkModesReading> out;
    const std::string bytes = dump.Done();
    return ParseLinkModesDump(bytes.data(), bytes.size(), out);
  };
  EXPECT_EQ(parse([](nlmsghdr* m) { PutBitset(m, ETHTOOL_A_LINKMODES_OURS, {1}, {{1}}); }), 0);
  EXPECT_EQ(parse([](nlmsghdr* m) { PutBitset(m, ETHTOOL_A_LINKMODES_OURS, {1}, {{1}}, 2000); }),
            -EBADMSG);
  EXPECT_EQ(parse([](nlmsghdr* m) {
              nlattr* nest = mnl_attr_nest_start(m, ETHTOOL_A_LINKMODES_OURS);
              mnl_attr_put_u32(m, ETHTOOL_A_BITSET_SIZE, 125);
              const uint32_t words[2] = {1, 0};  // 2 words for 125 bits: 4 needed
              mnl_attr_put(m, ETHTOOL_A_BITSET_VALUE, sizeof words, words);
              mnl_attr_put(m, ETHTOOL_A_BITSET_MASK, sizeof words, words);
              mnl_attr_nest_end(m, nest);
            }),
            -EBADMSG);
  EXPECT_EQ(parse([](nlmsghdr* m) { mnl_attr_put_u16(m, ETHTOOL_A_LINKMODES_SPEED, 100); }),
            -EBADMSG);
  // Lanes outside 1..8: no lane count, not an error.
  std::vector<LinkModesReading> out;
  EthtoolDump dump;
  nlmsghdr* m = dump.Begin(ETHTOOL_MSG_LINKMODES_GET_REPLY, ETHTOOL_A_LINKMODES_HEADER, 3, "eth0");
  mnl_attr_put_u32(m, ETHTOOL_A_LINKMODES_LANES, 64);
  dump.End();
  ASSERT_EQ(ParseModes(dump.Done()).size(), 1U);
}

// ---- capture keys

TEST(EthtoolCapture, RequestKeys) {
  std::vector<char> request;
  size_t len = BuildFecDumpRequest(0x15, 3, request);
  EXPECT_EQ(NetlinkRequestKey(NetlinkFamily::kEthtool, request.data(), len), "ethtool/fec_get");
  len = BuildLinkModesDumpRequest(0x22, 9, request);
  EXPECT_EQ(NetlinkRequestKey(NetlinkFamily::kEthtool, request.data(), len),
            "ethtool/linkmodes_get");
  // One interface (no NLM_F_DUMP): named by its header's DEV_NAME.
  len = BuildFecDumpRequest(0x15, 3, request);
  auto* header = reinterpret_cast<nlmsghdr*>(request.data());
  header->nlmsg_flags = NLM_F_REQUEST;
  nlattr* nest = mnl_attr_nest_start(header, ETHTOOL_A_FEC_HEADER);
  mnl_attr_put_strz(header, ETHTOOL_A_HEADER_DEV_NAME, "eth0");
  mnl_attr_nest_end(header, nest);
  len = header->nlmsg_len;
  EXPECT_EQ(NetlinkRequestKey(NetlinkFamily::kEthtool, request.data(), len),
            "ethtool/fec_get-eth0");
  // A name that is no path component is refused.
  len = BuildFecDumpRequest(0x15, 3, request);
  header = reinterpret_cast<nlmsghdr*>(request.data());
  header->nlmsg_flags = NLM_F_REQUEST;
  nest = mnl_attr_nest_start(header, ETHTOOL_A_FEC_HEADER);
  mnl_attr_put_strz(header, ETHTOOL_A_HEADER_DEV_NAME, "..");
  mnl_attr_nest_end(header, nest);
  EXPECT_EQ(NetlinkRequestKey(NetlinkFamily::kEthtool, request.data(), header->nlmsg_len).error(),
            EINVAL);
}

}  // namespace
}  // namespace rdmascope::sys
