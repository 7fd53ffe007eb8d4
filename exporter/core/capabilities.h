// Least privilege for `rdmascope serve` (issue 15): the capabilities each collector needs to
// start (attach probes, open perf events) and to serve (each scrape), and the drop of every
// other capability once the collectors are built, before any thread starts.
// The table is docs/security.md's "Capabilities"; keep the two in step.
#pragma once

#include <expected>
#include <map>
#include <set>
#include <span>
#include <string>
#include <string_view>

namespace rdmascope::caps {

// A Linux capability number, as in <linux/capability.h> (CAP_NET_ADMIN = 12, ...).
using Capability = int;
using CapabilitySet = std::set<Capability>;

struct CollectorNeeds {
  std::string_view collector;
  CapabilitySet start;  // while the collector is built
  CapabilitySet serve;  // at every scrape, so kept after start-up
};

// One entry per collector of collectors/registry.cc.
std::span<const CollectorNeeds> Needs();

// The default of --capabilities.keep: what the enabled collectors need while serving. Never
// CAP_NET_BIND_SERVICE: the listening socket is bound before the drop (a privileged port needs
// it at start-up only) and reloads reuse that socket.
CapabilitySet ServingNeeds(const std::map<std::string, bool>& enabled);

// "cap_net_admin,perfmon" (libcap names, "cap_" optional, any case) -> set; "none" is the empty
// set. CAP_SYS_ADMIN and CAP_BPF are refused: they give the whole kernel away and no scrape
// needs them.
std::expected<CapabilitySet, std::string> ParseKeepList(std::string_view text);

// "cap_net_admin,cap_perfmon", or "none".
std::string Names(const CapabilitySet& set);

struct DropReport {
  CapabilitySet kept;                 // now the permitted and effective sets
  CapabilitySet not_permitted;        // asked for but not held at start-up (so not kept)
  bool bounding_set_cleared = false;  // needs CAP_SETPCAP (root); no_new_privs is set anyway
};

// Reduces the calling process to `keep`: permitted = effective = keep (what it holds of it),
// inheritable and ambient empty (a child gets nothing), the bounding set reduced to `keep`
// when CAP_SETPCAP allows, and no_new_privs set (no set-uid or file-capability exec regains
// anything). Capabilities are per thread: the process must have exactly one thread, or this
// fails (a thread started earlier would keep everything).
std::expected<DropReport, std::string> DropTo(const CapabilitySet& keep);

}  // namespace rdmascope::caps
