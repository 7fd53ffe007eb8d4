// HTML escaping for every page we write (the landing page, the runbook, the HTML profile
// report), and the frame of the pages the exporter serves.
#pragma once

#include <string>
#include <string_view>

namespace rdmascope {

// Valid UTF-8 (bytes that are not become U+FFFD) with & < > " ' escaped: safe in element text
// and in quoted attribute values, of HTML and of inline SVG alike.
std::string HtmlEscape(std::string_view text);

// The start of every page `serve` answers with ("/", "/runbook"): doctype, charset, the title
// (escaped here) and the one style sheet they share, up to the opening <body>.
std::string HtmlPageHead(std::string_view title);
inline constexpr std::string_view kHtmlPageTail = "</body></html>\n";

}  // namespace rdmascope
