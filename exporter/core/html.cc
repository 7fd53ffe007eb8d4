#include "core/html.h"

#include <cstdio>

#include "core/metric_set.h"

namespace rdmascope {

std::string HtmlEscape(std::string_view text) {
  const std::string valid = SanitizeUtf8(text);
  std::string out;
  out.reserve(valid.size());
  for (size_t i = 0; i < valid.size(); ++i) {
    const char c = valid[i];
    const auto byte = static_cast<unsigned char>(c);
    char escaped[8];
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        // Control characters (but tab and line ends) are written as text, \x1b or \u009b:
        // never raw in a page saved, or printed by curl, to a terminal. C1 ones are
        // U+0080..U+009F, C2 80..C2 9F in UTF-8.
        if ((byte < 0x20 && c != '\t' && c != '\n' && c != '\r') || byte == 0x7f) {
          std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
          out += escaped;
        } else if (byte == 0xc2 && i + 1 < valid.size() &&
                   static_cast<unsigned char>(valid[i + 1]) <= 0x9f) {
          std::snprintf(escaped, sizeof escaped, "\\u%04x",
                        static_cast<unsigned char>(valid[i + 1]));
          out += escaped;
          ++i;
        } else {
          out += c;
        }
    }
  }
  return out;
}

std::string HtmlPageHead(std::string_view title) {
  return "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" + HtmlEscape(title) +
         "</title><style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
         "td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}"
         ".failed{color:#b00}.no-data{color:#777}"
         "pre{background:#f4f4f4;padding:8px;overflow-x:auto}"
         "code{background:#f4f4f4}</style></head><body>\n";
}

}  // namespace rdmascope
