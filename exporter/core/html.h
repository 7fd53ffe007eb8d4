// HTML escaping for every page we write: the landing page, the HTML profile report.
#pragma once

#include <string>
#include <string_view>

namespace rdmascope {

// Valid UTF-8 (bytes that are not become U+FFFD) with & < > " ' escaped: safe in element text
// and in quoted attribute values, of HTML and of inline SVG alike.
std::string HtmlEscape(std::string_view text);

}  // namespace rdmascope
