#include "core/html.h"

#include "core/metric_set.h"

namespace rdmascope {

std::string HtmlEscape(std::string_view text) {
  const std::string valid = SanitizeUtf8(text);
  std::string out;
  out.reserve(valid.size());
  for (const char c : valid) {
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
        out += c;
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
