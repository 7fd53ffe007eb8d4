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
#include <string>
#include <vector>

#include "collectors/link_events.h"
#include "fuzz_input.h"
#include "sys/ethtool_linkstate.h"
#include "sys/rtnetlink_links.h"

namespace {

using rdmascope::LinkEventLog;
using rdmascope::LinkEventReads;
using rdmascope::LinkWatcher;
using rdmascope::sys::LinkNotice;
using rdmascope::sys::LinkStateReading;

// Label values the series carry: bounded, never empty on a down edge, printable.
void CheckLabel(const std::string& value, bool may_be_empty) {
  if (value.size() > 64 || (!may_be_empty && value.empty())) __builtin_trap();
  for (const char c : value) {
    if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) __builtin_trap();
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
  if (parsed < 0) __builtin_trap();  // an errno, never negative
  for (const LinkNotice& notice : notices) {
    if (notice.name.size() >= 16) __builtin_trap();  // IFNAMSIZ, NUL included
  }

  const auto reply = rdmascope::sys::ParseLinkStateReply(reply_buffer.data(), reply_bytes);
  if (!reply && reply.error() <= 0) __builtin_trap();
  if (reply && reply->ext_substate && *reply->ext_substate == 0) __builtin_trap();

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
  if (ports.size() > 4) __builtin_trap();
  for (const auto& [netdev, port] : ports) {
    if (port.recent.size() > rdmascope::kEventsPerPort) __builtin_trap();
    for (const auto& [reason, count] : port.down_by_reason) {
      CheckLabel(reason.first, false);
      CheckLabel(reason.second, true);
      if (count == 0) __builtin_trap();
    }
    for (const auto& event : port.recent) {
      if (event.down) CheckLabel(event.reason, false);
    }
  }
  return 0;
}
