// `rdmascope capture --redact` for the RDMA netlink replies a capture keeps as raw bytes
// (docs/capture.md "Redaction"): the attributes that identify a host or its network are
// redacted in place, same length, so that the replay's parser reads the reply as it read the
// kernel's: the node and system image GUIDs and a non-default subnet prefix (as GUIDs, OUI
// kept), and a connection's source and destination addresses (AF_INET, AF_INET6 and AF_IB:
// core/redact.h's rules for an IPv4 address and a GID).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/redact.h"

namespace rdmascope::sys {

// `bytes`: one or more whole netlink messages of NETLINK_RDMA (nldev), as received. nullopt
// when they are not whole messages (WholeNetlinkMessages) or an attribute runs past its
// message: such a reply is not kept rather than kept unredacted.
std::optional<std::string> RedactRdmaNetlink(const redact::Redactor& redactor,
                                             std::string_view bytes);

}  // namespace rdmascope::sys
