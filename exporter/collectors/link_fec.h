// The link collector's FEC and link-mode slice (issue 40, items 1, 2, 4, 5): every interface's
// FEC statistics (sys/ethtool_fec.h: totals, lanes, the 6.18 histogram) and link modes
// (sys/ethtool_linkmodes.h: speed, lanes, line rate, the port's and the link's maxima), each
// from ONE ethtool netlink dump per refresh interval (the refresher's thread; capture and
// replay: every sample), never in a scrape. An interface missing from a dump is one whose
// driver has no such source (the kernel skips EOPNOTSUPP in dumps): its
// rdma_link_source_available is 0, never a made-up 0 counter.
#pragma once

#include <expected>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "collectors/link_ports.h"
#include "core/metric_set.h"
#include "sys/ethtool_fec.h"
#include "sys/ethtool_linkmodes.h"

namespace rdmascope {

// The two dumps of one read; errno when a dump failed (ENOENT under replay: a capture made
// before this slice, which has no netlink/ethtool/*.bin).
struct LinkEthtoolDumps {
  std::expected<std::vector<sys::FecReading>, int> fec;
  std::expected<std::vector<sys::LinkModesReading>, int> modes;
};
using LinkEthtoolRead = std::function<LinkEthtoolDumps()>;

// The host's: ethtool netlink (its own socket, opened at the first read and kept; never under
// replay, which answers from the capture's netlink/ethtool/fec_get.bin and linkmodes_get.bin).
LinkEthtoolRead SystemLinkEthtoolRead();

// What a scrape maps, by interface name.
struct LinkFecSnapshot {
  bool read = false;  // a read was made (before it: no series, "no data" is not "no FEC")
  int fec_error = 0;  // the dump's errno, 0 when it read
  int modes_error = 0;
  std::map<std::string, sys::FecReading> fec;
  std::map<std::string, sys::LinkModesReading> modes;
  bool operator==(const LinkFecSnapshot&) const = default;
};
LinkFecSnapshot MakeLinkFecSnapshot(LinkEthtoolDumps dumps);

// What /debug/links keeps of `netdev`'s FEC counters at a down edge: "corrected 12,
// uncorrectable 0, corrected bits 96" (the totals the driver counts), "" when it counts none.
std::string FecAtEvent(const LinkFecSnapshot& fec, const std::string& netdev);

// The FEC and link-mode series of one port (`key`: its device, port and netdev labels), and
// its rdma_link_source_available for "fec", "fec_hist" and "linkmodes" (`available`: the
// family as link_metrics.cc declares it).
void MapLinkFec(const std::vector<Label>& key, const LinkPort& port, const LinkFecSnapshot& fec,
                const MetricDesc& available, MetricSet& out);

}  // namespace rdmascope
