// /debug/links: the last link events of every followed port (collectors/link_events.h), as
// JSON for clients and as an HTML table for a browser (the server picks by Accept; ?format=json
// forces the JSON). Interface names and module strings are the host's: the JSON is escaped by
// the server (EscapeJsonControls), the HTML here (HtmlEscape), every field.
#pragma once

#include <string>

#include "collectors/link.h"

namespace rdmascope {

std::string LinkEventsJson(const LinkSnapshot& snapshot);
std::string LinkEventsHtml(const LinkSnapshot& snapshot);

}  // namespace rdmascope
