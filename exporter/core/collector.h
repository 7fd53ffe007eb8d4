// The contract between the framework and a collector.
//
// A collector reads one source (ethtool, sysfs, netlink, BPF maps...) and fills a MetricSet.
// It must be safe to call from several scrapes at once. It reports "no data" (nothing to
// collect on this host: not an error) through the result, and real failures by throwing;
// the framework (CollectorRunner) isolates both so that one collector never breaks a scrape.
#pragma once

#include <functional>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

#include "core/metric_set.h"

namespace rdmascope {

struct CollectResult {
  // True when the source does not exist on this host (no RDMA device, no netdev matched).
  bool no_data = false;
  // Shown on the landing page and logged: what is absent, or a count of what was seen.
  std::string detail;
};

// Extra HTTP endpoints a collector serves (e.g. /debug/mr/stacks): path -> handler taking
// the query string and returning a JSON body.
using DebugRoutes = std::map<std::string, std::function<std::string(std::string_view query)>>;

// Thrown by a debug route for a query it cannot serve (a bad parameter): the client's mistake,
// answered 400 with the message; any other exception is the server's, a 500.
struct BadRequest : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// The families the collectors listed before this one produced in the same scrape.
using EarlierFamilies = std::span<const prometheus::MetricFamily>;

class Collector {
 public:
  virtual ~Collector() = default;
  virtual CollectResult Collect(MetricSet& out) const = 0;
  // What the framework calls. A collector that describes other collectors' series (the
  // workload each exported pid runs for) overrides it and reads them, rather than reading
  // the host a second time to find the same processes; it is listed after them.
  virtual CollectResult CollectAfter(EarlierFamilies /*earlier*/, MetricSet& out) const {
    return Collect(out);
  }
  virtual void AddDebugRoutes(DebugRoutes& /*routes*/) {}
  // Why an eBPF probe set did not attach (the collector then serves a degraded view); empty
  // for collectors without probes. --probe.strict turns this into a start-up failure.
  virtual std::string ProbeError() const { return ""; }
};

}  // namespace rdmascope
