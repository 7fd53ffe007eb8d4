#include "sys/ethtool_fec.h"

#include <libmnl/libmnl.h>
#include <linux/ethtool.h>
#include <linux/ethtool_netlink.h>
#include <linux/genetlink.h>

#include <cstring>

#include "sys/ethtool_dump.h"

namespace rdmascope::sys {
namespace {

// A u64 array attribute (nla_put_64bit of `8 x count` bytes): at most the total and 8 lanes.
bool ReadArray(const nlattr* attr, std::vector<uint64_t>& out) {
  const size_t size = mnl_attr_get_payload_len(attr);
  if (size % sizeof(uint64_t) != 0 || size / sizeof(uint64_t) > 1 + kEthtoolMaxLanes) return false;
  out.resize(size / sizeof(uint64_t));
  if (size != 0) std::memcpy(out.data(), mnl_attr_get_payload(attr), size);
  return true;
}

bool ReadCounter(const nlattr* attr, FecCounter& counter) {
  std::vector<uint64_t> values;
  if (!ReadArray(attr, values)) return false;
  counter = {};
  if (values.empty()) return true;  // fec_stats_recalc: the driver did not set it
  counter.total = values.front();
  counter.lanes.assign(values.begin() + 1, values.end());
  return true;
}

// NLA_UINT (nla_put_uint): 4 bytes when the value fits, else 8.
bool ReadUint(const nlattr* attr, uint64_t& value) {
  const size_t size = mnl_attr_get_payload_len(attr);
  if (size == sizeof(uint32_t)) {
    value = mnl_attr_get_u32(attr);
  } else if (size == sizeof(uint64_t)) {
    std::memcpy(&value, mnl_attr_get_payload(attr), sizeof value);
  } else {
    return false;
  }
  return true;
}

struct BinState {
  FecHistogramBin bin;
  bool low = false, high = false, value = false, malformed = false;
};

int OnBinAttribute(const nlattr* attr, void* data) {
  auto* state = static_cast<BinState*>(data);
  switch (mnl_attr_get_type(attr)) {
    case kEthtoolFecHistBinLow:
      if (mnl_attr_validate(attr, MNL_TYPE_U32) < 0) break;
      state->bin.low = mnl_attr_get_u32(attr);
      state->low = true;
      return MNL_CB_OK;
    case kEthtoolFecHistBinHigh:
      if (mnl_attr_validate(attr, MNL_TYPE_U32) < 0) break;
      state->bin.high = mnl_attr_get_u32(attr);
      state->high = true;
      return MNL_CB_OK;
    case kEthtoolFecHistBinVal:
      if (!ReadUint(attr, state->bin.codewords)) break;
      state->value = true;
      return MNL_CB_OK;
    case kEthtoolFecHistBinValPerLane: {
      std::vector<uint64_t> lanes;
      if (!ReadArray(attr, lanes) || lanes.size() > kEthtoolMaxLanes) break;
      state->bin.lanes = std::move(lanes);
      return MNL_CB_OK;
    }
    default:  // ETHTOOL_A_FEC_HIST_PAD, and attributes of later kernels
      return MNL_CB_OK;
  }
  state->malformed = true;
  return MNL_CB_ERROR;
}

struct StatsState {
  FecReading* reading;
  bool malformed = false;
};

int OnStatsAttribute(const nlattr* attr, void* data) {
  auto* state = static_cast<StatsState*>(data);
  FecReading& r = *state->reading;
  bool ok = true;
  switch (mnl_attr_get_type(attr)) {
    case ETHTOOL_A_FEC_STAT_CORRECTED:
      ok = ReadCounter(attr, r.corrected);
      break;
    case ETHTOOL_A_FEC_STAT_UNCORR:
      ok = ReadCounter(attr, r.uncorrectable);
      break;
    case ETHTOOL_A_FEC_STAT_CORR_BITS:
      ok = ReadCounter(attr, r.corrected_bits);
      break;
    case kEthtoolFecStatHist: {
      BinState bin;
      ok = r.histogram.size() < kEthtoolMaxFecBins &&
           mnl_attr_parse_nested(attr, OnBinAttribute, &bin) >= 0 && !bin.malformed && bin.low &&
           bin.high && bin.value && bin.bin.low <= bin.bin.high;
      if (ok) r.histogram.push_back(std::move(bin.bin));
      break;
    }
    default:  // ETHTOOL_A_FEC_STAT_PAD
      break;
  }
  if (ok) return MNL_CB_OK;
  state->malformed = true;
  return MNL_CB_ERROR;
}

struct ReplyState {
  FecReading* reading;
  bool malformed = false;
};

int OnFecAttribute(const nlattr* attr, void* data) {
  auto* state = static_cast<ReplyState*>(data);
  FecReading& r = *state->reading;
  switch (mnl_attr_get_type(attr)) {
    case ETHTOOL_A_FEC_AUTO:
      if (mnl_attr_validate(attr, MNL_TYPE_U8) < 0) break;
      r.fec_auto = mnl_attr_get_u8(attr) != 0;
      return MNL_CB_OK;
    case ETHTOOL_A_FEC_ACTIVE:
      if (mnl_attr_validate(attr, MNL_TYPE_U32) < 0) break;
      r.active_link_mode = mnl_attr_get_u32(attr);
      return MNL_CB_OK;
    case ETHTOOL_A_FEC_STATS: {
      StatsState stats{.reading = &r};
      if (mnl_attr_parse_nested(attr, OnStatsAttribute, &stats) < 0 || stats.malformed) break;
      r.has_stats = true;
      return MNL_CB_OK;
    }
    default:  // the header, ETHTOOL_A_FEC_MODES (configured modes), later attributes
      return MNL_CB_OK;
  }
  state->malformed = true;
  return MNL_CB_ERROR;
}

}  // namespace

size_t BuildFecDumpRequest(uint16_t family, uint32_t seq, std::vector<char>& buf) {
  return BuildEthtoolDumpRequest(family, ETHTOOL_MSG_FEC_GET, ETHTOOL_A_FEC_HEADER,
                                 ETHTOOL_FLAG_STATS, seq, buf);
}

int ParseFecDump(const void* data, size_t len, std::vector<FecReading>& out) {
  return RunEthtoolDump(
      data, len, ETHTOOL_MSG_FEC_GET_REPLY, ETHTOOL_A_FEC_HEADER,
      [&out](const EthtoolDumpEntry& entry) {
        FecReading reading{.ifindex = entry.ifindex, .ifname = entry.ifname};
        ReplyState state{.reading = &reading};
        if (mnl_attr_parse(entry.message, GENL_HDRLEN, OnFecAttribute, &state) < 0 ||
            state.malformed) {
          return false;
        }
        out.push_back(std::move(reading));
        return true;
      });
}

std::string_view FecModeName(std::optional<uint32_t> link_mode) {
  if (!link_mode) return "none";
  switch (*link_mode) {
    case ETHTOOL_LINK_MODE_FEC_NONE_BIT:
      return "off";
    case ETHTOOL_LINK_MODE_FEC_RS_BIT:
      return "rs";
    case ETHTOOL_LINK_MODE_FEC_BASER_BIT:
      return "baser";
    case ETHTOOL_LINK_MODE_FEC_LLRS_BIT:
      return "llrs";
    default:
      return "other";
  }
}

}  // namespace rdmascope::sys
