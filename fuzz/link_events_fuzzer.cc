// Why a link went down (collectors/link_events, issue 40): the rtnetlink link notices of one
// receive buffer (sys/rtnetlink_links ParseLinkMessages, what RTNLGRP_LINK sends a tenant's
// namespace changes through) handled as the watcher's thread handles them
// (LinkWatcher::Handle), every down edge asking LINKSTATE and getting the fuzzer's reply
// (sys/ethtool_linkstate ParseLinkStateReply, a driver's answer).
//
// Input: a length byte L, then L x 4 bytes of rtnetlink notices, then the LINKSTATE reply.
// The log follows eth0..eth3 (the names the seeds use), so that notices make edges.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "collectors/link_events.h"
#include "fuzz_input.h"
#include "sys/ethtool_linkstate.h"
#include "sys/rtnetlink_links.h"

// A broken promise names itself (the optimiser merges __builtin_trap()s, and with them the
// line a crash reports).
#define LINK_FUZZ_CHECK(condition)                                  \
  do {                                                              \
    if (!(condition)) {                                             \
      std::fprintf(stderr, "link_events_fuzzer: %s\n", #condition); \
      std::abort();                                                 \
    }                                                               \
  } while (false)

namespace {

using rdmascope::LinkEventLog;
using rdmascope::LinkEventReads;
using rdmascope::LinkWatcher;
using rdmascope::sys::LinkNotice;
using rdmascope::sys::LinkStateReading;

// Label values the series carry: bounded, never empty on a down edge, printable.
void CheckLabel(const std::string& value, bool may_be_empty) {
  LINK_FUZZ_CHECK(value.size() <= 64 && (may_be_empty || !value.empty()));
  for (const char c : value) {
    LINK_FUZZ_CHECK(c == '_' || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'));
  }
}

std::vector<uint32_t> Aligned(std::span<const uint8_t> bytes) {
  std::vector<uint32_t> aligned((bytes.size() + 3) / 4);  // as recv() fills an aligned buffer
  std::copy(bytes.begin(), bytes.end(), reinterpret_cast<uint8_t*>(aligned.data()));
  return aligned;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rdmascope::fuzz::Input input(data, size);
  const size_t notice_bytes = std::min<size_t>(size_t{input.Byte()} * 4, input.Rest().size());
  const std::span<const uint8_t> rest = input.Rest();
  const auto notices_buffer = Aligned(rest.first(notice_bytes));
  const auto reply_buffer = Aligned(rest.subspan(notice_bytes));
  const size_t reply_bytes = rest.size() - notice_bytes;

  std::vector<LinkNotice> notices;
  const int parsed =
      rdmascope::sys::ParseLinkMessages(notices_buffer.data(), notice_bytes, notices);
  LINK_FUZZ_CHECK(parsed >= 0);  // an errno, never negative
  for (const LinkNotice& notice : notices) {
    LINK_FUZZ_CHECK(notice.name.size() < 16);  // IFNAMSIZ, NUL included
  }

  const auto reply = rdmascope::sys::ParseLinkStateReply(reply_buffer.data(), reply_bytes);
  LINK_FUZZ_CHECK(reply || reply.error() > 0);
  LINK_FUZZ_CHECK(!reply || !reply->ext_substate || *reply->ext_substate != 0);

  LinkEventLog log;
  log.Follow({"eth0", "eth1", "eth2", "eth3"});
  LinkEventReads reads;
  reads.link_state = [&](const std::string&) { return reply; };
  reads.module = [](const std::string&) { return rdmascope::ModuleAtEvent{}; };
  reads.fec = [](const std::string&) { return std::string(); };
  const auto arrived = std::chrono::steady_clock::now();
  // Twice: the first batch is first sight of each interface, the second makes edges.
  LinkWatcher::Handle(log, reads, notices, arrived);
  LinkWatcher::Handle(log, reads, notices, arrived);

  const auto ports = log.Snapshot();
  LINK_FUZZ_CHECK(ports.size() <= 4);
  for (const auto& [netdev, port] : ports) {
    LINK_FUZZ_CHECK(port.recent.size() <= rdmascope::kEventsPerPort);
    for (const auto& [reason, count] : port.down_by_reason) {
      CheckLabel(reason.first, false);
      CheckLabel(reason.second, true);
      LINK_FUZZ_CHECK(count > 0);
    }
    for (const auto& event : port.recent) {
      if (event.down) CheckLabel(event.reason, false);
    }
  }
  return 0;
}
