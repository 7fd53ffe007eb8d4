// An ethtool netlink dump (sys/ethtool_fec, sys/ethtool_linkmodes, sys/ethtool_dump): the FEC
// statistics and histogram of ETHTOOL_MSG_FEC_GET, the link modes of ETHTOOL_MSG_LINKMODES_GET.
// The first byte picks the parser (even: FEC, odd: link modes); the rest is the dump's bytes, as
// one receive buffer or as a capture's netlink/ethtool/*.bin replays them.
#include <algorithm>
#include <vector>

#include "sys/ethtool_fec.h"
#include "sys/ethtool_linkmodes.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool fec = (data[0] & 1) == 0;
  ++data;
  --size;
  std::vector<uint32_t> aligned((size + 3) / 4);  // as recv() fills an aligned buffer
  std::copy(data, data + size, reinterpret_cast<uint8_t*>(aligned.data()));
  if (fec) {
    std::vector<rdmascope::sys::FecReading> readings;
    rdmascope::sys::ParseFecDump(aligned.data(), size, readings);
    for (const auto& r : readings) {
      // Every reading within the kernel's bounds, whatever the bytes.
      if (r.histogram.size() > rdmascope::sys::kEthtoolMaxFecBins) __builtin_trap();
      if (r.corrected.lanes.size() > rdmascope::sys::kEthtoolMaxLanes) __builtin_trap();
      (void)rdmascope::sys::FecModeName(r.active_link_mode);
    }
  } else {
    std::vector<rdmascope::sys::LinkModesReading> readings;
    rdmascope::sys::ParseLinkModesDump(aligned.data(), size, readings);
    for (const auto& r : readings) {
      (void)rdmascope::sys::LineRateBitsPerSecond(r);
      (void)rdmascope::sys::MaxSupportedSpeedMbps(r);
      (void)rdmascope::sys::CommonMaxSpeedMbps(r);
    }
  }
  return 0;
}
