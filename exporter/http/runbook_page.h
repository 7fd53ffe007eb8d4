// The runbook served at /runbook: docs/runbook.md rendered when the binary was built
// (http/runbook.h, the generated runbook_html.cc).
#pragma once

#include <string>
#include <string_view>

#include "core/collector_runner.h"

namespace rdmascope {

// The rendered Markdown: an HTML fragment, headings with their GitHub ids.
std::string_view RunbookBodyHtml();

// The whole page, in the landing page's frame: version, a link back to "/", the body.
std::string RenderRunbookPage(const BuildInfo& build, std::string_view body);

}  // namespace rdmascope
