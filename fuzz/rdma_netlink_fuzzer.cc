// RDMA netlink (NLDEV) dump replies as recv() returns them: the resource summary, per-kind
// resource lists, devices, ports, and a raw CQ reply (sys/rdma_netlink). The first byte picks
// the parser; the rest is the receive buffer. The corpus's messages carry sequence number 1.
// Each input is also redacted (sys/rdma_netlink_redact.h).
#include <iterator>

#include "fuzz_input.h"
#include "sys/rdma_netlink.h"
#include "sys/rdma_netlink_redact.h"

using namespace rdmascope::sys;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rdmascope::fuzz::Input input(data, size);
  const uint8_t which = input.Byte();
  // The parsers read netlink headers in place: give them an aligned copy, as recv() does.
  const auto rest = input.Rest();
  std::vector<uint32_t> aligned((rest.size() + 3) / 4);
  std::copy(rest.begin(), rest.end(), reinterpret_cast<uint8_t*>(aligned.data()));
  const void* buf = aligned.data();
  const size_t len = rest.size();
  constexpr uint32_t kSeq = 1;
  constexpr size_t kKinds = std::size(kAllRdmaResourceKinds);
  switch (which % (4 + kKinds)) {
    case 0: {
      std::vector<RdmaDeviceResources> devices;
      ParseResourceSummaryReply(buf, len, kSeq, devices);
      break;
    }
    case 1: {
      std::vector<RdmaDeviceResources> devices;
      ParseDeviceReply(buf, len, kSeq, devices);
      break;
    }
    case 2: {
      std::vector<RdmaPortNetdev> ports;
      ParsePortReply(buf, len, kSeq, ports);
      break;
    }
    case 3: {
      std::vector<uint8_t> raw;
      ParseRawCqReply(buf, len, kSeq, raw);
      break;
    }
    default: {
      const RdmaResourceKind kind = kAllRdmaResourceKinds[which % (4 + kKinds) - 4];
      std::vector<RdmaResourceEntry> entries;
      ParseResourceReply(buf, len, kSeq, kind, entries);
      for (const auto& entry : entries) {
        if (entry.qp_type) QpTypeName(*entry.qp_type);
        if (entry.qp_state) QpStateName(*entry.qp_state);
      }
      break;
    }
  }
  // Every input also through capture --redact's walker, which rewrites replies in place.
  static const auto redactor = rdmascope::redact::Redactor::WithKey("fuzz-key-of-16-bytes");
  RedactRdmaNetlink(*redactor,
                    std::string_view(reinterpret_cast<const char*>(rest.data()), rest.size()));
  return 0;
}
