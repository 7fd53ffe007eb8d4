#include "sys/ethtool_linkmodes.h"

#include <libmnl/libmnl.h>
#include <linux/ethtool.h>
#include <linux/ethtool_netlink.h>
#include <linux/genetlink.h>

#include <algorithm>
#include <cstring>

#include "sys/ethtool_dump.h"

namespace rdmascope::sys {
namespace {

// A bitset of more bits than this is no kernel's (6.18 has 125 link modes).
constexpr uint32_t kMaxBitsetBits = 1024;

struct ModeRow {
  uint32_t bit, speed_mbps, lanes;
};

// net/ethtool/common.c, link_mode_params: speed and lanes (__LINK_MODE_LANES_<type>) of each
// link mode bit of include/uapi/linux/ethtool.h. Bits 0..92 are in bookworm's 6.1 headers;
// 93..124 came later (800G x8, 10BASE-T1S/T1BRR, the 200G-per-lane modes 103..120, 1.6T
// 121..124), numbered as the kernel's uapi header numbers them (ethtool's copy of it, synced to
// kernel commit 491c5dc98b84, December 2025). Lanes by the mode's name: CR4 4, KR 1, DR8_2 8.
constexpr ModeRow kModes[] = {
    {0, 10, 1},         // 10baseT_Half
    {1, 10, 1},         // 10baseT_Full
    {2, 100, 1},        // 100baseT_Half
    {3, 100, 1},        // 100baseT_Full
    {4, 1000, 1},       // 1000baseT_Half
    {5, 1000, 1},       // 1000baseT_Full
    {12, 10000, 1},     // 10000baseT_Full
    {15, 2500, 1},      // 2500baseX_Full
    {17, 1000, 1},      // 1000baseKX_Full
    {18, 10000, 4},     // 10000baseKX4_Full
    {19, 10000, 1},     // 10000baseKR_Full
    {21, 20000, 2},     // 20000baseMLD2_Full
    {22, 20000, 2},     // 20000baseKR2_Full
    {23, 40000, 4},     // 40000baseKR4_Full
    {24, 40000, 4},     // 40000baseCR4_Full
    {25, 40000, 4},     // 40000baseSR4_Full
    {26, 40000, 4},     // 40000baseLR4_Full
    {27, 56000, 4},     // 56000baseKR4_Full
    {28, 56000, 4},     // 56000baseCR4_Full
    {29, 56000, 4},     // 56000baseSR4_Full
    {30, 56000, 4},     // 56000baseLR4_Full
    {31, 25000, 1},     // 25000baseCR_Full
    {32, 25000, 1},     // 25000baseKR_Full
    {33, 25000, 1},     // 25000baseSR_Full
    {34, 50000, 2},     // 50000baseCR2_Full
    {35, 50000, 2},     // 50000baseKR2_Full
    {36, 100000, 4},    // 100000baseKR4_Full
    {37, 100000, 4},    // 100000baseSR4_Full
    {38, 100000, 4},    // 100000baseCR4_Full
    {39, 100000, 4},    // 100000baseLR4_ER4_Full
    {40, 50000, 2},     // 50000baseSR2_Full
    {41, 1000, 1},      // 1000baseX_Full
    {42, 10000, 1},     // 10000baseCR_Full
    {43, 10000, 1},     // 10000baseSR_Full
    {44, 10000, 1},     // 10000baseLR_Full
    {45, 10000, 1},     // 10000baseLRM_Full
    {46, 10000, 1},     // 10000baseER_Full
    {47, 2500, 1},      // 2500baseT_Full
    {48, 5000, 1},      // 5000baseT_Full
    {52, 50000, 1},     // 50000baseKR_Full
    {53, 50000, 1},     // 50000baseSR_Full
    {54, 50000, 1},     // 50000baseCR_Full
    {55, 50000, 1},     // 50000baseLR_ER_FR_Full
    {56, 50000, 1},     // 50000baseDR_Full
    {57, 100000, 2},    // 100000baseKR2_Full
    {58, 100000, 2},    // 100000baseSR2_Full
    {59, 100000, 2},    // 100000baseCR2_Full
    {60, 100000, 2},    // 100000baseLR2_ER2_FR2_Full
    {61, 100000, 2},    // 100000baseDR2_Full
    {62, 200000, 4},    // 200000baseKR4_Full
    {63, 200000, 4},    // 200000baseSR4_Full
    {64, 200000, 4},    // 200000baseLR4_ER4_FR4_Full
    {65, 200000, 4},    // 200000baseDR4_Full
    {66, 200000, 4},    // 200000baseCR4_Full
    {67, 100, 1},       // 100baseT1_Full
    {68, 1000, 1},      // 1000baseT1_Full
    {69, 400000, 8},    // 400000baseKR8_Full
    {70, 400000, 8},    // 400000baseSR8_Full
    {71, 400000, 8},    // 400000baseLR8_ER8_FR8_Full
    {72, 400000, 8},    // 400000baseDR8_Full
    {73, 400000, 8},    // 400000baseCR8_Full
    {75, 100000, 1},    // 100000baseKR_Full
    {76, 100000, 1},    // 100000baseSR_Full
    {77, 100000, 1},    // 100000baseLR_ER_FR_Full
    {78, 100000, 1},    // 100000baseCR_Full
    {79, 100000, 1},    // 100000baseDR_Full
    {80, 200000, 2},    // 200000baseKR2_Full
    {81, 200000, 2},    // 200000baseSR2_Full
    {82, 200000, 2},    // 200000baseLR2_ER2_FR2_Full
    {83, 200000, 2},    // 200000baseDR2_Full
    {84, 200000, 2},    // 200000baseCR2_Full
    {85, 400000, 4},    // 400000baseKR4_Full
    {86, 400000, 4},    // 400000baseSR4_Full
    {87, 400000, 4},    // 400000baseLR4_ER4_FR4_Full
    {88, 400000, 4},    // 400000baseDR4_Full
    {89, 400000, 4},    // 400000baseCR4_Full
    {90, 100, 1},       // 100baseFX_Half
    {91, 100, 1},       // 100baseFX_Full
    {92, 10, 1},        // 10baseT1L_Full
    {93, 800000, 8},    // 800000baseCR8_Full
    {94, 800000, 8},    // 800000baseKR8_Full
    {95, 800000, 8},    // 800000baseDR8_Full
    {96, 800000, 8},    // 800000baseDR8_2_Full
    {97, 800000, 8},    // 800000baseSR8_Full
    {98, 800000, 8},    // 800000baseVR8_Full
    {99, 10, 1},        // 10baseT1S_Full
    {100, 10, 1},       // 10baseT1S_Half
    {101, 10, 1},       // 10baseT1S_P2MP_Half
    {102, 10, 1},       // 10baseT1BRR_Full
    {103, 200000, 1},   // 200000baseCR_Full
    {104, 200000, 1},   // 200000baseKR_Full
    {105, 200000, 1},   // 200000baseDR_Full
    {106, 200000, 1},   // 200000baseDR_2_Full
    {107, 200000, 1},   // 200000baseSR_Full
    {108, 200000, 1},   // 200000baseVR_Full
    {109, 400000, 2},   // 400000baseCR2_Full
    {110, 400000, 2},   // 400000baseKR2_Full
    {111, 400000, 2},   // 400000baseDR2_Full
    {112, 400000, 2},   // 400000baseDR2_2_Full
    {113, 400000, 2},   // 400000baseSR2_Full
    {114, 400000, 2},   // 400000baseVR2_Full
    {115, 800000, 4},   // 800000baseCR4_Full
    {116, 800000, 4},   // 800000baseKR4_Full
    {117, 800000, 4},   // 800000baseDR4_Full
    {118, 800000, 4},   // 800000baseDR4_2_Full
    {119, 800000, 4},   // 800000baseSR4_Full
    {120, 800000, 4},   // 800000baseVR4_Full
    {121, 1600000, 8},  // 1600000baseCR8_Full
    {122, 1600000, 8},  // 1600000baseKR8_Full
    {123, 1600000, 8},  // 1600000baseDR8_Full
    {124, 1600000, 8},  // 1600000baseDR8_2_Full
};

struct BitsetState {
  const nlattr* size = nullptr;
  const nlattr* value = nullptr;
  const nlattr* mask = nullptr;
  bool nomask = false;
};

int OnBitsetAttribute(const nlattr* attr, void* data) {
  auto* state = static_cast<BitsetState*>(data);
  switch (mnl_attr_get_type(attr)) {
    case ETHTOOL_A_BITSET_SIZE:
      state->size = attr;
      break;
    case ETHTOOL_A_BITSET_VALUE:
      state->value = attr;
      break;
    case ETHTOOL_A_BITSET_MASK:
      state->mask = attr;
      break;
    case ETHTOOL_A_BITSET_NOMASK:
      state->nomask = true;
      break;
    default:
      break;
  }
  return MNL_CB_OK;
}

// The set bits of a compact array of `bits` bits (32-bit words, host order).
bool ReadWords(const nlattr* attr, uint32_t bits, std::vector<uint32_t>& out) {
  const size_t words = (bits + 31) / 32;
  if (mnl_attr_get_payload_len(attr) != words * sizeof(uint32_t)) return false;
  const auto* payload = static_cast<const char*>(mnl_attr_get_payload(attr));
  out.clear();
  for (size_t w = 0; w < words; ++w) {
    uint32_t word;
    std::memcpy(&word, payload + w * sizeof word, sizeof word);
    for (uint32_t b = 0; b < 32; ++b) {
      const uint32_t bit = static_cast<uint32_t>(w) * 32 + b;
      if (bit < bits && (word >> b & 1U) != 0) out.push_back(bit);
    }
  }
  return true;
}

// A compact bitset (ethnl_put_bitset with ETHTOOL_FLAG_COMPACT_BITSETS): value, and the mask
// unless NOMASK. A verbose one (bit names) is not what was asked for: malformed.
bool ReadBitset(const nlattr* attr, std::vector<uint32_t>& value, std::vector<uint32_t>& mask) {
  BitsetState state;
  if (mnl_attr_parse_nested(attr, OnBitsetAttribute, &state) < 0) return false;
  if (state.size == nullptr || mnl_attr_validate(state.size, MNL_TYPE_U32) < 0 ||
      state.value == nullptr) {
    return false;
  }
  const uint32_t bits = mnl_attr_get_u32(state.size);
  if (bits > kMaxBitsetBits || !ReadWords(state.value, bits, value)) return false;
  mask.clear();
  if (state.nomask) return true;
  return state.mask != nullptr && ReadWords(state.mask, bits, mask);
}

struct ReplyState {
  LinkModesReading* reading;
  bool malformed = false;
};

int OnLinkModesAttribute(const nlattr* attr, void* data) {
  auto* state = static_cast<ReplyState*>(data);
  LinkModesReading& r = *state->reading;
  switch (mnl_attr_get_type(attr)) {
    case ETHTOOL_A_LINKMODES_AUTONEG:
      if (mnl_attr_validate(attr, MNL_TYPE_U8) < 0) break;
      r.autoneg = mnl_attr_get_u8(attr) == AUTONEG_ENABLE;
      return MNL_CB_OK;
    case ETHTOOL_A_LINKMODES_OURS:
      if (!ReadBitset(attr, r.advertised, r.supported)) break;
      return MNL_CB_OK;
    case ETHTOOL_A_LINKMODES_SPEED: {
      if (mnl_attr_validate(attr, MNL_TYPE_U32) < 0) break;
      const uint32_t speed = mnl_attr_get_u32(attr);
      // SPEED_UNKNOWN (-1 as u32) while the link is down; 0 from some drivers likewise.
      if (speed != 0 && speed != static_cast<uint32_t>(SPEED_UNKNOWN)) r.speed_mbps = speed;
      return MNL_CB_OK;
    }
    case ETHTOOL_A_LINKMODES_LANES:
      if (mnl_attr_validate(attr, MNL_TYPE_U32) < 0) break;
      // The kernel allows 1..8 (ethnl_linkmodes_set_policy); another count is no lane count.
      if (const uint32_t lanes = mnl_attr_get_u32(attr); lanes >= 1 && lanes <= 8) {
        r.lanes = lanes;
      }
      return MNL_CB_OK;
    case ETHTOOL_A_LINKMODES_PEER: {
      std::vector<uint32_t> unused_mask;
      if (!ReadBitset(attr, r.peer, unused_mask)) break;
      return MNL_CB_OK;
    }
    default:  // the header, DUPLEX, master/slave, rate matching
      return MNL_CB_OK;
  }
  state->malformed = true;
  return MNL_CB_ERROR;
}

// The one lane count of the modes among `bits` of `speed`; none if none or several.
std::optional<uint32_t> UniqueLanes(const std::vector<uint32_t>& bits, uint32_t speed) {
  std::optional<uint32_t> lanes;
  for (const uint32_t bit : bits) {
    const auto params = LinkModeParamsOf(bit);
    if (!params || params->speed_mbps != speed) continue;
    if (lanes && *lanes != params->lanes) return std::nullopt;
    lanes = params->lanes;
  }
  return lanes;
}

}  // namespace

size_t BuildLinkModesDumpRequest(uint16_t family, uint32_t seq, std::vector<char>& buf) {
  return BuildEthtoolDumpRequest(family, ETHTOOL_MSG_LINKMODES_GET, ETHTOOL_A_LINKMODES_HEADER,
                                 ETHTOOL_FLAG_COMPACT_BITSETS, seq, buf);
}

int ParseLinkModesDump(const void* data, size_t len, std::vector<LinkModesReading>& out) {
  return RunEthtoolDump(
      data, len, ETHTOOL_MSG_LINKMODES_GET_REPLY, ETHTOOL_A_LINKMODES_HEADER,
      [&out](const EthtoolDumpEntry& entry) {
        LinkModesReading reading{.ifindex = entry.ifindex, .ifname = entry.ifname};
        ReplyState state{.reading = &reading};
        if (mnl_attr_parse(entry.message, GENL_HDRLEN, OnLinkModesAttribute, &state) < 0 ||
            state.malformed) {
          return false;
        }
        out.push_back(std::move(reading));
        return true;
      });
}

std::optional<LinkModeParams> LinkModeParamsOf(uint32_t bit) {
  const auto* row =
      std::ranges::find_if(kModes, [bit](const ModeRow& mode) { return mode.bit == bit; });
  if (row == std::end(kModes)) return std::nullopt;
  return LinkModeParams{row->speed_mbps, row->lanes};
}

std::optional<double> LaneSignallingRate(uint32_t lane_speed_mbps) {
  switch (lane_speed_mbps) {
    case 10000:
      return 10.3125e9;  // 64b/66b NRZ (clause 49/82)
    case 25000:
      return 25.78125e9;  // NRZ (clause 107/108; 100G x4 clause 91 RS(528,514))
    case 50000:
      return 53.125e9;  // PAM4, 26.5625 GBd (clause 134/135, RS(544,514))
    case 100000:
      return 106.25e9;  // PAM4, 53.125 GBd (clause 161/162)
    case 200000:
      return 212.5e9;  // PAM4, 106.25 GBd (802.3dj)
    default:
      return std::nullopt;
  }
}

std::optional<uint32_t> ActiveLanes(const LinkModesReading& reading) {
  if (!reading.speed_mbps) return std::nullopt;
  if (reading.lanes) return reading.lanes;
  if (auto lanes = UniqueLanes(reading.advertised, *reading.speed_mbps)) return lanes;
  return UniqueLanes(reading.supported, *reading.speed_mbps);
}

std::optional<double> LineRateBitsPerSecond(const LinkModesReading& reading) {
  const auto lanes = ActiveLanes(reading);
  if (!lanes || *reading.speed_mbps % *lanes != 0) return std::nullopt;
  const auto rate = LaneSignallingRate(*reading.speed_mbps / *lanes);
  if (!rate) return std::nullopt;
  return *rate * *lanes;
}

std::optional<uint32_t> MaxSupportedSpeedMbps(const LinkModesReading& reading) {
  std::optional<uint32_t> best;
  for (const uint32_t bit : reading.supported) {
    const auto params = LinkModeParamsOf(bit);
    if (params && (!best || params->speed_mbps > *best)) best = params->speed_mbps;
  }
  return best;
}

std::optional<uint32_t> CommonMaxSpeedMbps(const LinkModesReading& reading) {
  std::optional<uint32_t> best;
  for (const uint32_t bit : reading.peer) {
    if (!std::ranges::binary_search(reading.advertised, bit)) continue;
    const auto params = LinkModeParamsOf(bit);
    if (params && (!best || params->speed_mbps > *best)) best = params->speed_mbps;
  }
  return best;
}

}  // namespace rdmascope::sys
