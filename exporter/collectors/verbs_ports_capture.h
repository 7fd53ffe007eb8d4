// libibverbs' port answers (active and max MTU) behind the host boundary of core/capture.h:
// live, the wrapped querier answers (one branch more); recording, its answer is also written
// into the sample as `verbs/query_port`; replaying, that file answers and libibverbs is never
// loaded. The file is text a person can write (docs/capture.md "Format"):
//
//   # device port active_mtu_bytes max_mtu_bytes
//   mlx5_0 1 1024 4096
#pragma once

#include <atomic>
#include <expected>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "collectors/verbs_ports.h"

namespace rdmascope {

inline constexpr std::string_view kVerbsQueryPortFile = "verbs/query_port";

using PortMtus = std::map<std::pair<std::string, uint32_t>, PortMtu>;

// The file's text for `mtus`, and back. Parsing refuses the whole file (EBADMSG, with the
// line in `why`) for a line that is not "device port active max" with a port in 1..255 and
// MTUs libibverbs can answer (256, 512, 1024, 2048, 4096): a made-up MTU is worse than none.
std::string FormatPortMtus(const PortMtus& mtus);
std::expected<PortMtus, std::string> ParsePortMtus(std::string_view text);

class CapturedPortMtuQuerier : public PortMtuQuerier {
 public:
  explicit CapturedPortMtuQuerier(std::unique_ptr<PortMtuQuerier> live) : live_(std::move(live)) {}
  PortMtus Query(const std::vector<RdmaDevice>& devices) const override;

 private:
  PortMtus Replay(const std::vector<RdmaDevice>& devices) const;

  std::unique_ptr<PortMtuQuerier> live_;
  mutable std::atomic<bool> failure_logged_{false};
};

}  // namespace rdmascope
